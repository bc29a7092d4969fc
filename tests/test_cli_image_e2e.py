"""The product as a user drives it: a spec file, then `envbuild resolve`, `lock`,
`dockerfile`, `image --push`, `image` again (cache hit), `image --verify` and `verify`,
each through the `envbuild` console script, against the real Docker engine and the
local registry. The framework is PyTorch 2.4.1 for CUDA 12.4 from a local channel of
real (tiny) conda archives named and wired like the pytorch / nvidia channels' own, and
the base is a real catalog reference served by the registry mirror."""
from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
import uuid
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import requests
import yaml

from cli_support import in_process
from envbuild.verify.probe_api import NO_GPU
from image_support import TEST_NAMESPACE
from test_ci_output import through_pty, validate
from lock_channels import PYTORCH_CU124_PACKAGES, archive_channel

pytestmark = pytest.mark.docker
BASE = "nvidia/cuda:12.4.1-cudnn-runtime-ubuntu22.04"  # matrices/base_images.yaml
ENVBUILD = shutil.which("envbuild")
APP = f"{TEST_NAMESPACE}/e2e-app"  # this run's repository (conftest removes its images)


def write_spec(folder: Path, repository: str, **extra) -> Path:
    """A spec file as a user writes it, asking for the local channel's PyTorch GPU build."""
    channel = folder / "channel"
    if not channel.is_dir():
        asyncio.run(archive_channel(channel, PYTORCH_CU124_PACKAGES))
    spec = {
        "name": "e2e-train",
        "frameworks": {"pytorch": "2.4.1"},
        "python": "3.11",
        "target": {"driver": "550.54.15", "gpus": ["A100"], "platform": "linux-64"},
        "installer": "conda",
        "base_image": BASE,
        "channels": [channel.as_uri()],
        "image": {"repository": repository},
        **extra,
    }
    path = folder / f"spec{'-' + uuid.uuid4().hex[:6] if extra else ''}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def envbuild(*args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    assert ENVBUILD, "the envbuild console script is on PATH (pip install -e .)"
    return subprocess.run([ENVBUILD, *map(str, args)], capture_output=True, text=True, cwd=cwd, env=env,
                          timeout=300)


def ok(proc: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    return proc


def one_error_line(proc: subprocess.CompletedProcess) -> str:
    """Bad input: non-zero exit, no traceback, exactly one `envbuild: error:` line, last."""
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr + proc.stdout
    lines = proc.stderr.strip().splitlines()
    errors = [line for line in lines if line.startswith("envbuild: error:")]
    assert len(errors) == 1 and lines[-1] == errors[0], proc.stderr
    return errors[0]


def registry_tags(registry: str, repository: str) -> set[str]:
    answer = requests.get(f"http://{registry}/v2/{repository}/tags/list", timeout=10)
    if answer.status_code == 404:  # repository never pushed
        return set()
    answer.raise_for_status()
    return set(answer.json().get("tags") or ())


def built_ref(stderr: str) -> str:
    """The content-tagged reference `envbuild image` announces before building."""
    found = re.search(r"^building (\S+) from ", stderr, re.M)
    assert found, stderr
    return found.group(1)


@pytest.fixture(scope="module")
def no_gpu_host(docker_client):
    if "nvidia" in (docker_client.info().get("Runtimes") or {}):
        pytest.skip("this Docker engine can run GPU containers; these tests cover a host without one")


@pytest.fixture(scope="module")
def pushed(tmp_path_factory, registry, wheelhouse, docker_client):
    """Steps 1-2: spec file -> resolve -> lock -> dockerfile -> image --push."""
    work = tmp_path_factory.mktemp("e2e")
    spec = write_spec(work, f"{registry}/{APP}")
    mirror = ("--registry-mirror", registry)

    resolved = json.loads(ok(envbuild("resolve", spec, "--json", cwd=work)).stdout)
    assert resolved["verdict"] == "ok"
    stack = resolved["resolved"]
    assert [(f["name"], f["version"], f["cuda"], f["installer"]) for f in stack["frameworks"]] == \
        [("pytorch", "2.4.1", "12.4", "conda")]
    assert stack["base_image"]["ref"] == BASE and stack["cuda"] == "12.4"

    locked = json.loads(ok(envbuild("lock", spec, "-o", work / "lock", "--json", cwd=work)).stdout)
    validate("lock", locked)
    assert locked["verdict"] == "ok" and locked["spec_hash"] == resolved["spec_hash"]
    lockfile = yaml.safe_load((work / "lock" / "conda-lock.yml").read_text())
    assert lockfile["metadata"]["custom_metadata"]["envbuild.spec_hash"] == resolved["spec_hash"]
    locked = {p["name"]: p for p in lockfile["package"]}
    assert locked["pytorch"]["build"] == "py3.11_cuda12.4_cudnn9.1.0_0"  # never the CPU twin
    assert locked["pytorch-mutex"]["build"] == "cuda" and locked["cuda-version"]["version"] == "12.4"

    proc = ok(envbuild("dockerfile", spec, "-o", work / "ctx", "--lock-dir", work / "lock", *mirror, "--json", cwd=work))
    assert "locking into" not in proc.stderr  # the lock matches the spec: used as it is
    rendered = json.loads(proc.stdout)
    validate("dockerfile", rendered)
    assert rendered["base"]["reference"] == f"{registry}/{BASE}" and "conda-lock.yml" in rendered["lock_files"]
    dockerfile = (work / "ctx" / "Dockerfile").read_text()
    assert f"FROM {registry}/{BASE} AS install" in dockerfile
    assert (work / "ctx" / "envbuild" / "image" / "lock" / "conda-lock.yml").read_bytes() == \
        (work / "lock" / "conda-lock.yml").read_bytes()

    image_args = ("image", spec, "--lock-dir", work / "lock", *mirror, "--wheelhouse", wheelhouse,
                  "--progress", "plain")
    proc = ok(envbuild(*image_args, "--push", cwd=work))
    ref, pushed_line = proc.stdout.split()
    repository, digest = pushed_line.split("@")
    assert repository == f"{registry}/{APP}" and re.fullmatch(r"sha256:[0-9a-f]{64}", digest)
    assert ref.startswith(f"{repository}:") and built_ref(proc.stderr) == ref
    assert f"pushed {pushed_line}" in proc.stderr
    yield {"work": work, "spec": spec, "resolved": resolved, "lockfile": lockfile, "ref": ref,
           "by_digest": pushed_line, "digest": digest, "image_args": image_args}


def test_pulled_by_digest_the_image_holds_the_locked_environment(pushed, docker_client, registry):
    """Step 3: pull by digest as a cluster would; the locked packages, labels and env are there."""
    ref, by_digest = pushed["ref"], pushed["by_digest"]
    built_id = docker_client.api.inspect_image(ref)["Id"]
    docker_client.api.remove_image(ref)  # only the registry has it now
    assert docker_client.images.pull(by_digest).id == built_id

    run = subprocess.run(["docker", "run", "--rm", by_digest, "sh", "-c",
                          'python3 -c "import sys, torch; print(torch.__version__, torch.version.cuda, sys.prefix)"; '
                          "ls /opt/env/conda-meta; env"], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0] == "2.4.1 12.4 /opt/env"  # the CUDA build, imported from the environment's own python3
    locked = {f"{p['name']}-{p['version']}-{p['build']}.json" for p in pushed["lockfile"]["package"]}
    assert len(locked) == 8 and locked <= set(lines)
    env = dict(line.split("=", 1) for line in lines if "=" in line)
    assert env["NVIDIA_VISIBLE_DEVICES"] == "all"
    assert env["NVIDIA_DRIVER_CAPABILITIES"] == "compute,utility"
    assert env["NVIDIA_REQUIRE_CUDA"].split()[0] == "cuda>=12.4"

    labels = docker_client.api.inspect_image(by_digest)["Config"]["Labels"]
    assert labels["org.opencontainers.image.title"] == "e2e-train"
    assert labels["org.opencontainers.image.base.name"] == f"{registry}/{BASE}"
    assert "pytorch 2.4.1" in labels["org.opencontainers.image.description"]
    assert labels["io.envbuild.spec-hash"] == pushed["resolved"]["spec_hash"]
    assert labels["io.envbuild.matrix-version"] == pushed["resolved"]["matrix_version"]
    assert labels["io.envbuild.frameworks"] == "pytorch==2.4.1+cuda12.4"
    assert labels["io.envbuild.cuda"] == "12.4" and labels["io.envbuild.base"] == BASE
    assert labels["io.envbuild.gpus"] == "NVIDIA A100=8.0"
    # what the lock installed, not the constraint; when and from what it was built
    assert labels["io.envbuild.installed.pytorch"] == "2.4.1"
    assert labels["io.envbuild.installed.cuda-version"] == "12.4"
    assert labels["io.envbuild.installed.python"].startswith("3.11")
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", labels["org.opencontainers.image.created"])
    assert labels["org.opencontainers.image.version"] == ref.rsplit(":", 1)[1]
    base_digest = labels["org.opencontainers.image.base.digest"]  # recorded without --pin-digests too
    assert base_digest == requests.head(f"http://{registry}/v2/{BASE.split(':')[0]}/manifests/{BASE.split(':')[1]}",
                                        headers={"Accept": "application/vnd.docker.distribution.manifest.v2+json"},
                                        timeout=10).headers["Docker-Content-Digest"]
    assert "org.opencontainers.image.revision" not in labels  # the spec is not in a git checkout


def test_same_spec_again_is_a_cache_hit(pushed, docker_client):
    """Step 4: nothing changed, so nothing is built (the image is local or in the registry)."""
    proc = ok(envbuild(*pushed["image_args"], cwd=pushed["work"]))
    assert proc.stdout.split() == [pushed["ref"]]
    assert re.search(rf"up to date: {re.escape(pushed['ref'])} already exists (locally|in the registry); "
                     "nothing to build", proc.stderr)
    assert "building " not in proc.stderr and "[1/" not in proc.stderr


def test_image_context_in_a_folder_with_foreign_files(pushed, tmp_path):
    """`image --context DIR` keeps the user's files byte-identical, and they are no input to
    the content tag: the same spec is the same (cached) image."""
    from test_outputs import foreign_files, snapshot

    ctx = tmp_path / "ctx"
    foreign_files(ctx)
    before = snapshot(ctx)
    args = (*pushed["image_args"], "--context", ctx)
    refused = envbuild(*args, cwd=pushed["work"])
    assert refused.returncode == 2 and "did not write" in one_error_line(refused)
    assert snapshot(ctx) == before
    proc = ok(envbuild(*args, "--force", cwd=pushed["work"]))
    assert proc.stdout.split()[0] == pushed["ref"] and "up to date" in proc.stderr
    assert (ctx / "Dockerfile").is_file()
    assert snapshot(ctx, skip=("Dockerfile", "envbuild", ".envbuild-outputs")) == before
def test_cache_hit_json(pushed):
    """`image --json`: reference, tags, cache hit, sizes, verification verdict (how fast a
    cache hit is: bench/bench_cache_hit.py)."""
    proc = ok(envbuild(*pushed["image_args"], "--json", cwd=pushed["work"]))
    data = json.loads(proc.stdout)
    validate("image", data)
    assert data["reference"] == pushed["ref"] and data["cache_hit"] is True
    if data["cached"] == "local":
        assert data["tags"] == [pushed["ref"]] and data["sizes"]["image_bytes"] > 10_000_000
    else:  # an earlier test left it only in the registry: nothing is pulled for a plain cache check
        assert data["cached"] == "registry" and data["image_id"] is None
    assert data["verification"] == {"verdict": "not_run"} and data["digest"] is None
    assert "building " not in proc.stderr and "locking into" not in proc.stderr  # nothing was redone


def test_progress_through_a_terminal_piped_and_quiet(pushed, registry):
    """The pushed stack built again under new repositories (same lock, the engine's layer
    cache warm): live on a pty (escape sequences, steps), plain lines when piped (none),
    nothing at all with -q."""
    work = pushed["work"]
    outputs = {}
    for mode in ("tty", "piped", "quiet"):
        argv = [*pushed["image_args"], "--repository", f"{registry}/{APP}-{mode}"] + (["-q"] if mode == "quiet" else [])
        argv.remove("--progress")
        argv.remove("plain")
        if mode == "tty":
            code, text = through_pty([ENVBUILD, *map(str, argv)], cwd=work, env={**os.environ, "TERM": "xterm"})
        else:
            proc = envbuild(*argv, cwd=work)
            code, text = proc.returncode, proc.stderr
        assert code == 0, text[-3000:]
        outputs[mode] = text
    assert "\x1b[" in outputs["tty"] and re.search(r"\[\d+/\d+\]", outputs["tty"])
    assert "\x1b" not in outputs["piped"] and re.search(r"^\[\d+/\d+\] ", outputs["piped"], re.M)
    assert re.search(r"^built \S+-piped:", outputs["piped"], re.M)
    assert outputs["quiet"] == ""


def test_failed_build_output_when_piped(pushed, registry, wheelhouse, tmp_path):
    """A wheelhouse without the conda installer's py-rattler (only pip): the offline install
    step fails. Piped, the output has no escape sequences, shows the failing step and its log
    tail, and ends with the one-line summary (also as the JSON error object on stdout)."""
    work = pushed["work"]
    (tmp_path / "pip-only").mkdir()
    for wheel in wheelhouse.glob("pip-*.whl"):
        shutil.copy2(wheel, tmp_path / "pip-only")
    spec = write_spec(work, f"{registry}/{APP}", env={"E2E_FAIL": uuid.uuid4().hex[:6]})
    proc = envbuild("image", spec, "--lock-dir", work / "lock-fail", "--registry-mirror", registry,
                    "--wheelhouse", tmp_path / "pip-only", "--json", cwd=work)
    assert proc.returncode == 1
    assert not any(line.startswith("Traceback") for line in proc.stderr.splitlines())  # none of envbuild's own
    assert "\x1b" not in proc.stderr + proc.stdout and "\\n" not in proc.stderr
    summary = one_error_line(proc)
    assert re.match(r"envbuild: error: build step \d+/\d+ failed \(RUN python3 /tmp/envbuild/install.py", summary)
    tail = proc.stderr[proc.stderr.index("last lines of its log:"):]
    assert "py-rattler" in tail and tail.strip().splitlines()[-1] == summary
    error = json.loads(proc.stdout)
    validate("image", error)
    assert error["error"]["kind"] == "failed" and "py-rattler" in error["error"]["evidence"]


def test_verify_refuses_to_tag_or_push_an_image_without_a_gpu(pushed, no_gpu_host, docker_client, registry,
                                                              wheelhouse):
    """Step 5: a changed spec builds a new image; without a GPU its verification fails, so its
    content tag is neither created locally nor pushed, and no extra tag appears."""
    work, extra = pushed["work"], f"checked-{uuid.uuid4().hex[:8]}"
    spec = write_spec(work, f"{registry}/{APP}", env={"E2E_RUN": extra})
    proc = envbuild("image", spec, "--lock-dir", work / "lock-verify", "--registry-mirror", registry,
                    "--wheelhouse", wheelhouse, "--progress", "plain", "--verify", "--push", "--tag", extra, cwd=work)
    error = one_error_line(proc)
    assert proc.returncode == 1 and "failed verification" in error and proc.stdout == ""
    assert NO_GPU in proc.stderr and "verdict: FAIL" in proc.stderr
    ref = built_ref(proc.stderr)
    assert ref != pushed["ref"]
    import docker.errors

    for name in (ref, f"{registry}/{APP}:{extra}"):
        with pytest.raises(docker.errors.ImageNotFound):
            docker_client.api.inspect_image(name)
    tags = registry_tags(registry, APP)
    assert pushed["ref"].rsplit(":", 1)[1] in tags  # the earlier, pushed image is untouched
    assert ref.rsplit(":", 1)[1] not in tags and extra not in tags


def test_verify_also_gates_a_cache_hit(pushed, no_gpu_host, docker_client, registry):
    """An image built earlier without --verify is verified before `--verify --tag` moves a tag
    onto it or pushes it."""
    extra = f"checked-{uuid.uuid4().hex[:8]}"
    proc = envbuild(*pushed["image_args"], "--verify", "--push", "--tag", extra, cwd=pushed["work"])
    error = one_error_line(proc)
    assert proc.returncode == 1 and "failed verification" in error
    assert "nothing to build" in proc.stderr and NO_GPU in proc.stderr
    import docker.errors

    with pytest.raises(docker.errors.ImageNotFound):
        docker_client.api.inspect_image(f"{registry}/{APP}:{extra}")
    assert extra not in registry_tags(registry, APP)


def test_verify_command_reports_static_pass_and_gpu_fail(pushed, no_gpu_host, tmp_path):
    """Step 6: `envbuild verify` on the pushed image writes JSON and JUnit that agree."""
    report_path, junit_path = tmp_path / "verify.json", tmp_path / "verify.xml"
    proc = envbuild("verify", pushed["by_digest"], "--json", report_path, "--junit", junit_path, cwd=tmp_path)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr + proc.stdout
    report = json.loads(report_path.read_text())
    checks = {c["name"]: c for c in report["checks"]}
    for name in ("static.python", "static.libraries", "static.cuda_labels", "torch.build",
                 "env.NVIDIA_VISIBLE_DEVICES", "env.NVIDIA_DRIVER_CAPABILITIES"):
        assert checks[name]["status"] == "pass", checks[name]
    assert "torch" in checks["static.libraries"]["details"]
    assert "12.4" in checks["torch.build"]["details"]
    for name in ("gpu.nvidia_smi", "gpu.cuda_init", "gpu.driver_cuda", "torch.cuda"):
        assert checks[name]["status"] == "fail" and checks[name]["required"], checks[name]
        assert NO_GPU in checks[name]["details"]
    assert report["ok"] is False and report["image"] == pushed["by_digest"]

    validate("verify", report)
    assert report["verdict"] == "fail"
    # no NVIDIA runtime here: the runner's refusal is recognised, and the GPU checks share it
    assert checks["runner.gpu_request"]["signature"] == "no_gpu_runtime"
    assert checks["gpu.nvidia_smi"]["signature"] == "no_gpu_runtime"
    assert checks["static.python"]["signature"] is None

    suite = ET.parse(junit_path).getroot().find("testsuite")
    cases = {c.get("name"): c for c in suite.findall("testcase")}
    assert set(cases) == set(checks)
    failed = {name for name, case in cases.items() if case.find("failure") is not None}
    assert failed == set(report["summary"]["failed_required"]) >= {"gpu.nvidia_smi", "torch.cuda"}
    assert not any(name.startswith("static.") for name in failed)
    assert NO_GPU in cases["gpu.nvidia_smi"].find("failure").text
    for name in failed:  # the failure type is the check's signature, never the generic one here
        assert cases[name].find("failure").get("type") == checks[name]["signature"] != "check_failed"
    times = [float(case.get("time")) for case in cases.values()]
    assert all(t >= 0 for t in times) and sum(times) > 0.05  # measured per check, not "0"
    props = {p.get("name"): p.get("value") for p in suite.find("properties").findall("property")}
    assert props["image"] == pushed["by_digest"] and props["gpus"] == "none" and props["driver"] == "none"
    assert props["image_cuda"] == "12.4" and props["gpu_request"] == "none"

    stdout = envbuild("verify", pushed["by_digest"], "--no-perf", "--json", cwd=tmp_path)
    assert stdout.returncode == 1
    validate("verify", json.loads(stdout.stdout))


# --- bad input along the same path: one line, non-zero exit, nothing lost -----------------------
# These read what a command says and returns, so they run it in this process (cli_support).

@pytest.fixture()
def user_dir(tmp_path) -> tuple[Path, Path]:
    spec = write_spec(tmp_path, "127.0.0.1:1/e2e/bad-input")
    return tmp_path, spec


def test_unknown_spec_key_is_one_line(user_dir):
    work, spec = user_dir
    spec.write_text(spec.read_text().replace("\nimage:", "\nimagee:"))
    for command in (("image", spec), ("dockerfile", spec, "-o", work / "ctx"), ("lock", spec)):
        error = one_error_line(in_process(*command, cwd=work))
        assert "unknown key 'imagee'" in error and "image" in error.split("did you mean", 1)[-1]
    assert not (work / "ctx").exists()


def test_lock_dir_that_is_not_a_folder_is_one_line(user_dir):
    work, spec = user_dir
    (work / "lockfile.txt").write_text("not a folder\n")
    for command in (("dockerfile", spec, "-o", work / "ctx", "--lock-dir", work / "lockfile.txt"),
                    ("lock", spec, "-o", work / "lockfile.txt")):
        proc = in_process(*command, cwd=work)
        assert proc.returncode == 2 and "is not a folder" in one_error_line(proc)
    assert (work / "lockfile.txt").read_text() == "not a folder\n" and not (work / "ctx").exists()


def test_missing_lock_dir_is_filled_with_a_fresh_lock(user_dir):
    """`--lock-dir` names where the lock lives; a folder that is not there yet gets one."""
    work, spec = user_dir
    ok(in_process("dockerfile", spec, "-o", work / "ctx", "--lock-dir", work / "new" / "locks", cwd=work))
    assert (work / "new" / "locks" / "conda-lock.yml").is_file()
    assert (work / "ctx" / "envbuild" / "image" / "lock" / "conda-lock.yml").is_file()


def test_unreachable_engine_is_one_line_and_keeps_the_lock(user_dir):
    work, spec = user_dir
    ok(in_process("lock", spec, "-o", work / "lock", cwd=work))
    before = (work / "lock" / "conda-lock.yml").read_bytes()
    env = {**os.environ, "DOCKER_HOST": "unix:///nonexistent"}
    proc = in_process("image", spec, "--lock-dir", work / "lock", "--push", cwd=work, env=env)
    assert proc.returncode == 3
    error = one_error_line(proc)
    assert "Docker engine is not running" in error and "DOCKER_HOST=unix:///nonexistent" in error
    assert (work / "lock" / "conda-lock.yml").read_bytes() == before


def test_export_without_image_names_the_content_tag_pinned_by_digest(pushed, registry, wheelhouse):
    """`envbuild export` with a spec and no --image runs what `envbuild image` pushed."""
    work = pushed["work"]
    proc = ok(envbuild("export", "k8s", pushed["spec"], "--lock-dir", work / "lock", "--registry-mirror", registry,
                       "--wheelhouse", wheelhouse, cwd=work))
    job = yaml.safe_load(proc.stdout)
    assert job["spec"]["template"]["spec"]["containers"][0]["image"] == f"{pushed['ref']}@{pushed['digest']}"
# --- air-gapped: fill a wheelhouse from the lock, then build with the channel gone ---------------

def test_wheelhouse_fill_then_offline_build(tmp_path, registry, wheelhouse, docker_client):
    """The channel is served over HTTP only while `envbuild wheelhouse` fills DIR from the
    lock (hash-checked); the image is then built with that server stopped, its archives
    bundled from DIR's local channel, which `lock` also accepts as a channel."""
    import functools
    import http.server
    import threading

    asyncio.run(archive_channel(tmp_path / "served" / "channel", PYTORCH_CU124_PACKAGES))
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path / "served"))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    channel_url = f"http://127.0.0.1:{server.server_port}/channel"
    spec = write_spec(tmp_path, f"{registry}/{APP}-offline", channels=[channel_url])
    wh = tmp_path / "wh"
    shutil.copytree(wheelhouse, wh)  # the installer's own wheels (pip, py-rattler), as a mirror would hold them
    try:
        proc = ok(envbuild("wheelhouse", spec, "-o", wh, "--lock-dir", tmp_path / "lock", "--json", cwd=tmp_path))
    finally:
        server.shutdown()
        server.server_close()
    filled = json.loads(proc.stdout)
    validate("wheelhouse", filled)
    conda = [f for f in filled["files"] if f["manager"] == "conda"]
    assert len(conda) == 8 and all(f["downloaded"] and len(f["sha256"]) == 64 for f in conda)
    assert {f["name"] for f in conda} >= {"pytorch", "cuda-version", "python"}
    assert (wh / "conda-channel" / "linux-64" / "repodata.json").is_file()
    lock_urls = (tmp_path / "lock" / "conda-linux-64.lock").read_text()
    assert channel_url in lock_urls  # the lock still names the (now stopped) channel

    # Again: everything is there with the right hash, nothing is fetched (the server is down).
    again = json.loads(ok(envbuild("wheelhouse", spec, "-o", wh, "--lock-dir", tmp_path / "lock", "--json",
                                   cwd=tmp_path)).stdout)
    assert not any(f["downloaded"] for f in again["files"])

    built = json.loads(ok(envbuild("image", spec, "--lock-dir", tmp_path / "lock", "--registry-mirror", registry,
                                   "--wheelhouse", wh, "--json", "-q", cwd=tmp_path)).stdout)
    validate("image", built)
    assert built["cache_hit"] is False and built["sizes"]["context_bytes"] > 0
    run = subprocess.run(["docker", "run", "--rm", built["reference"], "python3", "-c",
                          "import torch; print(torch.__version__, torch.version.cuda)"],
                         capture_output=True, text=True, timeout=120)
    assert run.stdout.split() == ["2.4.1", "12.4"], run.stderr

    # The filled folder is a channel `lock` accepts.
    local = write_spec(tmp_path, f"{registry}/{APP}-offline", channels=[(wh / "conda-channel").as_uri()])
    ok(envbuild("lock", local, "-o", tmp_path / "lock-local", cwd=tmp_path))
    assert (wh / "conda-channel").as_uri() in (tmp_path / "lock-local" / "conda-linux-64.lock").read_text()


@pytest.mark.parametrize("login", ["none", "wrong password"])
def test_push_credentials_are_checked_before_any_work(login, user_dir, auth_registry, tmp_path):
    """A missing or refused login for the push target ends in one line, exit 3, before the
    lock and the build (how long the check takes: its requests time out after 1.5 s each,
    envbuild/image/credentials.py)."""
    import base64

    work, spec = user_dir
    host, user, _password = auth_registry
    config = tmp_path / "docker-config"
    config.mkdir()
    if login != "none":
        token = base64.b64encode(f"{user}:not-the-password".encode()).decode()
        (config / "config.json").write_text(json.dumps({"auths": {host: {"auth": token}}}))
    env = {**os.environ, "DOCKER_CONFIG": str(config)}
    proc = in_process("image", spec, "--repository", f"{host}/{APP}-denied", "--push", "--json", cwd=work, env=env)
    assert proc.returncode == 3
    error = one_error_line(proc)
    assert f"registry {host} denied access" in error and f"docker login {host}" in error
    assert ("refused" if login != "none" else "no credentials") in error and "not-the-password" not in proc.stderr
    assert "locking into" not in proc.stderr and "building " not in proc.stderr
    assert json.loads(proc.stdout)["error"]["kind"] == "environment"


# --- the image runs the Python the lock was made for -------------------------------------------
# The stand-in bases are Debian bookworm, whose python3 is 3.11. Tagged as
# nvidia/cuda:12.4.1-runtime-ubuntu22.04 it contradicts the catalog (Ubuntu 22.04's python3 is
# 3.10); tagged as rapidsai/base:24.08-cuda11.8-py3.11 it agrees with it.
PY310_BASE = "nvidia/cuda:12.4.1-runtime-ubuntu22.04"
PY311_BASE = "rapidsai/base:24.08-cuda11.8-py3.11"
INSTALL_STEP = "RUN python3 /tmp/envbuild/install.py"


@pytest.fixture(scope="module")
def pip_demo(tmp_path_factory, wheelhouse) -> tuple[Path, Path]:
    """(wheelhouse with pip and a demo wheel, a local simple index serving the demo wheel)."""
    import image_support as support

    root = tmp_path_factory.mktemp("pydemo")
    wheels = root / "wheels"
    shutil.copytree(wheelhouse, wheels, ignore=shutil.ignore_patterns("py_rattler*", ".*"))
    demo = support.make_wheel(wheels, "envbuild_pydemo", "1.0", "VERSION = '1.0'\n")
    return wheels, support.simple_index(root / "simple", [demo])


def pip_spec(folder: Path, base: str, repository: str) -> Path:
    """A spec that names only a base image and one pip package: the Python is the base's."""
    spec = {"name": "e2e-python", "installer": "pip", "base_image": base,
            "packages": {"pip": ["envbuild_pydemo==1.0"]}, "image": {"repository": repository}}
    path = folder / f"spec-{uuid.uuid4().hex[:6]}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def lock_and_build(spec: Path, work: Path, index: Path, wheels: Path, registry: str):
    resolved = json.loads(ok(envbuild("resolve", spec, "--json", cwd=work)).stdout)
    ok(envbuild("lock", spec, "-o", work / "lock", "--index-url", index.as_uri(), cwd=work))
    lock_text = (work / "lock" / "requirements.lock").read_text()
    assert "--hash=sha256:" in lock_text  # a real, hashed pip lock
    proc = envbuild("image", spec, "--lock-dir", work / "lock", "--registry-mirror", registry,
                    "--wheelhouse", wheels, "--progress", "plain", cwd=work)
    assert "locking into" not in proc.stderr  # the lock above is the one the build installs
    return resolved, lock_text, proc


def test_a_base_whose_python3_is_not_the_locked_python_fails_the_build_early(pip_demo, registry, tmp_path):
    """The catalog says Python 3.10 for this base, so the lock is for 3.10; the image's python3
    is really 3.11: the build stops at the check, before the lock is installed, with one line."""
    wheels, index = pip_demo
    spec = pip_spec(tmp_path, PY310_BASE, f"{registry}/{APP}-python-mismatch")
    resolved, lock_text, proc = lock_and_build(spec, tmp_path, index, wheels, registry)
    assert resolved["resolved"]["python"] == "3.10" and resolved["resolved"]["base_image"]["python"] == "3.10"
    assert "CPython 3.10." in lock_text

    error = one_error_line(proc)
    assert proc.returncode == 1 and proc.stdout == ""
    failed = re.fullmatch(r"envbuild: error: build step (\d+/\d+) failed: (.*) \(no tag was changed\)", error)
    assert failed and failed[2] == (
        f"base image {PY310_BASE}: python3 is Python 3.11, the lock is for Python 3.10 (use a base image whose "
        "python3 is 3.10, or pin python: 3.11 with a base image that has it, and lock again)")
    # the step that failed is the Python check; nothing of the lock was installed after it
    assert re.search(rf"^\[{failed[1]}\] .*  RUN found=\"\$\(python3 ", proc.stderr, re.M), proc.stderr
    assert INSTALL_STEP not in proc.stderr and "envbuild-install:" not in proc.stderr


def test_a_base_whose_python3_is_the_locked_python_builds_and_runs_it(pip_demo, registry, docker_client, tmp_path):
    wheels, index = pip_demo
    if "24.08-cuda11.8-py3.11" not in registry_tags(registry, "rapidsai/base"):
        pytest.fail(f"the stand-in {PY311_BASE} is not in the registry: run `scripts/services.sh up`")
    spec = pip_spec(tmp_path, PY311_BASE, f"{registry}/{APP}-python-match")
    resolved, lock_text, proc = lock_and_build(spec, tmp_path, index, wheels, registry)
    assert resolved["resolved"]["python"] == "3.11" and "CPython 3.11." in lock_text
    ok(proc)
    assert INSTALL_STEP in proc.stderr  # the check passed and the lock was installed
    ref = proc.stdout.strip()
    run = subprocess.run(["docker", "run", "--rm", ref, "sh", "-c",
                          "python -V; python -c 'import sys, envbuild_pydemo as m; print(m.VERSION, sys.prefix)'"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    version, demo = run.stdout.splitlines()
    assert re.fullmatch(r"Python 3\.11\.\d+", version)  # the Python the lock was made for
    assert demo == "1.0 /opt/env"
