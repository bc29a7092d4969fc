"""The folder an environment lives in on this host, and replacing it as one unit.

Layout of a prefix envbuild wrote:

    PREFIX/                     the venv (pip) or conda prefix
    PREFIX/.envbuild/env.json   what was installed: the lock's record hash, the Python, the host facts
    PREFIX/.envbuild/lock/      the lock it was installed from (as `envbuild lock` writes it)

A new or changed environment is built in a staging folder beside the prefix
(`.NAME.envbuild-stage-*`, same filesystem) and swapped in with one atomic
renameat2(RENAME_EXCHANGE): at every instant PREFIX is the whole old environment or the
whole new one, and a failed install leaves the old one as it was. Packages are installed
for the prefix's final path (uv's relocatable venvs, rattler's alternative target prefix),
so nothing in them names the staging folder. Writers hold an flock on
`.NAME.envbuild-lock` beside the prefix.

A prefix that holds files envbuild did not write is refused, like output folders.
"""
from __future__ import annotations

import fcntl
import json
import os
import secrets
import shutil
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from envbuild.infra import atomic
from envbuild.infra.atomic import exchange
from envbuild.infra.errors import UserError
from envbuild.spec.cli_args import SPEC_NAMES

META = ".envbuild"  # inside the prefix
MARKER = f"{META}/env.json"
LOCK_DIR = f"{META}/lock"
WRITTEN_BY = "envbuild env"
STAGE = ".envbuild-stage-"
OLD = ".envbuild-old-"
DEFAULT_ROOT = ".envbuild/envs"  # beside the spec file


def default_prefix(spec_source: str | None) -> Path:
    """`.envbuild/envs/<spec file's stem>` beside the spec file; `default` for the spec a
    folder is found by (`envbuild.yaml`) and for a request made of flags alone (in the
    current folder)."""
    if spec_source and os.path.isfile(spec_source):
        spec = Path(spec_source)
        return spec.parent / DEFAULT_ROOT / ("default" if spec.name in SPEC_NAMES else spec.stem)
    return Path(DEFAULT_ROOT) / "default"


def read_marker(prefix: Path) -> dict | None:
    """What envbuild recorded when it installed `prefix`; None when it is not one of its own."""
    try:
        data = json.loads((Path(prefix) / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("written_by") == WRITTEN_BY else None


def write_marker(prefix: Path, data: dict) -> None:
    (Path(prefix) / META).mkdir(parents=True, exist_ok=True)
    atomic.write_text(Path(prefix) / MARKER, json.dumps({"written_by": WRITTEN_BY, **data}, indent=2) + "\n")


def guard(prefix: Path, flag: str = "--prefix") -> None:
    """Refuse a prefix envbuild could not replace without harming other files: the root,
    the current folder or one above it, a file, a symbolic link, a folder holding files
    envbuild did not write."""
    where = f"{flag} {prefix}"
    target = Path(os.path.abspath(prefix))
    if target == Path(target.anchor):
        raise UserError("the environment cannot be the filesystem root", where=where, hint="name a folder of its own")
    here = Path.cwd().resolve()
    if target.resolve() == here or target.resolve() in here.parents:
        raise UserError("the environment cannot be the current folder or a folder above it", where=where,
                        hint="name a folder of its own, e.g. --prefix .envbuild/envs/train")
    if target.is_symlink():
        raise UserError("is a symbolic link", where=where, hint="name the folder itself")
    if not target.exists():
        return
    if not target.is_dir():
        raise UserError("exists and is not a folder", where=where, hint="name a new folder for the environment")
    if read_marker(target) is not None:
        return
    foreign = sorted(p.name for p in target.iterdir())
    if foreign:
        shown = ", ".join(foreign[:3]) + (", ..." if len(foreign) > 3 else "")
        raise UserError(f"the folder holds files envbuild did not write ({shown})", where=where,
                        hint="name a new or empty folder; envbuild replaces only environments it made")


@contextmanager
def exclusive(prefix: Path) -> Iterator[None]:
    """One writer at a time: an flock on `.NAME.envbuild-lock` beside the prefix."""
    prefix = Path(os.path.abspath(prefix))
    prefix.parent.mkdir(parents=True, exist_ok=True)
    path = prefix.parent / f".{prefix.name}.envbuild-lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"envbuild: waiting for another envbuild run that is writing {prefix}", file=sys.stderr, flush=True)
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def staging(prefix: Path) -> Path:
    """A new, empty staging folder beside `prefix` (same filesystem, so the swap is a
    rename); those of killed runs are removed first (the caller holds `exclusive`)."""
    prefix = Path(os.path.abspath(prefix))
    for stale in prefix.parent.glob(f".{prefix.name}{STAGE}*"):
        shutil.rmtree(stale, ignore_errors=True)
    for stale in prefix.parent.glob(f".{prefix.name}{OLD}*"):
        shutil.rmtree(stale, ignore_errors=True)
    stage = prefix.parent / f".{prefix.name}{STAGE}{secrets.token_hex(4)}"
    try:
        stage.mkdir(0o777)  # the user's umask applies, as to any folder they make
    except OSError as exc:  # name the prefix the user chose, not the hidden staging folder
        raise OSError(exc.errno, exc.strerror, str(prefix)) from None
    return stage


def swap_in(stage: Path, prefix: Path) -> None:
    """Make the finished `stage` the environment at `prefix`, in one atomic step, and
    remove the old one. Where the filesystem cannot exchange two folders, the old one is
    renamed aside and the new one renamed in (a moment without an environment; an error
    in between puts the old one back)."""
    prefix = Path(os.path.abspath(prefix))
    if not prefix.exists():
        os.rename(stage, prefix)
        return
    if exchange(stage, prefix):
        shutil.rmtree(stage, ignore_errors=True)  # now the old environment
        return
    old = Path(tempfile.mkdtemp(prefix=f".{prefix.name}{OLD}", dir=prefix.parent))
    os.rename(prefix, old / "env")
    try:
        os.rename(stage, prefix)
    except OSError:
        os.rename(old / "env", prefix)
        raise
    finally:
        shutil.rmtree(old, ignore_errors=True)
