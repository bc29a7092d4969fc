"""`envbuild lock` against the real PyPI: every bundled recipe that resolves with pip also
locks, with hashes, for the Python resolve chose; a hashed lock installs with
`pip install --require-hashes` into a fresh venv.

These read pypi.org (deselect with `-m "not network"` when offline). The machine's pip
configuration is replaced by an empty one, so PyPI itself is what answers.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from envbuild.errors import EnvironmentProblem
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
    """An interpreter of `version` when this machine has one that runs, else this one."""
    found = shutil.which(f"python{version}")
    if found and subprocess.run([found, "-c", "pass"], capture_output=True).returncode == 0:
        return found
    return sys.executable


def test_a_hashed_lock_installs_with_require_hashes_in_a_fresh_venv(tmp_path):
    # CUDA 12.4 pip environments run on ubuntu22.04's python3, 3.10
    (tmp_path / "small.yaml").write_text(
        "name: small\ncuda: '12.4'\npython: '3.10'\ninstaller: pip\ntarget: {platform: linux-64}\n"
        "packages: {pip: ['requests==2.32.3']}\n")
    done = subprocess.run([sys.executable, "-m", "envbuild", "lock", "small.yaml", "-o", "lock"], cwd=tmp_path,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    # the lock lists the hashes of every file of each pinned version, so hash-checking mode
    # also passes where this machine has no 3.10 and the venv runs another CPython
    subprocess.run([_interpreter("3.10"), "-m", "venv", str(tmp_path / "venv")], check=True)
    venv_python = str(tmp_path / "venv" / "bin" / "python")
    done = subprocess.run([venv_python, "-m", "pip", "install", "--quiet", "--require-hashes", "--only-binary=:all:",
                           "-r", str(tmp_path / "lock" / "requirements.lock")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    done = subprocess.run([venv_python, "-c", "import requests, urllib3; print(requests.__version__)"],
                          capture_output=True, text=True)
    assert done.stdout.strip() == "2.32.3", done.stderr
