"""What CI and a terminal see: `--json` answers checked against schema/<command>.schema.json,
error objects, failure evidence (escape sequences only on a terminal), progress modes,
git provenance labels, `init` and shell completion. The image-building commands' JSON is
checked on the real engine in test_cli_image_e2e.py."""
from __future__ import annotations

import json
import os
import pty
import select
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
from referencing import Registry, Resource

ROOT = Path(__file__).resolve().parent.parent
SCHEMAS = ROOT / "schema"
ENVBUILD = shutil.which("envbuild")
COMMANDS = ("resolve", "matrix", "lock", "wheelhouse", "dockerfile", "image", "export", "verify", "doctor", "init",
            "env")


def _registry() -> Registry:
    resources = []
    for path in SCHEMAS.glob("*.schema.json"):
        schema = json.loads(path.read_text())
        if "$id" in schema:  # the command schemas (spec.schema.json is for editors)
            resources.append((schema["$id"], Resource.from_contents(schema)))
    return Registry().with_resources(resources)


def validate(command: str, data: dict) -> None:
    """Raise unless `data` is valid for `command` (or is a valid error object)."""
    name = "error" if data.get("verdict") == "error" else command
    schema = json.loads((SCHEMAS / f"{name}.schema.json").read_text())
    jsonschema.Draft202012Validator(schema, registry=_registry()).validate(data)


def envbuild(*args, cwd=None, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([ENVBUILD, *map(str, args)], capture_output=True, text=True, cwd=cwd, env=env, timeout=300)


def through_pty(argv: list[str], cwd=None, env=None, timeout: float = 300) -> tuple[int, str]:
    """Run `argv` with stdout and stderr on a pseudo-terminal; return (exit code, everything it wrote)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, cwd=cwd, env=env, close_fds=True)
    os.close(slave)
    chunks = []
    while True:
        ready, _, _ = select.select([master], [], [], timeout)
        if not ready:
            proc.kill()
            break
        try:
            data = os.read(master, 65536)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    return proc.wait(timeout=30), b"".join(chunks).decode(errors="replace")


def test_every_command_has_a_schema():
    for command in (*COMMANDS, "error", "probe"):
        schema = json.loads((SCHEMAS / f"{command}.schema.json").read_text())
        jsonschema.Draft202012Validator.check_schema(schema)
        assert schema["$id"].endswith(f"/{command}.schema.json")


@pytest.mark.parametrize("recipe", ["pytorch-official.yaml", "pytorch-1.6-cudatoolkit-11.0.yaml"])
def test_resolve_json_matches_its_schema(recipe):
    proc = envbuild("resolve", ROOT / "recipes" / recipe, "--json")
    data = json.loads(proc.stdout)
    validate("resolve", data)
    assert proc.returncode == (1 if data["verdict"] == "conflict" else 0)
    # the official recipe resolves (unverified while the catalog lacks its image's Python)
    assert (data["verdict"] == "conflict") == (not recipe.startswith("pytorch-official"))


@pytest.mark.parametrize("query", [("gpu", "A100"), ("cuda", "12.4"), ("driver", "550.54.15"), ("pytorch", "2.4.1"),
                                   ("images", "--family", "cuda"), ("grid", "pytorch", ">=2.7", "--gpu", "L4", "--gpu", "K80"),
                                   ("grid", "tensorflow")])
def test_matrix_json_matches_its_schema(query):
    proc = envbuild("matrix", *query, "--json")
    assert proc.returncode == 0, proc.stderr
    validate("matrix", json.loads(proc.stdout))


def test_doctor_json_matches_its_schema():
    proc = envbuild("doctor", "--json")
    data = json.loads(proc.stdout)
    validate("doctor", data)
    assert proc.returncode == (0 if data["ok"] else 1)


def test_lock_check_json_matches_its_schema(tmp_path):
    proc = envbuild("lock", ROOT / "recipes" / "pytorch-official.yaml", "--check", "-o", tmp_path, "--json")
    data = json.loads(proc.stdout)
    validate("lock", data)
    assert proc.returncode == 1 and data["up_to_date"] is False and data["problems"]


@pytest.mark.parametrize("command", COMMANDS)
def test_bad_input_gives_the_error_object_on_every_command(command, tmp_path):
    args = {"matrix": ("matrix", "gpu", "no-such-gpu"), "verify": ("verify", "x", "--gpus", "all", "--no-such-flag"),
            "export": ("export", "k8s", tmp_path / "missing.yaml", "-o", tmp_path / "job.yaml"),
            "doctor": ("doctor", "--no-such-flag"), "init": ("init", "-o", tmp_path / "spec.yaml", "--no-such-flag")}
    argv = args.get(command) or (command, tmp_path / "missing.yaml", "-o", tmp_path / "out")
    proc = envbuild(*argv, "--json", cwd=tmp_path)
    data = json.loads(proc.stdout)
    validate(command, data)
    assert data["verdict"] == "error" and proc.returncode == data["error"]["exit_code"] == 2
    assert proc.stderr.strip().splitlines()[-1] == f"envbuild: error: {data['error']['line']}"


# --- failure evidence: kept on a terminal, plain when piped ------------------------------------
FAIL_WITH_EVIDENCE = ("import sys; from envbuild.cli import _fail; from envbuild.infra.errors import UserError; "
                      "sys.exit(_fail(UserError('build step 5/9 failed', evidence='last lines of its log:\\n"
                      "    \\x1b[31mERROR\\x1b[0m: no wheel\\n'), json_wanted=False))")


def test_failure_evidence_is_plain_when_piped():
    proc = subprocess.run([sys.executable, "-c", FAIL_WITH_EVIDENCE], capture_output=True, text=True)
    lines = proc.stderr.splitlines()
    assert proc.returncode == 2 and "\x1b" not in proc.stderr
    assert lines == ["last lines of its log:", "    ERROR: no wheel", "envbuild: error: build step 5/9 failed"]


def test_failure_evidence_keeps_colour_on_a_terminal():
    code, out = through_pty([sys.executable, "-c", FAIL_WITH_EVIDENCE], env={**os.environ, "TERM": "xterm"})
    assert code == 2 and "\x1b[31mERROR\x1b[0m" in out
    assert out.strip().splitlines()[-1] == "envbuild: error: build step 5/9 failed"


# --- progress modes ------------------------------------------------------------------------------
PROGRESS_SCRIPT = """
import sys, time
from envbuild.output import progress as p
p.PLAIN_EVERY = float(sys.argv[2])
bar = p.Progress(quiet=sys.argv[1] == "quiet")
task = bar.task("layer abc123", total=100 * 2**20)
for i in range(1, 31):
    time.sleep(0.05)
    task.update(i * 2**20 * 100 / 30)
task.done("pushed")
bar.line("pushed registry/app@sha256:feed")
"""


def test_progress_is_live_on_a_terminal():
    code, out = through_pty([sys.executable, "-c", PROGRESS_SCRIPT, "live", "10"], env={**os.environ, "TERM": "xterm"})
    assert code == 0
    assert "\x1b[" in out and "layer abc123" in out  # drawn in place by rich
    assert "pushed registry/app@sha256:feed" in out


def test_progress_when_piped_is_plain_and_rate_limited():
    # a plain line at most every PLAIN_EVERY seconds per task (0.5 s here, 10 s in use), then its last line
    proc = subprocess.run([sys.executable, "-c", PROGRESS_SCRIPT, "plain", "0.5"], capture_output=True, text=True)
    assert proc.returncode == 0 and "\x1b" not in proc.stderr
    lines = proc.stderr.splitlines()
    updates = [x for x in lines if "layer abc123:" in x and "pushed (" not in x]
    assert 1 <= len(updates) <= 3, lines  # 1.5 s of updates every 50 ms
    assert all("MB" in x and "/s" in x for x in updates)  # bytes and rate
    assert any("layer abc123: pushed (104.9 MB of 104.9 MB" in x for x in lines), lines
    assert lines[-1] == "pushed registry/app@sha256:feed"


def test_progress_is_silent_with_quiet():
    proc = subprocess.run([sys.executable, "-c", PROGRESS_SCRIPT, "quiet", "0.1"], capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stderr == ""


def test_fast_commands_do_not_load_rich():
    code = "import sys; from envbuild.cli import main; main(['resolve', sys.argv[1]]); print('rich' in sys.modules)"
    proc = subprocess.run([sys.executable, "-c", code, ROOT / "recipes" / "cupy.yaml"], capture_output=True, text=True)
    assert proc.stdout.strip().splitlines()[-1] == "False"


# --- provenance, init, completion ----------------------------------------------------------------
def test_git_provenance_of_the_spec(tmp_path):
    from envbuild.image.provenance import git_provenance

    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "remote", "add", "origin", "https://user:secret@git.example.com/team/envs.git"], check=True)
    spec = tmp_path / "spec.yaml"
    spec.write_text("cuda: '12.4'\n")
    assert git_provenance(str(spec)) == {}  # no commit yet: nothing to claim
    subprocess.run([*git, "add", "spec.yaml"], check=True)
    subprocess.run([*git, "commit", "-qm", "spec"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    labels = git_provenance(str(spec))
    assert labels == {"org.opencontainers.image.revision": head,
                      "org.opencontainers.image.source": "https://git.example.com/team/envs.git"}
    spec.write_text("cuda: '12.6'\n")
    assert git_provenance(str(spec))["org.opencontainers.image.revision"] == head + "-dirty"


def test_init_writes_a_spec_that_resolves(tmp_path):
    proc = envbuild("init", "--json", cwd=tmp_path)
    data = json.loads(proc.stdout)
    validate("init", data)
    text = (tmp_path / "envbuild.yaml").read_text()
    assert text.count("\n#") > 5  # commented
    assert envbuild("resolve", "envbuild.yaml", cwd=tmp_path).returncode == 0
    # it names no base or image: judged for the machine it names, and its image build resolves too
    assert json.loads(envbuild("resolve", "envbuild.yaml", "--json", cwd=tmp_path).stdout)["judged_for"] == "host"
    assert envbuild("resolve", "envbuild.yaml", "--for", "image", cwd=tmp_path).returncode == 0
    again = envbuild("init", cwd=tmp_path)
    assert again.returncode == 2 and "already exists" in again.stderr
    assert (tmp_path / "envbuild.yaml").read_text() == text


def test_init_host_reads_this_machine(tmp_path):
    from envbuild.hostenv import hostinfo
    from envbuild.infra.errors import EnvironmentProblem

    try:
        host = hostinfo.detect(require_driver=True, check_docker=False)
    except EnvironmentProblem:
        host = None
    proc = envbuild("init", "--host", "--json", cwd=tmp_path)
    data = json.loads(proc.stdout)
    validate("init", data)
    if host is None:  # no driver here: one line, exit 3, no file
        assert proc.returncode == 3 and data["error"]["where"] == "--host"
        assert not (tmp_path / "envbuild.yaml").exists()
    else:
        assert proc.returncode == 0 and data["target"]["driver"] == host.driver
        assert envbuild("resolve", "envbuild.yaml", cwd=tmp_path).returncode in (0, 1)


def test_bash_completion_completes_commands_options_and_topics():
    script = envbuild("--completion", "bash").stdout
    probe = script + """
complete_words() { COMP_WORDS=("$@"); COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 )); _envbuild_complete; echo "${COMPREPLY[*]}"; }
complete_words envbuild ima
complete_words envbuild image --pu
complete_words envbuild matrix gp
complete_words envbuild wheelhouse --lock
"""
    out = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, check=True).stdout.splitlines()
    assert out == ["image", "--push", "gpu", "--lock-dir"]
    assert "bashcompinit" in envbuild("--completion", "zsh").stdout
