"""`envbuild lock` against the real PyPI: every bundled recipe that resolves with pip also
locks, with hashes, for the Python resolve chose; a hashed lock installs with
`pip install --require-hashes` into a fresh venv.

These read pypi.org (deselect with `-m "not network"` when offline). The machine's pip
configuration is replaced by an empty one, so PyPI itself is what answers.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from uv import find_uv_bin

from envbuild.infra.errors import EnvironmentProblem
from envbuild.lock.api import lock
from envbuild.resolver import resolve
from envbuild.spec import load_spec


pytestmark = pytest.mark.network
ROOT = Path(__file__).resolve().parent.parent
RECIPES = sorted((ROOT / "recipes").glob("*.yaml"))


@pytest.fixture(autouse=True)
def pypi_only(monkeypatch):
    for key in [k for k in os.environ if k.startswith(("PIP_", "UV_"))]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)


def _unreachable_elsewhere(problem: EnvironmentProblem) -> bool:
    """The lock failed on an index other than PyPI that this machine cannot reach (the
    PyTorch variant indexes, pypi.nvidia.com): said as exit 3 with the URL, not a conflict."""
    found = re.search(r"cannot read the package index (\S+): cannot connect", problem.line())
    return bool(found) and "pypi.org" not in found.group(1)


@pytest.mark.parametrize("recipe", RECIPES, ids=[p.stem for p in RECIPES])
def test_every_recipe_that_resolves_with_pip_locks_with_hashes(recipe, tmp_path):
    spec = load_spec(recipe)
    if spec.installer != "pip":
        spec = spec.with_changes({"installer": "pip"})
    resolution = resolve(spec)
    if not resolution.ok:
        pytest.skip(f"{recipe.name} does not resolve with pip")
    try:
        result = lock(spec, resolution, None, tmp_path, pip_timeout=20)
    except EnvironmentProblem as problem:
        if _unreachable_elsewhere(problem):
            pytest.skip(problem.line())
        raise
    python = ".".join(resolution.resolved.python.split(".")[:2])
    text = (tmp_path / "requirements.lock").read_text()
    pins = re.findall(r"^([A-Za-z0-9._-]+)==(\S+)", text, flags=re.M)
    assert result.pip_hashed is True and f"# Target: linux-64, CPython {python}.\n" in text
    # every pin is followed by at least one sha256 line
    assert len(re.findall(r"==\S+ \\\n    --hash=sha256:[0-9a-f]{64}", text)) == len(pins) > 0
    frameworks = [f"{n}=={v}" for n, v in pins if n in ("torch", "tensorflow", "jax", "jaxlib", "cupy-cuda12x",
                                                         "torchvision", "torchaudio")]
    print(f"{recipe.name}: CPython {python}, {len(pins)} pins, {text.count('--hash=')} hashes; {' '.join(frameworks)}")


def _interpreter(version: str) -> str:
    """A CPython of `version` that runs: on PATH, else one pyenv installed."""
    found = shutil.which(f"python{version}")
    candidates = [found] if found else []
    pyenv = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv") / "versions"
    candidates += sorted(str(p) for p in pyenv.glob(f"{version}.*/bin/python{version}"))
    for candidate in candidates:
        if subprocess.run([candidate, "-c", "pass"], capture_output=True).returncode == 0:
            return candidate
    pytest.fail(f"this machine has no CPython {version} to install the lock into (scripts/test.sh lists what CI needs)")


def _pypi_only_env() -> dict[str, str]:
    """An environment whose pip and uv configuration points at PyPI only."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_"))}
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_INDEX_URL="https://pypi.org/simple", UV_NO_CONFIG="1")
    return env


SMALL = ("name: small\ncuda: '12.4'\npython: '3.10'\ninstaller: pip\n"
         "packages: {pip: ['requests==2.32.3']}\n")


def test_a_lock_written_with_local_indexes_configured_installs_from_pypi_alone(tmp_path, monkeypatch):
    # The locking machine's pip configuration adds a local folder index and find-links: the
    # lock must name neither, and must install where only PyPI is configured.
    local = tmp_path / "local-index"
    (local / "simple").mkdir(parents=True)
    (tmp_path / "pip.conf").write_text(f"[global]\nextra-index-url = {(local / 'simple').as_uri()}\n"
                                       f"find-links = {local}\n")
    monkeypatch.setenv("PIP_CONFIG_FILE", str(tmp_path / "pip.conf"))
    (tmp_path / "small.yaml").write_text(SMALL + "target: {platform: linux-64}\n")
    done = subprocess.run([sys.executable, "-m", "envbuild", "lock", "small.yaml", "-o", "lock", "--json"],
                          cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    texts = {p.name: p.read_text() for p in (tmp_path / "lock").iterdir()}
    assert {"requirements.lock", "pylock.toml"} <= set(texts)
    assert not [name for name, text in texts.items() if "file:" in text or str(local) in text]
    assert str(local) in done.stderr  # said: the configured sources were left out
    # lock --json lists every pin with its version and hashes, as the files do
    pins = json.loads(done.stdout)["pip_packages"]["linux-64"]
    assert {p["name"] for p in pins} == {"requests", "urllib3", "idna", "certifi", "charset-normalizer"}
    assert all(p["hashes"] and all(h in texts["requirements.lock"] for h in p["hashes"]) for p in pins)

    env = _pypi_only_env()
    python = _interpreter("3.10")
    uv = find_uv_bin()
    installs = {
        "pip": lambda venv: [str(venv / "bin/python"), "-m", "pip", "install", "--quiet", "--require-hashes",
                             "--only-binary=:all:", "-r", str(tmp_path / "lock/requirements.lock")],
        "uv-requirements": lambda venv: [uv, "pip", "sync", "--python", str(venv / "bin/python"), "--require-hashes",
                                         str(tmp_path / "lock/requirements.lock")],
        "uv-pylock": lambda venv: [uv, "pip", "sync", "--python", str(venv / "bin/python"),
                                   str(tmp_path / "lock/pylock.toml")],
    }
    for how, command in installs.items():
        venv = tmp_path / f"venv-{how}"
        subprocess.run([python, "-m", "venv", str(venv)], check=True)
        done = subprocess.run(command(venv), capture_output=True, text=True, env=env)
        assert done.returncode == 0, f"{how}: {done.stderr}"
        done = subprocess.run([str(venv / "bin/python"), "-c", "import requests, urllib3; print(requests.__version__)"],
                              capture_output=True, text=True, env=env)
        assert done.stdout.strip() == "2.32.3", f"{how}: {done.stderr}"


GRACE = ("name: torch-grace\nframeworks: {pytorch: '2.12.*'}\ncuda: '13.0'\npython: '3.12'\ninstaller: pip\n"
         "target: {driver: '580.95.05', gpus: [H100], platforms: [linux-64, linux-aarch64]}\n")


def test_one_lock_folder_holds_linux_on_x86_64_and_on_arm(tmp_path):
    from packaging.pylock import Pylock

    # PyTorch publishes its own linux-aarch64 GPU builds (GH200/Grace, Jetson): the Arm half
    # is resolved from them (sm_80 and up) and the x86_64 half from the x86_64 builds
    (tmp_path / "spec.yaml").write_text(GRACE)
    done = subprocess.run([sys.executable, "-m", "envbuild", "lock", "spec.yaml", "-o", "lock", "--json"],
                          cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    answer = json.loads(done.stdout)
    assert answer["platforms"] == ["linux-64", "linux-aarch64"]
    # base-packages.json: what the base image (an nvidia/cuda one: no Python packages) provides
    assert sorted(Path(f).name for f in answer["files"]) == [
        "base-packages.json", "pylock.linux-aarch64.toml", "pylock.toml", "requirements-linux-aarch64.lock",
        "requirements.lock"]
    for platform, name, machine in (("linux-64", "pylock.toml", "x86_64"),
                                    ("linux-aarch64", "pylock.linux-aarch64.toml", "aarch64")):
        lock = Pylock.from_dict(tomllib.loads((tmp_path / "lock" / name).read_text()))
        assert [str(m) for m in lock.environments] == [
            f'sys_platform == "linux" and platform_machine == "{machine}" and platform_python_implementation == "CPython"']
        assert str(lock.requires_python) == "==3.12.*"
        # each platform's lock holds the GPU build's wheel for its own machine, with its CUDA libraries
        (torch,) = [p for p in lock.packages if p.name == "torch"]
        assert torch.wheels and all(machine in w.filename and "cp312" in w.filename for w in torch.wheels)
        assert any(p.name.startswith("nvidia-") for p in lock.packages)
        assert {p["name"] for p in answer["pip_packages"][platform]} == {p.name for p in lock.packages}

    check = subprocess.run([sys.executable, "-m", "envbuild", "lock", "spec.yaml", "-o", "lock", "--check"],
                           cwd=tmp_path, capture_output=True, text=True)
    assert check.returncode == 0, check.stdout
    # building for one of the lock's platforms finds the lock current and takes that platform's file
    done = subprocess.run([sys.executable, "-m", "envbuild", "dockerfile", "spec.yaml", "--platform", "linux-aarch64",
                           "--lock-dir", "lock", "-o", "context"], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0 and "locking into" not in done.stderr, done.stderr
    copied = [p.name for p in (tmp_path / "context" / "envbuild" / "image" / "lock").glob("*.lock")]
    assert "requirements-linux-aarch64.lock" in copied and "requirements.lock" not in copied
    # and the layers the image installs pin the aarch64 files: every hash they name is one of its lock's
    arm_lock = (tmp_path / "lock" / "requirements-linux-aarch64.lock").read_text()
    layer_hashes = [h for layer in (tmp_path / "context" / "envbuild" / "layers").glob("*/requirements.lock")
                    for h in re.findall(r"--hash=sha256:([0-9a-f]{64})", layer.read_text())]
    assert layer_hashes and all(h in arm_lock for h in layer_hashes)
