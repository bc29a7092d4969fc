"""`ensure`: the resolved, locked, hash-checked environment of a spec on this host.

    host facts -> resolve (no base image) -> is the prefix current? -> lock -> install -> swap in

The prefix is current, and nothing is done, when the lock it was installed from still
matches the spec, the matrices and the resolved stack (`lock --check`'s test, on the stamp
the marker recorded), its files are the ones recorded, it was made for this host's glibc
and indexes, and the environment's python is still there. A current lock with a broken environment is
installed again without locking. Anything else builds a new environment beside the
prefix and swaps it in (envbuild.hostenv.prefix).
"""
from __future__ import annotations

import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from envbuild import pipeline
from envbuild.core.model import Resolution
from envbuild.dockerfile.locked import locked_files
from envbuild.dockerfile.lockfiles import read_lock_dir
from envbuild.hostenv import install, prefix as prefixes, python
from envbuild.hostenv.install import python_runs
from envbuild.hostenv.request import Host, HostRequest
from envbuild.infra.urls import strip_credentials
from envbuild.lock import folder
from envbuild.lock.metadata import stamp_for


@dataclass
class EnvResult:
    prefix: Path
    action: str  # "created", "updated" or "unchanged"
    request: HostRequest
    resolution: Resolution
    record: dict  # what the prefix's marker holds
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)


def ensure(request: HostRequest, resolution: Resolution, prefix: Path, host: Host, *, progress,
           index_url: str | None = None, extra_index_urls: tuple[str, ...] = (),
           before_install: "Callable[[], None] | None" = None) -> EnvResult:
    """Make `prefix` hold the environment of `resolution` (from `resolve_for_host`);
    `before_install` is called when there is work to do. Raises LockRefused when the stack
    cannot be locked, EnvironmentProblem when an index, a channel or the needed Python is
    missing; the prefix is then left as it was."""
    start = time.monotonic()
    prefix = Path(prefix)
    prefixes.guard(prefix)

    indexes = [strip_credentials(u) for u in (index_url, *extra_index_urls) if u]  # recorded: no secret in it
    state = _state(prefix, request, resolution, host, indexes)
    if state == "current":
        return EnvResult(prefix, "unchanged", request, resolution, prefixes.read_marker(prefix),
                         time.monotonic() - start)
    with prefixes.exclusive(prefix):
        state = _state(prefix, request, resolution, host, indexes)  # another run may have just made it
        if state == "current":
            return EnvResult(prefix, "unchanged", request, resolution, prefixes.read_marker(prefix),
                             time.monotonic() - start)
        existed = prefix.exists() and prefixes.read_marker(prefix) is not None
        if before_install is not None:
            before_install()
        record = _build(prefix, request, resolution, host, indexes, reuse_lock=state == "lock current",
                        progress=progress, index_url=index_url, extra_index_urls=extra_index_urls)
    return EnvResult(prefix, "updated" if existed else "created", request, resolution, record,
                     time.monotonic() - start)


def _state(prefix: Path, request: HostRequest, resolution: Resolution, host: Host, indexes: list[str]) -> str:
    """"current", "lock current" (the environment must be installed again from its lock)
    or "stale". The marker records the stamp the lock was made with (spec, matrices,
    resolved stack: what `lock --check` compares) and the sha256 of the lock's record,
    which in turn holds the sha256 of every lock file: so the lock is current when the
    stamp is today's and every file is the one recorded, without parsing the lock."""
    marker = prefixes.read_marker(prefix)
    if marker is None:
        return "stale"
    lock_dir = prefix / prefixes.LOCK_DIR
    if (marker.get("glibc") != host.glibc or marker.get("indexes") != indexes
            or marker.get("stamp") != _stamp(request, resolution)):
        return "stale"
    record = lock_dir / folder.RECORD
    if not record.is_file() or marker.get("lock_sha256") != folder.sha256_file(record) or folder.verify(lock_dir):
        return "stale"
    return "current" if python_runs(prefix) else "lock current"


def _stamp(request: HostRequest, resolution: Resolution) -> dict[str, str]:
    return stamp_for([resolution], request.spec.lock_platforms).fields()


def _build(prefix: Path, request: HostRequest, resolution: Resolution, host: Host, indexes: list[str], *,
           reuse_lock: bool, progress, index_url, extra_index_urls) -> dict:
    """A new environment in a staging folder, swapped in when complete; on any failure
    the staging folder goes and the prefix keeps what it had."""
    stack = resolution.resolved
    final = Path(prefix).absolute()
    stage = prefixes.staging(prefix)
    try:
        stage_lock = stage / prefixes.LOCK_DIR
        interpreter = None
        pip_only = stack.installer == "pip" and not request.spec.conda_packages
        if pip_only:  # before locking: a missing Python is said at once
            interpreter = python.provide(stack.python, progress)
        if reuse_lock:
            shutil.copytree(prefix / prefixes.LOCK_DIR, stage_lock)
        else:
            progress.line(f"envbuild: locking for this host ({host.platform}, glibc {host.glibc or 'unknown'}, "
                          f"Python {stack.python})")
            pipeline.lock(request.spec, resolution, lock_dir=stage_lock, scratch=stage, quiet=True,
                          index_url=index_url, extra_index_urls=tuple(extra_index_urls), glibc=host.glibc)
        if (stage_lock / folder.CONDA_LOCKFILE).is_file():
            conda = install.install_conda(stage, final, stage_lock, host.platform, progress)
            version = next((p.split("=")[1] for p in conda if p.startswith("python=")), stack.python)
            interpreter = None
        else:
            install.install_pip(stage, stage_lock, interpreter, progress)
            version = _venv_version(stage) or stack.python
        record = {
            "stamp": _stamp(request, resolution),
            "lock_sha256": folder.sha256_file(stage_lock / folder.RECORD),
            "installer": "conda" if (stage_lock / folder.CONDA_LOCKFILE).is_file() else "pip",
            "python": version,
            "interpreter": interpreter,
            "platform": host.platform,
            "glibc": host.glibc,
            "indexes": indexes,
            "target": {"driver": request.spec.driver, "gpus": list(request.spec.gpus), "source": request.target_source},
            "packages": locked_packages(stage_lock, host.platform),
        }
        prefixes.write_marker(stage, record)
        prefixes.swap_in(stage, prefix)
    except BaseException:
        _discard(stage)
        raise
    return {"written_by": prefixes.WRITTEN_BY, **record}


def _discard(stage: Path) -> None:
    """Remove a failed staging folder; after a failed rattler install, once its remaining
    tasks have stopped writing into it."""
    loop = sys.modules.get("envbuild.lock.loop")
    if loop is not None:
        loop.settle()
    shutil.rmtree(stage, ignore_errors=True)


def _venv_version(venv: Path) -> str | None:
    """The interpreter's full version as the venv's pyvenv.cfg records it."""
    try:
        text = (venv / "pyvenv.cfg").read_text(encoding="utf-8")
    except OSError:
        return None
    for line in text.splitlines():
        key, _, value = line.partition("=")
        if key.strip() in ("version_info", "version"):
            return value.strip()
    return None


def locked_packages(lock_dir: Path, platform: str) -> list[dict]:
    """Every package of the lock: {name, version, manager}."""
    return [{"name": e.name, "version": e.version, "manager": e.manager}
            for e in locked_files(read_lock_dir(lock_dir, platform))]
