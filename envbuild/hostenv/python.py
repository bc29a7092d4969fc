"""The Python interpreter of a pip environment on this host, found or installed by uv.

A pip environment is a venv over an interpreter of this machine, so its Python must be
one the host has: one uv finds (on PATH, in pyenv's or uv's own installs, as
`uv python find --system` looks: virtual environments, envbuild's own included, are
skipped, since a venv over another venv breaks when that one goes), else one uv downloads (`uv python install`, where the network
reaches uv's Python builds and `UV_PYTHON_DOWNLOADS` is not `never`). When neither
works the user is told which Python is needed and how to get it.
"""
from __future__ import annotations

import os
import subprocess

from uv import find_uv_bin

from envbuild.infra.errors import EnvironmentProblem

FIND_TIMEOUT_S = 60
INSTALL_TIMEOUT_S = 600


def _uv() -> str:
    return find_uv_bin()


def _find(request: str | None, *, show_version: bool = False) -> str | None:
    command = [_uv(), "python", "find", "--system", "--no-project", "--no-python-downloads"]
    if show_version:
        command.append("--show-version")
    if request:
        command.append(request)
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=FIND_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = done.stdout.strip().splitlines()
    return found[-1].strip() if done.returncode == 0 and found else None


def default_version() -> str | None:
    """The version ("3.11.7") of the Python this host uses by default, as uv finds it (the
    first on PATH, or the one `UV_PYTHON` / a `.python-version` file names); None without one."""
    return _find(None, show_version=True)


def find(version: str) -> str | None:
    """An interpreter of Python `version` (major.minor) on this host, or None."""
    return _find(f"=={version}.*")


def provide(version: str, progress) -> str:
    """An interpreter of Python `version`: found, else installed by uv; EnvironmentProblem
    (exit 3) saying which Python is needed and how to get it when neither works."""
    found = find(version)
    if found:
        return found
    why = "UV_PYTHON_DOWNLOADS=never forbids downloading one"
    if os.environ.get("UV_PYTHON_DOWNLOADS", "").lower() != "never":
        progress.line(f"envbuild: this host has no Python {version}; asking uv to install one")
        try:
            done = subprocess.run([_uv(), "python", "install", version], capture_output=True, text=True,
                                  timeout=INSTALL_TIMEOUT_S)
            why = _last_cause(done.stderr) if done.returncode else ""
        except subprocess.TimeoutExpired:
            why = f"uv python install did not finish within {INSTALL_TIMEOUT_S} s"
        found = find(version) if not why else None
        if found:
            return found
    raise EnvironmentProblem(
        f"the environment needs Python {version}, and this host has none ({why or 'uv installed none'})",
        hint=f"install it (`uv python install {version}` where the network reaches uv's Python builds, your "
             f"system's python{version} package, or `pyenv install {version}`) and run again, or pin a Python "
             "this host has with --python")


def _last_cause(stderr: str) -> str:
    """uv's innermost cause ("dns error", "failed to lookup address information ...")."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    causes = [line.split(":", 1)[1].strip() for line in lines if line.startswith("Caused by:") or
              line.startswith("cause:")]
    text = causes[-1] if causes else (lines[-1] if lines else "no output")
    return f"uv could not download one: {text}"[:300]
