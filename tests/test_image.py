"""`envbuild image` on the real Docker engine and local registries: spec -> lock ->
Dockerfile -> build -> push -> pull by digest -> run; cache hits; auth; broken builds."""
from __future__ import annotations

import base64
import json
import shutil
import subprocess
from pathlib import Path

import pytest

import image_support as support
from envbuild import pipeline
from envbuild.dockerfile.reference import parse
from envbuild.image.build import BuildFailed
from envbuild.image.make import ImageOptions
from envbuild.image.registry import manifest_digest
from envbuild.infra.errors import EnvironmentProblem, UserError
from envbuild.pipeline import make_image

pytestmark = pytest.mark.docker
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def conda_lock(tmp_path_factory) -> Path:
    """Explicit lock of the demo channel, written by the real `envbuild lock` code."""
    _, lock_dir = support.locked_demo(tmp_path_factory.mktemp("conda"))
    assert (lock_dir / "conda-linux-64.lock").is_file() and (lock_dir / "conda-lock.yml").is_file()
    return lock_dir


@pytest.fixture()
def empty_docker_config(tmp_path, monkeypatch) -> Path:
    """No credentials at all (DOCKER_CONFIG is what the docker SDK and CLI read)."""
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path / "docker-config"))
    (tmp_path / "docker-config").mkdir()
    return tmp_path / "docker-config"


def login(config_dir: Path, registry: str, user: str, password: str) -> None:
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    (config_dir / "config.json").write_text(json.dumps({"auths": {registry: {"auth": token}}}))


def options(registry: str, wheelhouse: Path, name: str, **changes) -> ImageOptions:
    return ImageOptions(repository=f"{registry}/{support.TEST_NAMESPACE}/{name}", mirror=registry, wheelhouse=wheelhouse,
                        **changes)


def docker_run(client, ref: str, command: list[str]) -> str:
    return client.containers.run(ref, command, remove=True).decode()


def test_conda_image_end_to_end(docker_client, registry, wheelhouse, conda_lock, empty_docker_config):
    resolution = support.resolution("cuda", env=(("OMP_NUM_THREADS", "4"),))
    result = make_image(resolution, conda_lock, options(registry, wheelhouse, "e2e", push=True, check_registry=False))
    assert result.cached is None and result.pushed_digest.startswith("sha256:")
    repository = result.ref.rsplit(":", 1)[0]
    assert manifest_digest(parse(result.ref)) == result.pushed_digest

    # Pull by digest, as a cluster would, and run it.
    by_digest = f"{repository}@{result.pushed_digest}"
    docker_client.api.remove_image(result.ref)
    pulled = docker_client.images.pull(by_digest)
    assert pulled.id == result.image_id
    out = docker_run(docker_client, by_digest, ["sh", "-c", "envbuild-demo; ls /opt/env/conda-meta; "
                                                "echo $NVIDIA_REQUIRE_CUDA; echo $OMP_NUM_THREADS"])
    lines = out.splitlines()
    assert lines[0] == "envbuild-demo 1.0"
    assert {"envbuild-demo-1.0-0.json", "envbuild-demo-lib-1.0-0.json", "python-3.11.0-0.json"} <= set(lines)
    assert lines[-2].split()[0] == "cuda>=12.4" and lines[-1] == "4"
    labels = pulled.labels
    assert labels["io.envbuild.spec-hash"] == resolution.spec.hash()
    assert labels["io.envbuild.cuda"] == "12.4"
    assert labels["org.opencontainers.image.base.name"] == f"{registry}/nvidia/cuda:12.4.1-runtime-ubuntu22.04"
    env = dict(item.split("=", 1) for item in pulled.attrs["Config"]["Env"])
    assert env["NVIDIA_VISIBLE_DEVICES"] == "all" and env["NVIDIA_DRIVER_CAPABILITIES"] == "compute,utility"


def test_unchanged_input_is_a_cache_hit(docker_client, registry, wheelhouse, conda_lock):
    resolution = support.resolution("cuda", name="cache")
    first = make_image(resolution, conda_lock, options(registry, wheelhouse, "cache", push=True))
    again = make_image(resolution, conda_lock, options(registry, wheelhouse, "cache"))
    assert again.cached == "local" and again.ref == first.ref and again.image_id == first.image_id

    docker_client.api.remove_image(first.ref)  # gone locally, still in the registry
    remote = make_image(resolution, conda_lock, options(registry, wheelhouse, "cache"))
    assert remote.cached == "registry" and remote.ref == first.ref

    changed = support.resolution("cuda", name="cache", env=(("NEW", "1"),))
    assert make_image(changed, conda_lock, options(registry, wheelhouse, "cache")).ref != first.ref


def test_pip_environment_is_importable(docker_client, registry, wheelhouse, tmp_path):
    wheels = tmp_path / "wheels"
    shutil.copytree(wheelhouse, wheels, ignore=shutil.ignore_patterns("py_rattler*", ".*"))
    demo = support.make_wheel(wheels, "envbuild_pipdemo", "2.5", "VERSION = '2.5'\n")
    support.write_pip_lock(tmp_path / "lock", [demo])
    resolution = support.resolution("cuda", installer="pip", name="pipdemo")
    result = make_image(resolution, tmp_path / "lock", options(registry, wheels, "pipdemo", check_registry=False))
    out = docker_run(docker_client, result.ref, ["python", "-c", "import sys, envbuild_pipdemo as m; "
                                                 "print(m.VERSION, sys.prefix)"])
    assert out.split() == ["2.5", "/opt/env"]


def test_push_to_the_auth_registry_needs_credentials(docker_client, auth_registry, registry, wheelhouse,
                                                     conda_lock, empty_docker_config):
    host, user, password = auth_registry
    resolution = support.resolution("cuda", name="auth")
    opts = ImageOptions(repository=f"{host}/{support.TEST_NAMESPACE}/auth", mirror=registry, wheelhouse=wheelhouse, push=True)
    with pytest.raises(EnvironmentProblem) as info:
        make_image(resolution, conda_lock, opts)
    assert host in info.value.line() and "docker login" in info.value.line()
    assert password not in info.value.line()

    login(empty_docker_config, host, user, password)
    result = make_image(resolution, conda_lock, opts)
    assert result.pushed_digest.startswith("sha256:")
    assert manifest_digest(parse(result.ref)) == result.pushed_digest  # read back with the same credentials


def test_broken_step_reports_it_and_keeps_the_previous_tag(docker_client, registry, wheelhouse, tmp_path, capsys):
    wheels = tmp_path / "wheels"
    shutil.copytree(wheelhouse, wheels, ignore=shutil.ignore_patterns("py_rattler*", ".*"))
    good = support.make_wheel(wheels, "envbuild_stable", "1.0", "X = 1\n")
    support.write_pip_lock(tmp_path / "good", [good])
    resolution = support.resolution("cuda", installer="pip", name="stable")
    opts = options(registry, wheels, "stable", extra_tags=("stable",), check_registry=False)
    first = make_image(resolution, tmp_path / "good", opts)
    stable = f"{registry}/{support.TEST_NAMESPACE}/stable:stable"
    assert docker_client.api.inspect_image(stable)["Id"] == first.image_id

    # A lock whose hash the wheelhouse's wheel does not match: pip refuses it inside the install step.
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "requirements.lock").write_text(f"envbuild-stable==1.0 --hash=sha256:{'0' * 64}\n")
    with pytest.raises(BuildFailed) as info:
        make_image(resolution, tmp_path / "bad", opts)
    message = info.value.line()
    # the step of the layer that holds the pin (each layer is installed in a build stage of its own)
    assert "build step 10/" in message and "RUN python3 /tmp/envbuild/install.py /tmp/envbuild/plan.json " \
        "/tmp/envbuild/layer" in message
    assert "\n" not in message and "\\n" not in message  # the summary is one line
    # pip's own complaint, from the end of the step's log, is the evidence shown before the summary
    assert "DO NOT MATCH THE HASHES" in info.value.evidence and "last lines of its log:" in info.value.evidence
    assert docker_client.api.inspect_image(stable)["Id"] == first.image_id

    # A lock naming a wheel the wheelhouse does not have: refused, naming it, before any build.
    (tmp_path / "missing").mkdir()
    (tmp_path / "missing" / "requirements.lock").write_text("envbuild-missing==9.9\n")
    with pytest.raises(UserError, match=r"the wheelhouse lacks locked file\(s\) envbuild-missing==9\.9") as info:
        make_image(resolution, tmp_path / "missing", opts)
    assert info.value.exit_code == 2


def test_pin_digests_through_basic_auth(docker_client, auth_registry, registry, base_image, conda_lock,
                                        empty_docker_config, tmp_path):
    host, user, password = auth_registry
    mirrored = f"{host}/nvidia/cuda:12.4.1-runtime-ubuntu22.04"
    docker_client.api.tag(base_image, f"{host}/nvidia/cuda", "12.4.1-runtime-ubuntu22.04")
    resolution = support.resolution("cuda", name="pinned")
    with pytest.raises(EnvironmentProblem, match=f"registry {host} denied access"):
        pipeline.context(tmp_path / "ctx", resolution, conda_lock, mirror=host, pin_digests=True)
    login(empty_docker_config, host, user, password)
    for line in docker_client.api.push(f"{host}/nvidia/cuda", "12.4.1-runtime-ubuntu22.04", stream=True, decode=True):
        assert "error" not in line, line
    lock_dir = tmp_path / "lock"  # pinning writes into the lock folder: keep the shared one clean
    shutil.copytree(conda_lock, lock_dir)
    foreign = tmp_path / "notes"  # a folder of the user's: refused before the pin touches the lock
    foreign.mkdir()
    (foreign / "todo.txt").write_text("mine\n")
    before = {p.name: p.read_bytes() for p in lock_dir.iterdir()}
    with pytest.raises(UserError):
        pipeline.context(foreign, resolution, lock_dir, mirror=host, pin_digests=True)
    assert {p.name: p.read_bytes() for p in lock_dir.iterdir()} == before
    assert [p.name for p in foreign.iterdir()] == ["todo.txt"]
    context = pipeline.context(tmp_path / "ctx", resolution, lock_dir, mirror=host, pin_digests=True)
    digest = manifest_digest(parse(mirrored))
    assert context.base_ref == f"{mirrored}@{digest}"
    assert f"FROM {mirrored}@{digest} AS install" in context.dockerfile
    assert f'org.opencontainers.image.base.digest="{digest}"' in context.dockerfile
    record = json.loads((lock_dir / "base-image.json").read_text())
    assert record["digest"] == digest
    from conda_lock.lockfile import parse_conda_lock_file

    meta = parse_conda_lock_file(lock_dir / "conda-lock.yml").metadata.custom_metadata
    assert meta["envbuild.base_digest"] == digest
    assert meta["envbuild.base_image"] == resolution.resolved.base_image.ref


def test_container_structure_test_passes(docker_client, registry, wheelhouse, conda_lock):
    result = make_image(support.resolution("cuda"), conda_lock, options(registry, wheelhouse, "structure"))
    run = subprocess.run(["container-structure-test", "test", "--image", result.ref, "--config",
                          str(ROOT / "tests" / "data" / "image_structure.yaml"), "--output", "json"],
                         capture_output=True, text=True)
    report = json.loads(run.stdout)
    assert run.returncode == 0, report
    assert report["Fail"] == 0 and report["Pass"] == report["Total"] > 0


def test_engine_not_running_is_one_line(tmp_path, monkeypatch):
    from envbuild.image import engine

    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    with pytest.raises(EnvironmentProblem) as info:
        engine.connect()
    assert info.value.exit_code == 3
    assert "Docker engine is not running" in info.value.line() and "\n" not in info.value.line()
