"""The conventions every command shares, through `envbuild.cli.main` (the console script's
function, run in this process; the console script itself for a sample): the spec
found in the current folder, -q/-v before or after the command, ENVBUILD_* variables (flag >
environment > spec, checked at the door), every mistake of a spec at once, a verdict in
every JSON answer (each validated against its schema), throttled status lines, byte counts
within their total, a shared cause printed once, and the fish completion run by fish."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import yaml

from cli_support import in_process
from test_ci_output import ROOT, validate

ENVBUILD = shutil.which("envbuild")
RECIPES = ROOT / "recipes"


def clean_environment() -> dict[str, str]:
    """This environment without the ENVBUILD_* request variables of the caller's shell."""
    return {k: v for k, v in os.environ.items() if not (k.startswith("ENVBUILD_") and not k.startswith("ENVBUILD_TEST"))}


def envbuild(*args, cwd: Path, env: dict | None = None, stdin: str | None = None) -> subprocess.CompletedProcess:
    """`envbuild ARGS` in `cwd`, with no ENVBUILD_* request variable of the caller's shell."""
    return in_process(*args, cwd=cwd, env={**clean_environment(), **(env or {})}, stdin=stdin)


def test_the_console_script_answers_as_main_does(tmp_path):
    """The spec found in the current folder and a variable beating it, through the console
    script, a process of its own: the same answer as `main` here gives."""
    envbuild("init", cwd=tmp_path)
    env = {**clean_environment(), "ENVBUILD_GPU": "V100"}
    done = subprocess.run([ENVBUILD, "resolve", "--json"], capture_output=True, text=True, cwd=tmp_path, env=env,
                          timeout=300)
    here = envbuild("resolve", "--json", cwd=tmp_path, env={"ENVBUILD_GPU": "V100"})
    assert (done.returncode, done.stdout, done.stderr) == (here.returncode, here.stdout, here.stderr)
    assert json.loads(done.stdout)["resolved"]["gpus"][0]["name"] == "NVIDIA V100"


def error_lines(proc: subprocess.CompletedProcess) -> list[str]:
    assert "Traceback" not in proc.stderr + proc.stdout
    return [line for line in proc.stderr.splitlines() if line.startswith("envbuild: error: ")]


# --- the spec in this folder ---------------------------------------------------------------------
def test_a_bare_resolve_beside_what_init_wrote_resolves_it(tmp_path):
    assert "next: `envbuild resolve`" in envbuild("init", cwd=tmp_path).stdout
    proc = envbuild("resolve", "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.splitlines() == ["envbuild: using spec ./envbuild.yaml (found in this folder)"]
    found = json.loads(proc.stdout)
    named = json.loads(envbuild("resolve", "envbuild.yaml", "--json", cwd=tmp_path).stdout)
    assert found["spec_hash"] == named["spec_hash"] and found["resolved"]["gpus"][0]["name"] == "NVIDIA A100"


def test_envbuild_yml_is_found_too_and_two_specs_are_refused(tmp_path):
    (tmp_path / "envbuild.yml").write_text("cuda: '12.4'\n")
    proc = envbuild("resolve", "--json", cwd=tmp_path)
    assert proc.returncode == 0 and json.loads(proc.stdout)["resolved"]["cuda"] == "12.4"
    assert "using spec ./envbuild.yml" in proc.stderr
    (tmp_path / "envbuild.yaml").write_text("cuda: '12.1'\n")
    proc = envbuild("resolve", cwd=tmp_path)
    assert proc.returncode == 2
    assert error_lines(proc) == ["envbuild: error: .: both envbuild.yaml and envbuild.yml are here: envbuild does not "
                                 "guess which is the spec (name one (`envbuild resolve envbuild.yaml`) or remove the "
                                 "other)"]
    assert envbuild("resolve", "envbuild.yaml", cwd=tmp_path).returncode == 0  # naming one is the way out


@pytest.mark.parametrize("command", ["lock", "dockerfile", "image", "wheelhouse", "export"])
def test_every_command_that_takes_a_spec_finds_it(command, tmp_path):
    """The spec found here is the one each command judges: a spec that does not resolve is
    refused by each with the same resolution `resolve` gives it (exit 1)."""
    shutil.copy(RECIPES / "pytorch-1.6-cudatoolkit-11.0.yaml", tmp_path / "envbuild.yaml")
    expected = json.loads(envbuild("resolve", "--json", cwd=tmp_path).stdout)
    args = {"lock": ("-o", "lock"), "dockerfile": ("-o", "ctx"), "image": ("--repository", "127.0.0.1:1/x"),
            "wheelhouse": ("-o", "wh"), "export": ("k8s", "--repository", "127.0.0.1:1/x")}[command]
    if command == "image":  # the engine is asked before any work: point it nowhere, the spec is read first
        proc = envbuild(command, *args, "--json", cwd=tmp_path, env={"DOCKER_HOST": "tcp://127.0.0.1:1"})
    else:
        proc = envbuild(command, *args, "--json", cwd=tmp_path)
    assert "using spec ./envbuild.yaml" in proc.stderr, proc.stderr
    answer = json.loads(proc.stdout)
    if answer["verdict"] == "error":  # export: the conflict as one line naming the spec, and no job
        assert command == "export" and answer["error"]["where"] == "envbuild.yaml", answer
        return
    assert proc.returncode == 1, proc.stderr
    assert answer["verdict"] == "conflict" and answer["spec_hash"] == expected["spec_hash"]


def test_export_reads_the_found_spec_for_its_job(tmp_path):
    (tmp_path / "envbuild.yaml").write_text("cuda: '12.4'\nresources: {gpus: 3}\n")
    proc = envbuild("export", "slurm", "--image", "127.0.0.1:5555/team/train:1", "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    answer = json.loads(proc.stdout)
    validate("export", answer)
    assert "#SBATCH --gres=gpu:3" in answer["definition"]


# --- -q and -v ------------------------------------------------------------------------------------
def test_quiet_and_verbose_before_or_after_the_command(tmp_path):
    envbuild("init", cwd=tmp_path)
    env = {"ENVBUILD_DRIVER": "550.54.15"}
    for argv in (("-q", "resolve"), ("resolve", "-q"), ("resolve", "--quiet")):
        proc = envbuild(*argv, cwd=tmp_path, env=env)
        assert proc.returncode == 0 and proc.stderr == "", (argv, proc.stderr)  # not even the spec it found
    for argv in (("-v", "resolve"), ("resolve", "--verbose"), ("-v", "matrix", "gpu", "A100"), ("matrix", "gpu", "A100", "-v")):
        proc = envbuild(*argv, cwd=tmp_path, env=env)
        assert proc.returncode == 0, (argv, proc.stderr)
        if "resolve" in argv:
            assert "envbuild: ENVBUILD_DRIVER=550.54.15 (from the environment; a flag would win)" in proc.stderr
    proc = envbuild("-q", "resolve", "-v", cwd=tmp_path)
    assert proc.returncode == 2 and error_lines(proc) == [
        "envbuild: error: -q/-v: -q and -v ask for opposite things (give one of them)"]


def test_verbose_shows_the_commands_envbuild_runs_with_credentials_masked(tmp_path):
    """A pip lock runs uv: -v shows its command line; the index's password never appears."""
    no_retries = {"UV_HTTP_RETRIES": "0"}  # nothing answers on port 9: uv's retries would only wait longer
    proc = envbuild("lock", "--framework", "cupy", "--cuda", "12", "--installer", "pip", "--python", "3.10",
                    "--index-url", "http://user:s3cret-token@127.0.0.1:9/simple", "-o", "lock", "-v", cwd=tmp_path,
                    env=no_retries)
    assert proc.returncode == 3, proc.stderr  # nothing answers on port 9
    running = [line for line in proc.stderr.splitlines() if line.startswith("envbuild: running: ")]
    assert running and "uv" in running[0] and "pip compile" in running[0], proc.stderr
    assert "s3cret-token" not in proc.stderr + proc.stdout
    quiet = envbuild("lock", "--framework", "cupy", "--cuda", "12", "--installer", "pip", "--python", "3.10",
                     "--index-url", "http://127.0.0.1:9/simple", "-o", "lock", cwd=tmp_path, env=no_retries)
    assert "envbuild: running:" not in quiet.stderr


# --- ENVBUILD_* variables -------------------------------------------------------------------------
def _driver(tmp_path, *flags, env=None) -> str:
    proc = envbuild("resolve", *flags, "--json", cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)["resolved"]["driver"]


def test_a_flag_beats_the_environment_which_beats_the_spec(tmp_path):
    (tmp_path / "envbuild.yaml").write_text("cuda: '12.4'\ntarget: {driver: '550.54.15', gpus: [A100]}\n")
    assert _driver(tmp_path) == "550.54.15"
    assert _driver(tmp_path, env={"ENVBUILD_DRIVER": "560.35.03"}) == "560.35.03"
    assert _driver(tmp_path, "--driver", "570.86.15", env={"ENVBUILD_DRIVER": "560.35.03"}) == "570.86.15"
    assert _driver(tmp_path, env={"ENVBUILD_DRIVER": ""}) == "550.54.15"  # empty is unset
    proc = envbuild("resolve", "--json", cwd=tmp_path,
                    env={"ENVBUILD_GPU": "V100, H100", "ENVBUILD_PYTHON": "3.11", "ENVBUILD_INSTALLER": "pip",
                         "ENVBUILD_PLATFORM": "linux-64", "ENVBUILD_STRICT": "yes", "ENVBUILD_CUDNN": "9"})
    answer = json.loads(proc.stdout)
    assert [g["name"] for g in answer["resolved"]["gpus"]] == ["NVIDIA V100", "NVIDIA H100"]
    assert answer["resolved"]["python"] == "3.11" and answer["resolved"]["installer"] == "pip"
    gpu = envbuild("resolve", "--gpu", "L4", "--json", cwd=tmp_path, env={"ENVBUILD_GPU": "V100"})
    assert [g["name"] for g in json.loads(gpu.stdout)["resolved"]["gpus"]] == ["NVIDIA L4"]


@pytest.mark.parametrize("name,value,expected", [
    ("ENVBUILD_DRIVER", "abc", "ENVBUILD_DRIVER: malformed driver version 'abc'"),
    ("ENVBUILD_CUDA", "twelve", "ENVBUILD_CUDA: malformed CUDA version 'twelve'"),
    ("ENVBUILD_CUDNN", "8.x", "ENVBUILD_CUDNN: malformed cuDNN version '8.x'"),
    ("ENVBUILD_PYTHON", "3", "ENVBUILD_PYTHON: Python version '3' needs major.minor"),
    ("ENVBUILD_INSTALLER", "mamba", "ENVBUILD_INSTALLER: unknown installer 'mamba'"),
    ("ENVBUILD_PLATFORM", "linux-aarch65", "ENVBUILD_PLATFORM: unknown platform 'linux-aarch65'"),
    ("ENVBUILD_GPU", "A100,;rm -rf", "ENVBUILD_GPU ';rm -rf': unreadable GPU name ';rm -rf'"),
    ("ENVBUILD_STRICT", "maybe", "ENVBUILD_STRICT: 'maybe' is not a yes or no"),
])
def test_a_bad_variable_is_refused_at_the_door_naming_it(name, value, expected, tmp_path):
    proc = envbuild("resolve", "--framework", "cupy", "--json", cwd=tmp_path, env={name: value})
    assert proc.returncode == 2
    lines = error_lines(proc)
    assert len(lines) == 1 and lines[0].startswith(f"envbuild: error: {expected}"), lines
    validate("resolve", json.loads(proc.stdout))


@pytest.mark.parametrize("name,value,expected", [
    ("ENVBUILD_REGISTRY_MIRROR", "not a mirror", "envbuild: error: ENVBUILD_REGISTRY_MIRROR: invalid registry mirror"),
    ("ENVBUILD_WHEELHOUSE", "/no/such/folder", "envbuild: error: ENVBUILD_WHEELHOUSE /no/such/folder: folder does not exist"),
])
@pytest.mark.parametrize("command", ["dockerfile", "export"])
def test_a_bad_build_input_variable_is_refused_naming_it(name, value, expected, command, tmp_path):
    args = ("-o", "ctx") if command == "dockerfile" else ("k8s", "--image", "127.0.0.1:5555/team/train:1")
    proc = envbuild(command, *args, "--cuda", "12.4", cwd=tmp_path, env={name: value})
    assert proc.returncode == 2 and len(error_lines(proc)) == 1
    assert error_lines(proc)[0].startswith(expected), proc.stderr
    assert not (tmp_path / "ctx").exists()


def test_the_documented_variables_are_the_ones_read():
    from envbuild.commands._build_inputs import ENVIRONMENT as BUILD_INPUTS
    from envbuild.spec.cli_args import ENVIRONMENT as REQUEST

    readme = (ROOT / "README.md").read_text()
    documented = set(re.findall(r"^  \| `(ENVBUILD_[A-Z_]+)` \|", readme, re.M))
    assert documented == set(REQUEST) | set(BUILD_INPUTS)


# --- every mistake of a spec at once ----------------------------------------------------------------
BAD_SPEC = """\
name: "bad name!"
frameworks: {pytroch: "2.1", cupy: ">=13"}
cuda: "12.x.y"
target:
  driver: "abc"
  gpus: ["A100", "RTX 9999 ???"]
  platfrom: linux-64
installer: mamba
channels: ["conda forge", conda-forge]
packages: {pip: ["torch==2.1", "einops==0.7.0"], conda: ["cudatoolkit=11.8"]}
env: {"1BAD": x, GOOD: "y"}
colour: blue
"""


def test_every_mistake_is_one_line_with_its_line_and_column(tmp_path):
    (tmp_path / "spec.yaml").write_text(BAD_SPEC)
    proc = envbuild("resolve", "spec.yaml", "--json", cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr.splitlines() == error_lines(proc)
    places = [re.match(r"envbuild: error: spec\.yaml:(\d+):(\d+): ", line) for line in error_lines(proc)]
    assert all(places), proc.stderr
    assert [int(p[1]) for p in places] == [1, 2, 3, 5, 6, 7, 8, 9, 10, 10, 11, 12]  # in file order, each once
    text = proc.stderr
    for what in ("name 'bad name!'", "unknown framework 'pytroch'", "malformed CUDA version '12.x.y'",
                 "malformed driver version 'abc'", "unreadable GPU name 'RTX 9999 ???'", "unknown key target: 'platfrom'",
                 "unknown installer 'mamba'", "malformed channel 'conda forge'", "torch is a framework",
                 "cudatoolkit chooses the CUDA variant", "env name '1BAD'", "unknown key 'colour'"):
        assert what in text, what
    answer = json.loads(proc.stdout)
    validate("resolve", answer)
    assert [e["line"] for e in answer["error"]["errors"]] == [line.removeprefix("envbuild: error: ")
                                                              for line in error_lines(proc)]
    assert answer["error"]["line"] == answer["error"]["errors"][0]["line"]


def test_more_than_twenty_mistakes_show_twenty_and_the_count(tmp_path):
    (tmp_path / "spec.yaml").write_text("cuda: '12.4'\n" + "".join(f"key{i}: 1\n" for i in range(25)))
    proc = envbuild("resolve", "spec.yaml", cwd=tmp_path)
    lines = error_lines(proc)
    assert proc.returncode == 2 and len(lines) == 21
    assert lines[-1] == "envbuild: error: 5 more mistakes not shown (fix these and run again)"


def test_a_mistake_in_the_file_and_one_in_a_flag_both_show(tmp_path):
    (tmp_path / "spec.yaml").write_text("cuda: '12.4'\npython: '3'\n")
    lines = error_lines(envbuild("resolve", "spec.yaml", "--driver", "5xx", cwd=tmp_path))
    assert lines == ["envbuild: error: spec.yaml:2:9: Python version '3' needs major.minor (write it like \"3.10\")",
                     "envbuild: error: --driver: malformed driver version '5xx' (write it as nvidia-smi prints it, "
                     "e.g. 535.104.05)"]


def test_pins_are_compared_only_once_each_reads(tmp_path):
    """A CUDA that does not read is one mistake, not also a disagreement with the +cu pin."""
    (tmp_path / "spec.yaml").write_text("frameworks: {pytorch: 2.1.2+cu121}\ncuda: '12.x.y'\ninstaller: pip\n")
    lines = error_lines(envbuild("resolve", "spec.yaml", cwd=tmp_path))
    assert len(lines) == 1 and "malformed CUDA version" in lines[0]


# --- a verdict in every JSON answer, each checked against its schema ----------------------------------
def test_every_schema_has_an_id_and_every_command_answer_a_verdict():
    import jsonschema

    for path in sorted((ROOT / "schema").glob("*.schema.json")):
        schema = json.loads(path.read_text())
        jsonschema.Draft202012Validator.check_schema(schema)
        if path.name in ("spec.schema.json", "fleet.schema.json"):  # inputs, for editors
            continue
        assert schema["$id"] == f"https://envbuild.dev/schema/{path.name}"
        branches = [schema] + [b for b in schema.get("oneOf", ()) if "$ref" not in b] + \
            list(schema.get("$defs", {}).values())
        answers = [b for b in branches if "verdict" in b.get("properties", {})]
        assert answers and all("verdict" in b["required"] for b in answers), path.name


@pytest.mark.parametrize("argv,schema", [
    (("matrix", "gpu", "A100"), "matrix"),
    (("doctor",), "doctor"),
    (("lock", "--cuda", "12.4", "--check", "-o", "lock"), "lock"),
    (("resolve", "--fleet", ROOT / "tests" / "data" / "fleets" / "fleet.yaml", "--framework", "pytorch==2.3.1"),
     "resolve"),
])
def test_json_answers_carry_a_verdict(argv, schema, tmp_path):
    proc = envbuild(*argv, "--json", cwd=tmp_path)
    answer = json.loads(proc.stdout)
    validate(schema, answer)
    assert answer["verdict"] in {"ok", "fail", "stale", "conflict", "unverified"}, answer["verdict"]


@pytest.mark.parametrize("kind", ["k8s", "slurm", "batch", "metaflow", "coiled", "flyte"])
def test_export_json_matches_its_schema(kind, tmp_path):
    fleet = ROOT / "tests" / "data" / "fleets" / "fleet.yaml"
    target = {"k8s": "a100-mig", "slurm": "v100-slurm", "batch": "g5", "coiled": "h100", "flyte": "l4-flyte",
              "metaflow": "g5"}[kind]
    proc = envbuild("export", kind, "--image", "127.0.0.1:5555/team/train:1", "--fleet", fleet, "--target", target,
                    "-o", f"job-{kind}", "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    answer = json.loads(proc.stdout)
    validate("export", answer)
    assert answer["definition"] == (tmp_path / f"job-{kind}").read_text()
    # the registry has no such image, so no labels tell the stack: a job nobody judged there is no ok
    assert answer["verdict"] == "unverified" and answer["conflicts"] == []
    assert answer["unchecked"][0]["message"].startswith(f"the stack was not judged on target {target}: ")


def test_the_probe_report_matches_its_schema(tmp_path):
    for argv in (["--json", "--static"], ["--json", "--no-perf"]):
        proc = subprocess.run([sys.executable, "-m", "envbuild.verify.probe", *argv], capture_output=True, text=True,
                              cwd=tmp_path, timeout=600)
        report = json.loads(proc.stdout)
        validate("probe", report)
        assert report["verdict"] == ("pass" if proc.returncode == 0 else "fail")
    doctor = json.loads(envbuild("doctor", "--probe", "--json", cwd=tmp_path).stdout)
    validate("doctor", doctor)
    validate("probe", doctor["probe"])


def test_verify_fleet_json_has_a_verdict_when_nothing_ran(tmp_path):
    """Kubernetes without a kube context and AWS Batch: definitions written, nothing run."""
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text("targets:\n  a100:\n    gpu: A100\n    scheduler: {kind: k8s, namespace: ml}\n"
                     "  g5:\n    gpu: A10G\n    scheduler: {kind: batch, job_queue: q}\n")
    proc = envbuild("verify", "127.0.0.1:5555/team/train:1", "--fleet", fleet, "--workdir", tmp_path / "work",
                    "--json", cwd=tmp_path, env={"KUBECONFIG": str(tmp_path / "none")})
    answer = json.loads(proc.stdout)
    validate("verify", answer)
    assert proc.returncode == 1 and answer["verdict"] == "not_run" and answer["summary"]["not_run"] == 2


# --- status lines, byte counts and causes -------------------------------------------------------------
STATUS_SCRIPT = """
import sys, time
from envbuild.output import progress as p
p.PLAIN_EVERY = float(sys.argv[1])
bar = p.Progress()
for i in range(1, 41):
    bar.status(f"verify: {i // 10}/4 done (poll {i})")
    time.sleep(0.05)
bar.line("a milestone")
bar.done()
"""


def test_a_polled_status_line_is_throttled_when_piped_and_its_last_state_shown():
    # An interval longer than the run, so the count does not depend on how loaded the machine is:
    # of 40 polls only the first and the last state are printed.
    proc = subprocess.run([sys.executable, "-c", STATUS_SCRIPT, "3600"], capture_output=True, text=True)
    lines = proc.stderr.splitlines()
    status = [line for line in lines if line.startswith("verify: ")]
    assert len(status) == 2, lines
    assert status[0] == "verify: 0/4 done (poll 1)" and lines[-1] == "verify: 4/4 done (poll 40)"
    assert "a milestone" in lines and "\x1b" not in proc.stderr and "\r" not in proc.stderr


def test_on_a_terminal_the_status_line_is_redrawn_in_place_and_its_last_state_kept():
    from test_ci_output import through_pty

    code, out = through_pty([sys.executable, "-c", STATUS_SCRIPT, "0.5"], env={**os.environ, "TERM": "xterm"})
    assert code == 0 and out.count("\r\x1b[Kverify: ") == 39  # each poll over the one before
    assert out.endswith("verify: 4/4 done (poll 40)\r\na milestone\r\n"), out[-200:]


def test_a_byte_count_never_exceeds_its_total():
    from envbuild.output.progress import Progress

    class Lines:
        def __init__(self):
            self.text = ""

        def write(self, text):
            self.text += text

        def flush(self):
            pass

    out = Lines()
    bar = Progress(out, terminal=False, quiet=False)
    task = bar.task("layer abc", total=3_004_364)
    task.update(3_310_592)  # what Docker reports for a layer of 300 small files (tar headers counted)
    assert task.completed == task.total == 3_310_592
    task.done("pushed")
    assert "layer abc: pushed (3.3 MB of 3.3 MB" in out.text


def test_a_cause_shared_by_several_checks_is_printed_once():
    from envbuild.verify import probe_api as probe

    checks = [probe.check("gpu.nvidia_smi", "fail", "no GPU visible: nvidia-smi not found", "no driver here", "run with a GPU")]
    checks += [probe.check(f"cupy.{name}", "fail", "no GPU visible", "no GPU is passed to this environment",
                           "run with a GPU (docker --gpus all)") for name in ("devices", "elementwise", "reduction")]
    checks.append(probe.check("static.python", "pass", "Python 3.11"))
    report = {"mode": "full", "python": "3.11", "elapsed_s": 1.0, "checks": checks,
              "summary": {"pass": 1, "fail": 4, "warn": 0, "skip": 0, "ok": False,
                          "failed_required": [c["name"] for c in checks[:4]]}}
    text = probe.format_text(report)
    assert text.count("cause: no GPU is passed to this environment") == 1
    assert text.count("fix:   run with a GPU (docker --gpus all)") == 1
    assert "explains 3 checks: cupy.devices, cupy.elementwise, cupy.reduction" in text
    assert text.count("cause: no driver here") == 1 and "explains 1" not in text


@pytest.mark.docker
def test_push_progress_of_many_small_files_stays_within_the_total(tmp_path, docker_client, registry, base_image):
    """A layer of 400 small files: Docker's count of its tar stream overruns its total."""
    import io

    from envbuild.image.push import push
    from envbuild.output.progress import Progress
    from image_support import TEST_NAMESPACE

    # A run-unique file: a layer the shared registry already holds is mounted, not uploaded,
    # and then no byte counts are printed at all.
    (tmp_path / "files").mkdir()
    (tmp_path / "files" / "run.txt").write_text(uuid.uuid4().hex)
    for i in range(400):
        (tmp_path / "files" / f"f{i}.txt").write_text(f"file {i}\n" * (i % 7 + 1))
    (tmp_path / "Dockerfile").write_text(f"FROM {base_image}\nCOPY files/ /data/\n")
    repository = f"{registry}/{TEST_NAMESPACE}/small-files"
    docker_client.images.build(path=str(tmp_path), tag=f"{repository}:t", rm=True)
    out = io.StringIO()
    pushed = push(docker_client, repository, "t", progress=Progress(out, terminal=False, quiet=False))
    assert pushed.digest.startswith("sha256:")
    amounts = re.findall(r"\(([\d.]+) (\w+) of ([\d.]+) (\w+),", out.getvalue())
    assert amounts, out.getvalue()
    for done, unit, total, total_unit in amounts:
        assert unit != total_unit or float(done) <= float(total), out.getvalue()


# --- fish completion ---------------------------------------------------------------------------------
def test_fish_completion_completes_commands_options_values_and_topics(tmp_path):
    fish = shutil.which("fish")
    assert fish, "fish is missing: scripts/services.sh installs it"
    script = tmp_path / "envbuild.fish"
    script.write_text(envbuild("--completion", "fish", cwd=tmp_path).stdout)
    probe = f"""source {script}
for line in 'envbuild ima' 'envbuild image --pu' 'envbuild matrix gp' 'envbuild matrix images --fam' \\
            'envbuild image --progress ' 'envbuild -' 'envbuild verify x --sta'
    echo "== $line"
    complete -C "$line"
end
"""
    out = subprocess.run([fish, "--no-config", "-c", probe], capture_output=True, text=True, check=True,
                         env={**os.environ, "HOME": str(tmp_path)}).stdout
    blocks = {b.split("\n", 1)[0]: b.split("\n", 1)[1] if "\n" in b else "" for b in out.split("== ")[1:]}
    words = {k: [line.split("\t")[0] for line in v.splitlines()] for k, v in blocks.items()}
    assert words["envbuild ima"] == ["image"]
    assert words["envbuild image --pu"] == ["--push"]
    assert words["envbuild matrix gp"] == ["gpu"]
    assert words["envbuild matrix images --fam"] == ["--family"]
    assert sorted(words["envbuild image --progress "]) == ["auto", "plain", "tty"]
    assert {"-q", "-v", "--quiet", "--verbose", "--completion", "--version"} <= set(words["envbuild -"])
    assert words["envbuild verify x --sta"] == ["--static"]
    assert "push the image" in blocks["envbuild image --pu"]  # the option's help as its description
