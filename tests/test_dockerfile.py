"""Rendered Dockerfiles: every template and recipe passes hadolint (no finding at any level;
inline ignores carry their reason)
and the official Go parser, and carries the NVIDIA env, OCI labels and the probe."""
from __future__ import annotations

import dataclasses
import json
import subprocess
from pathlib import Path

import dockerfile
import pytest

import image_support as support
from envbuild import pipeline
from envbuild.dockerfile import lockfiles, render
from envbuild.dockerfile.context import write_context
from envbuild.dockerfile.mirror import apply_mirror
from envbuild.dockerfile.reference import parse
from envbuild.infra.errors import UserError

ROOT = Path(__file__).resolve().parent.parent
FAMILIES = sorted(support.FAMILY_BASES)


@pytest.fixture(scope="module")
def conda_lock(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("conda")
    support.write_explicit_lock(root / "lock", support.demo_channel(root))
    return root / "lock"


@pytest.fixture(scope="module")
def pip_lock(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("pip")
    wheel = support.make_wheel(root / "wheels", "envbuild_pipdemo", "1.0", "VERSION = '1.0'\n")
    cuda = support.make_wheel(root / "wheels", "nvidia_pipdemo_cu12", "1.0", "VERSION = '1.0'\n")  # the cuda layer
    support.write_pip_lock(root / "lock", [wheel, cuda])
    return root / "lock"


def hadolint_findings(path: Path) -> list[dict]:
    out = subprocess.run(["hadolint", "--format", "json", "--no-fail", str(path)],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out or "[]")  # every level: error, warning, info, style


def instructions(path: Path) -> list[dockerfile.Command]:
    return list(dockerfile.parse_file(str(path)))


def env_of_final_stage(commands) -> dict[str, str]:
    final = max(i for i, c in enumerate(commands) if c.cmd == "FROM")
    env = {}
    for command in commands[final:]:
        if command.cmd == "ENV":
            pairs = command.value
            env.update({pairs[i]: pairs[i + 1].strip('"') for i in range(0, len(pairs), 2)})
    return env


def labels_of(commands) -> dict[str, str]:
    labels = {}
    for command in commands:
        if command.cmd == "LABEL":
            pairs = command.value
            labels.update({pairs[i]: json.loads(pairs[i + 1]) for i in range(0, len(pairs), 2)})
    return labels


@pytest.mark.parametrize("installer", ["conda", "pip"])
@pytest.mark.parametrize("family", FAMILIES)
def test_every_family_renders_a_clean_dockerfile(family, installer, conda_lock, pip_lock, tmp_path):
    resolution = support.resolution(family, installer=installer, env=(("OMP_NUM_THREADS", "4"),))
    lock_dir = conda_lock if installer == "conda" else pip_lock
    context = write_context(tmp_path / "ctx", resolution, lock_dir, facts=pipeline.context_facts(resolution))
    path = context.path / "Dockerfile"

    assert hadolint_findings(path) == []
    commands = instructions(path)
    froms = [c.value[0] for c in commands if c.cmd == "FROM"]
    # install stage + final stage on the same base; a pip environment's layers each in a stage on the install stage
    assert [froms[0], froms[-1]] == [support.FAMILY_BASES[family][0]] * 2
    assert froms[1:-1] == (["install"] * 2 if installer == "pip" else [])  # the cuda and dependencies layers
    assert not any("--mount" in c.flags for c in commands if c.cmd == "RUN")  # classic builder only
    env = env_of_final_stage(commands)
    cuda = support.FAMILY_BASES[family][2]
    assert env["NVIDIA_VISIBLE_DEVICES"] == "all"
    assert env["NVIDIA_DRIVER_CAPABILITIES"] == "compute,utility"
    assert env["NVIDIA_REQUIRE_CUDA"].split()[0] == f"cuda>={cuda}"
    assert env["OMP_NUM_THREADS"] == "4"
    assert env["PATH"].startswith("/opt/env/bin:")
    labels = labels_of(commands)
    assert labels["io.envbuild.cuda"] == cuda
    assert labels["io.envbuild.spec-hash"] == resolution.spec.hash()
    assert labels["io.envbuild.installer"] == installer
    assert labels["io.envbuild.probe"] == "/opt/envbuild/probe.py"
    assert labels["org.opencontainers.image.base.name"] == support.FAMILY_BASES[family][0]
    assert "Why this base:" in path.read_text()
    # The probe and the lockfiles travel into the image.
    assert (context.path / "envbuild" / "image" / "probe.py").is_file()
    assert sorted(p.name for p in (context.path / "envbuild" / "image" / "lock").iterdir()) == \
        sorted(p.name for p in lock_dir.iterdir())


@pytest.mark.parametrize("family", FAMILIES)
def test_a_pip_build_checks_the_python_before_installing_the_lock(family, pip_lock, conda_lock, tmp_path):
    """A pip venv is made over the base's python3: the install stage checks it against the
    locked Python first. A conda prefix brings its own interpreter: no check."""
    resolution = support.resolution(family, installer="pip")
    commands = instructions(write_context(tmp_path / "pip", resolution, pip_lock, facts=pipeline.context_facts(resolution)).path / "Dockerfile")
    runs = [" ".join(c.value) for c in commands if c.cmd == "RUN"]
    check = next(i for i, r in enumerate(runs) if "sys.version_info" in r)
    install = next(i for i, r in enumerate(runs) if "/tmp/envbuild/install.py" in r)
    assert check < install
    assert '[ "$found" != "3.11" ]' in runs[check] and "exit 1" in runs[check]
    assert f"envbuild: error: base image {support.FAMILY_BASES[family][0]}: python3 is Python $found, the lock is " \
           "for Python 3.11 (" in runs[check]

    conda_resolution = support.resolution(family, installer="conda")
    conda = write_context(tmp_path / "conda", conda_resolution, conda_lock, facts=pipeline.context_facts(conda_resolution))
    assert "sys.version_info" not in (conda.path / "Dockerfile").read_text()


@pytest.mark.parametrize("installer", ["conda", "pip"])
def test_every_build_checks_the_cuda_the_base_was_said_to_carry(installer, pip_lock, conda_lock, tmp_path):
    """The first step compares the base's CUDA_VERSION (or version.json) with the base's CUDA the
    stack was checked against, for conda and pip alike, before the lock is installed."""
    resolution = support.resolution("custom", installer=installer)
    lock = pip_lock if installer == "pip" else conda_lock
    commands = instructions(write_context(tmp_path / "ctx", resolution, lock,
                                          facts=pipeline.context_facts(resolution)).path / "Dockerfile")
    runs = [" ".join(c.value) for c in commands if c.cmd == "RUN"]
    check = next(i for i, r in enumerate(runs) if "CUDA_VERSION" in r)
    assert check < next(i for i, r in enumerate(runs) if "/tmp/envbuild/install.py" in r)
    assert '""|12.4|12.4.*) ;;' in runs[check]
    assert "envbuild: error: base image registry.example.com/acme/ml-base:2024.1: it carries CUDA $cuda, the stack " \
           "was checked against CUDA 12.4 (" in runs[check]


def _recipe_specs() -> list[Path]:
    return sorted((ROOT / "recipes").glob("*.yaml"))


@pytest.mark.parametrize("recipe", _recipe_specs(), ids=lambda p: p.stem)
def test_every_recipe_renders_a_clean_dockerfile(recipe, tmp_path):
    from envbuild.resolver import resolve
    from envbuild.spec import load_spec

    resolution = resolve(dataclasses.replace(load_spec(recipe), for_image=True))
    if not resolution.usable:  # a recipe showing a conflict: there is no stack, and rendering says so
        with pytest.raises(UserError, match="does not resolve"):
            render.render(render.RenderInput(resolution, "conda", "unused", facts=render.MatrixFacts(True, "", None, ())))
        return
    text = render.render(render.RenderInput(resolution, resolution.resolved.installer,
                                            resolution.resolved.base_image.ref,
                                            facts=pipeline.context_facts(resolution)))
    path = tmp_path / "Dockerfile"
    path.write_text(text)
    assert hadolint_findings(path) == []
    env = env_of_final_stage(instructions(path))
    if resolution.resolved.cuda:
        assert env["NVIDIA_REQUIRE_CUDA"].startswith(f"cuda>={resolution.resolved.cuda}")


def test_require_cuda_allows_the_minor_version_floor():
    resolution = support.resolution("cuda")
    stack = resolution.resolved
    value = render.require_cuda(stack, pipeline.context_facts(resolution).driver_floor)
    assert value.split()[0] == "cuda>=12.4"
    # The floor comes from the matrices when they carry the minor-compat row for CUDA 12.
    from envbuild import matrix

    floors = [r.floor_linux for r in matrix.load().minor_compat if r.major == 12]
    if floors:
        assert value.split()[1] == f"driver>={floors[0]}"


@pytest.mark.parametrize("ref, mirror, expected", [
    ("nvidia/cuda:12.4.1-runtime-ubuntu22.04", "mirror.corp:5000", "mirror.corp:5000/nvidia/cuda:12.4.1-runtime-ubuntu22.04"),
    ("ubuntu:22.04", "mirror.corp/hub", "mirror.corp/hub/library/ubuntu:22.04"),
    ("763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.3.0-gpu-py311", "123.dkr.ecr.eu-west-1.amazonaws.com/dlc",
     "123.dkr.ecr.eu-west-1.amazonaws.com/dlc/pytorch-training:2.3.0-gpu-py311"),
    ("pytorch/pytorch:2.3.1-cuda12.1-cudnn8-runtime", None, "pytorch/pytorch:2.3.1-cuda12.1-cudnn8-runtime"),
])
def test_registry_mirror_rewrites_references(ref, mirror, expected):
    assert str(apply_mirror(parse(ref), mirror)) == expected


@pytest.mark.parametrize("bad", ["Nvidia/CUDA:12", "nvidia/cuda:bad tag", "nvidia/cuda@sha256:xyz", ""])
def test_bad_references_are_one_clear_error(bad):
    with pytest.raises(UserError, match="invalid image reference"):
        parse(bad)


def test_bad_mirror_is_one_clear_error():
    with pytest.raises(UserError, match="--registry-mirror"):
        apply_mirror(parse("ubuntu:22.04"), "not a host/")


def test_conda_lock_yml_and_pip_lock_are_read(tmp_path):
    (tmp_path / "conda-lock.yml").write_text(
        "version: 1\npackage:\n"
        "- {name: a, version: '1', manager: conda, platform: linux-64, url: 'https://c.example/linux-64/a-1-0.conda',"
        " hash: {md5: 0123456789abcdef0123456789abcdef, sha256: " + "a" * 64 + "}}\n"
        "- {name: b, version: '2', manager: pip, platform: linux-64, url: 'https://p.example/b-2-py3-none-any.whl',"
        " hash: {sha256: " + "b" * 64 + "}}\n"
        "- {name: a, version: '1', manager: conda, platform: osx-arm64, url: 'https://c.example/osx-arm64/a-1-0.conda',"
        " hash: {md5: 0123456789abcdef0123456789abcdef}}\n")
    found = lockfiles.read_lock_dir(tmp_path, "linux-64")
    assert found.installer == "conda"
    assert [(p.url, p.sha256) for p in found.conda] == [("https://c.example/linux-64/a-1-0.conda", "a" * 64)]
    assert found.pip_lines == (f"b @ https://p.example/b-2-py3-none-any.whl --hash=sha256:{'b' * 64}",)


def test_missing_lock_is_one_clear_error(tmp_path):
    with pytest.raises(UserError, match="no lockfile for linux-64") as info:
        lockfiles.read_lock_dir(tmp_path, "linux-64")
    assert "envbuild lock" in info.value.line()


def test_a_failed_render_keeps_the_previous_context(conda_lock, tmp_path):
    resolution = support.resolution("cuda")
    out = tmp_path / "ctx"
    write_context(out, resolution, conda_lock, facts=pipeline.context_facts(resolution))
    before = (out / "Dockerfile").read_text()
    broken = tmp_path / "broken-lock"
    broken.mkdir()
    (broken / "conda-linux-64.lock").write_text("@EXPLICIT\nfile:///nonexistent/noarch/x-1-0.tar.bz2#" + "0" * 64 + "\n")
    with pytest.raises(UserError, match="does not exist"):
        write_context(out, resolution, broken, facts=pipeline.context_facts(resolution))
    assert (out / "Dockerfile").read_text() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["broken-lock", "ctx"]  # no staging left behind


def test_dockerfile_command_reports_bad_input_in_one_line(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text("name: x\nframeworks: {cupy: '>=13'}\n")
    run = subprocess.run(["envbuild", "dockerfile", str(spec), "-o", str(tmp_path / "out"),
                          "--registry-mirror", "bad mirror!"], capture_output=True, text=True)
    assert run.returncode == 2
    assert run.stderr.strip().splitlines() == [
        "envbuild: error: invalid --registry-mirror 'bad mirror!' (expected HOST[:PORT][/prefix], e.g. mirror.corp:5000/dockerhub)"]
    assert not (tmp_path / "out").exists()


def test_rapids_cuxx_wheels_of_a_pip_lock_are_installed_versions(tmp_path):
    # The pins and hashes pip chose for cudf-cu12==24.12.0 from PyPI: the RAPIDS wheels carry
    # the CUDA major in their names, as cupy-cuda12x does.
    from envbuild.core.model import FrameworkRequest, Spec
    from envbuild.resolver import resolve

    resolution = resolve(Spec(name="df", frameworks=(FrameworkRequest("rapids", "24.12"),), installer="pip",
                              python="3.10", gpus=("A100",), driver="550.54.15", for_image=True))
    assert resolution.ok, resolution.conflicts
    (tmp_path / "lock").mkdir()
    (tmp_path / "lock" / "requirements.lock").write_bytes((ROOT / "tests/data/pip_locks/rapids-cu12.lock").read_bytes())
    context = write_context(tmp_path / "ctx", resolution, tmp_path / "lock", facts=pipeline.context_facts(resolution))
    installed = {k.removeprefix("io.envbuild.installed."): v
                 for k, v in labels_of(instructions(context.path / "Dockerfile")).items() if ".installed." in k}
    assert installed == {
        "cudf-cu12": "24.12.0", "pylibcudf-cu12": "24.12.0", "libcudf-cu12": "24.12.0", "rmm-cu12": "24.12.1",
        "libkvikio-cu12": "24.12.1", "cupy-cuda12x": "14.2.0", "numpy": "2.2.6"}
