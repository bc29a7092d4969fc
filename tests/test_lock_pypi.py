"""`envbuild lock` against the real PyPI: every bundled recipe that resolves with pip also
locks, with hashes, for the Python resolve chose; a hashed lock installs with
`pip install --require-hashes` into a fresh venv.

These read pypi.org (deselect with `-m "not network"` when offline). The machine's pip
configuration is replaced by an empty one, so PyPI itself is what answers.
"""
from __future__ import annotations

import os
import subprocess
import sys

import pytest


pytestmark = pytest.mark.network


@pytest.fixture(autouse=True)
def pypi_only(monkeypatch):
    for key in [k for k in os.environ if k.startswith(("PIP_", "UV_"))]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)


def test_a_hashed_lock_installs_with_require_hashes_in_a_fresh_venv(tmp_path):
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    (tmp_path / "small.yaml").write_text(
        f"name: small\ncuda: '12.4'\npython: '{python}'\ninstaller: pip\ntarget: {{platform: linux-64}}\n"
        "packages: {pip: ['requests==2.32.3']}\n")
    done = subprocess.run([sys.executable, "-m", "envbuild", "lock", "small.yaml", "-o", "lock"], cwd=tmp_path,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    subprocess.run([sys.executable, "-m", "venv", str(tmp_path / "venv")], check=True)
    venv_python = str(tmp_path / "venv" / "bin" / "python")
    done = subprocess.run([venv_python, "-m", "pip", "install", "--quiet", "--require-hashes", "--only-binary=:all:",
                           "-r", str(tmp_path / "lock" / "requirements.lock")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    done = subprocess.run([venv_python, "-c", "import requests, urllib3; print(requests.__version__)"],
                          capture_output=True, text=True)
    assert done.stdout.strip() == "2.32.3", done.stderr
