"""`envbuild lock` against the real PyPI: every bundled recipe that resolves with pip also
locks, with hashes, for the Python resolve chose; a hashed lock installs with
`pip install --require-hashes` into a fresh venv.

These read pypi.org (deselect with `-m "not network"` when offline). The machine's pip
configuration is replaced by an empty one, so PyPI itself is what answers.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest


pytestmark = pytest.mark.network


@pytest.fixture(autouse=True)
def pypi_only(monkeypatch):
    for key in [k for k in os.environ if k.startswith(("PIP_", "UV_"))]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)


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
