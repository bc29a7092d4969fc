"""The in-image installer's own Python requirement (`installer_python` in
matrices/base_images.yaml): the data, the installer run on the oldest Python it admits, the
resolver never choosing a base below it, and the build stage that gives the installer a pip."""
from __future__ import annotations

import ast
import glob
import json
import os
import shutil
import subprocess
from importlib.metadata import metadata
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet

import image_support as support
from envbuild import matrix, pipeline
from envbuild.core.model import FrameworkRequest, Spec
from envbuild.dockerfile.context import write_context
from envbuild.matrix.lookup import installer_python_min, installer_runs_on
from envbuild.resolver import resolve
from envbuild.spec import load_spec

ROOT = Path(__file__).resolve().parent.parent
INSTALL_PY = ROOT / "envbuild" / "dockerfile" / "install.py"
M = matrix.load()


def floor(installer: str) -> str:
    return installer_python_min(M, installer).python_min


def as_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in version.split("."))


# --- the data ---------------------------------------------------------------------------------
def test_every_installer_mode_has_a_sourced_floor():
    rows = {r.installer: r for r in M.installer_pythons}
    assert set(rows) == {"conda", "pip"}
    assert all(r.source.strip() for r in rows.values())
    assert as_tuple(floor("pip")) <= as_tuple(floor("conda"))


def test_the_conda_floor_is_what_the_pinned_py_rattler_requires():
    """The conda mode installs the py-rattler envbuild runs with: its Requires-Python is the floor."""
    requires = SpecifierSet(metadata("py-rattler")["Requires-Python"])
    assert f"{floor('conda')}.0" in requires
    below = as_tuple(floor("conda"))
    assert f"{below[0]}.{below[1] - 1}.99" not in requires


def test_installer_runs_on_compares_major_minor():
    assert installer_runs_on(M, "conda", "3.10") and installer_runs_on(M, "conda", "3.12.3")
    assert not installer_runs_on(M, "conda", "3.8") and not installer_runs_on(M, "pip", "3.6")
    assert installer_runs_on(M, "pip", "3.8") and installer_runs_on(M, "pip", None)  # unknown: not refused


def test_install_py_keeps_to_the_syntax_of_the_pip_floor():
    ast.parse(INSTALL_PY.read_text(), feature_version=as_tuple(floor("pip"))[:2])


# --- install.py on the floor Python -------------------------------------------------------------
def _python(version: str) -> str | None:
    """A CPython `version` (major.minor) on this machine, or None."""
    found = [shutil.which(f"python{version}")]
    found += sorted(glob.glob(os.path.expanduser(f"~/.pyenv/versions/{version}.*/bin/python3")))
    for path in filter(None, found):
        proc = subprocess.run([path, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                              capture_output=True, text=True)
        if proc.returncode == 0 and proc.stdout.strip() == version:
            return path
    return None


def _context(root: Path, installer: str, wheels: list[Path]) -> Path:
    """install.py, a plan and a hashed pip lock, as write_context lays them out: for pip, the
    lock and its wheels as one layer."""
    ctx = root / "ctx"
    ctx.mkdir()
    shutil.copy2(INSTALL_PY, ctx / "install.py")
    support.write_pip_lock(root / "lock", wheels)
    if installer == "pip":
        layer = ctx / "layers" / "dependencies"
        layer.mkdir(parents=True)
        shutil.copy2(root / "lock" / "requirements.lock", layer / "requirements.lock")
        (layer / "wheels").mkdir()
        for wheel in wheels:
            shutil.copy2(wheel, layer / "wheels" / wheel.name)
        plan = {"installer": "pip", "prefix": str(root / "env"), "python_min": floor(installer), "wheelhouse": None,
                "require_hashes": True}
    else:
        shutil.copy2(root / "lock" / "requirements.lock", ctx / "pip.lock")
        plan = {"installer": installer, "prefix": str(root / "env"), "rattler": "py-rattler", "conda": [],
                "pip_lock": "pip.lock", "wheelhouse": "wheelhouse", "python_min": floor(installer)}
    (ctx / "plan.json").write_text(json.dumps(plan))
    return ctx


@pytest.fixture()
def floor_python() -> str:
    found = _python(floor("pip"))
    if found is None:
        pytest.skip(f"no CPython {floor('pip')} on this machine")
    return found


def test_pip_mode_runs_on_the_floor_python_and_the_venv_has_pip(floor_python, tmp_path):
    """No pip wheel in the wheelhouse: the venv, then its layer, installed by the pip the venv
    runs (the floor Python's own here, else the venv's from ensurepip)."""
    demo = support.make_wheel(tmp_path / "ctx-wheels", "envbuild_floordemo", "1.0", "VERSION = '1.0'\n")
    ctx = _context(tmp_path, "pip", [demo])
    for step in ([], [str(ctx / "layers" / "dependencies")]):
        proc = subprocess.run([floor_python, str(ctx / "install.py"), str(ctx / "plan.json"), *step],
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "--require-hashes" in proc.stdout
    # the layer's files lie under the stage's root, as the final image copies them over the venv
    shutil.copytree(ctx / "root" / str(tmp_path / "env").lstrip("/"), tmp_path / "env", dirs_exist_ok=True,
                    symlinks=True)
    env_python = tmp_path / "env" / "bin" / "python"
    out = subprocess.run([env_python, "-c", "import sys, envbuild_floordemo as m; "
                          "print(m.VERSION, '%d.%d' % sys.version_info[:2])"], capture_output=True, text=True)
    assert out.stdout.split() == ["1.0", floor("pip")]
    assert subprocess.run([env_python, "-m", "pip", "--version"], capture_output=True).returncode == 0


def test_conda_mode_refuses_a_python_below_its_floor_in_one_line(floor_python, tmp_path):
    assert as_tuple(floor("pip")) < as_tuple(floor("conda"))
    ctx = _context(tmp_path, "conda", [])
    (ctx / "wheelhouse").mkdir()
    proc = subprocess.run([floor_python, str(ctx / "install.py"), str(ctx / "plan.json")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.startswith(f"envbuild-install: error: the base image's python3 is {floor('pip')}.")
    assert f"the conda installer needs {floor('conda')} or newer" in proc.stderr
    assert not (tmp_path / "env").exists()


# --- the resolver never builds on a base the installer cannot run on ----------------------------
def spec(frameworks=None, **fields) -> Spec:
    """A request judged as an image build: the installer runs inside the image."""
    return Spec(frameworks=tuple(FrameworkRequest(n, c) for n, c in (frameworks or {}).items()),
                **{"for_image": True, **fields})


def assert_buildable(result) -> None:
    """An ok verdict names a base the installer runs on; so does every fix it offers."""
    if result.usable:
        base = result.resolved.base_image
        if base is not None:
            assert installer_runs_on(M, result.resolved.installer, base.python), (base.ref, base.python)
        return
    for conflict in result.conflicts:
        for fix in conflict.fixes:
            fixed = resolve(result.spec.with_changes(fix.changes), M)
            assert fixed.usable, (conflict.kind, fix.description)
            assert_buildable(fixed)


OLD_STACKS = [spec(fw, cuda=cuda, installer=inst)
              for inst in ("conda", "pip")
              for cuda in ("11.0", "11.3", "11.6")
              for fw in (None, {"pytorch": "1.7.1"}, {"pytorch": "1.12.1"}, {"tensorflow": "2.4.0"})]


@pytest.mark.parametrize("recipe", sorted((ROOT / "recipes").glob("*.yaml")), ids=lambda p: p.stem)
def test_no_recipe_and_no_fix_resolves_onto_a_base_the_installer_cannot_run_on(recipe):
    import dataclasses

    assert_buildable(resolve(dataclasses.replace(load_spec(str(recipe)), for_image=True), M))


@pytest.mark.parametrize("stack", OLD_STACKS, ids=lambda s: f"{s.installer}-cuda{s.cuda}-"
                         + "-".join(f"{f.name}{f.constraint}" for f in s.frameworks))
def test_old_cuda_stacks_resolve_only_onto_bases_the_installer_runs_on(stack):
    assert_buildable(resolve(stack, M))


def test_conda_takes_the_same_cuda_major_on_a_newer_ubuntu():
    """Every nvidia/cuda 11.3 image is on Ubuntu <= 20.04 (python3 <= 3.8); conda's
    cudatoolkit brings the CUDA libraries, so an 11.x image with python3 >= 3.10 serves."""
    r = resolve(spec({"pytorch": "1.12.1"}, cuda="11.3", installer="conda"), M)
    assert r.ok, [c.message for c in r.conflicts]
    base = r.resolved.base_image
    assert base.family == "cuda" and base.cuda.startswith("11.") and as_tuple(base.python) >= (3, 10)


def test_pip_keeps_ubuntu_2004_where_no_newer_os_has_that_cuda():
    r = resolve(spec({"pytorch": "1.12.1"}, cuda="11.3", installer="pip"), M)
    assert r.ok, [c.message for c in r.conflicts]
    assert r.resolved.base_image.os == "ubuntu20.04" and r.resolved.python == "3.8"


def test_a_cuda_only_conda_stack_on_old_ubuntu_is_a_conflict_with_a_fix_that_builds():
    r = resolve(spec(cuda="11.3", installer="conda"), M)
    assert [c.kind for c in r.conflicts] == ["python_unsupported"]
    message = r.conflicts[0].message
    assert "envbuild's conda installer" in message and f"must be {floor('conda')} or newer" in message
    assert "ubuntu18.04: 3.6" in message and "ubuntu20.04: 3.8" in message
    assert [f.changes for f in r.conflicts[0].fixes] == [{"installer": "pip"}]
    assert_buildable(r)


@pytest.mark.parametrize("installer", ["conda", "pip"])
def test_a_named_base_below_the_floor_is_a_conflict(installer):
    r = resolve(spec({"pytorch": "1.12.1"}, installer=installer,
                     base_image="nvidia/cuda:11.3.1-cudnn8-devel-ubuntu18.04"), M)
    floors = [c for c in r.conflicts if "envbuild's" in c.message]
    assert [c.kind for c in floors] == ["python_unsupported"]
    assert "Python 3.6 on nvidia/cuda:11.3.1-cudnn8-devel-ubuntu18.04" in floors[0].message
    assert {"base_image": None} in [f.changes for f in floors[0].fixes]
    assert_buildable(r)


# --- the build stage gives the installer a pip ----------------------------------------------------
def test_the_cuda_install_stage_adds_python3_venv_unless_a_pip_wheel_is_given(tmp_path):
    lock = tmp_path / "lock"
    wheel = support.make_wheel(tmp_path / "w", "envbuild_x", "1.0", "")
    support.write_pip_lock(lock, [wheel])
    resolution = support.resolution("cuda", installer="pip")
    online = write_context(tmp_path / "online", resolution, lock, facts=pipeline.context_facts(resolution)).dockerfile
    assert "RUN if ! python3 -c 'import ensurepip' >/dev/null 2>&1; then" in online
    assert "apt-get install -y --no-install-recommends python3 python3-venv" in online
    (tmp_path / "wh").mkdir()
    (tmp_path / "wh" / "pip-26.3-py3-none-any.whl").write_bytes(b"")
    (tmp_path / "wh" / wheel.name).write_bytes(wheel.read_bytes())  # a wheelhouse holds every locked file
    offline = write_context(tmp_path / "offline", resolution, lock, facts=pipeline.context_facts(resolution),
                            wheelhouse=tmp_path / "wh")
    assert "RUN if ! command -v python3 >/dev/null 2>&1; then" in offline.dockerfile
    plan = json.loads((offline.path / "envbuild" / "plan.json").read_text())
    assert plan["python_min"] == floor("pip")


@pytest.mark.docker
@pytest.mark.network
def test_a_pip_build_without_a_pip_wheel_installs_and_the_venv_has_pip(docker_client, registry, tmp_path):
    """The stand-in nvidia/cuda base has python3 but no python3-venv and no pip; the wheelhouse
    has only the locked wheel. The install stage adds python3-venv from the distribution
    (network), the venv gets pip from ensurepip, and that pip installs the lock."""
    from envbuild.image.make import ImageOptions
    from envbuild.pipeline import make_image

    wheels = tmp_path / "wheels"
    demo = support.make_wheel(wheels, "envbuild_venvpip", "1.0", "VERSION = '1.0'\n")
    support.write_pip_lock(tmp_path / "lock", [demo])
    resolution = support.resolution("cuda", installer="pip", name="venvpip")
    result = make_image(resolution, tmp_path / "lock", ImageOptions(
        repository=f"{registry}/{support.TEST_NAMESPACE}/venvpip", mirror=registry, wheelhouse=wheels, check_registry=False))
    out = docker_client.containers.run(result.ref, ["sh", "-c", "python -c 'import envbuild_venvpip as m; "
                                                    "print(m.VERSION)' && python -m pip --version"],
                                       remove=True).decode()
    version, pip = out.splitlines()
    assert version == "1.0" and pip.startswith("pip ") and "/opt/env/lib/python3" in pip


@pytest.mark.docker
@pytest.mark.network
def test_a_conda_build_without_a_pip_wheel_gets_pip_from_ensurepip(docker_client, registry, wheelhouse, tmp_path):
    """The wheelhouse has py-rattler but no pip and the base python3 has no pip: the installer
    makes a throw-away venv with ensurepip and installs py-rattler with its pip."""
    from envbuild.image.make import ImageOptions
    from envbuild.pipeline import make_image

    wheels = tmp_path / "wheels"
    shutil.copytree(wheelhouse, wheels, ignore=shutil.ignore_patterns("pip-*", ".*"))
    resolution, lock = support.locked_demo(tmp_path / "conda", name="venvconda")
    result = make_image(resolution, lock, ImageOptions(
        repository=f"{registry}/{support.TEST_NAMESPACE}/venvconda", mirror=registry, wheelhouse=wheels, check_registry=False))
    assert docker_client.containers.run(result.ref, ["envbuild-demo"], remove=True).decode() == "envbuild-demo 1.0\n"
