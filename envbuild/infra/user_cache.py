"""The per-user cache folder (`$XDG_CACHE_HOME/envbuild`, by default `~/.cache/envbuild`):
plain JSON that envbuild can always work out again, never code.

Only what is slow to learn and named by its own content is kept here: what a local image
says about itself (`envbuild.image.facts`, under the image's ID). A cache folder can be
shared (a CI cache mount) and written by others, so what is read is checked first:

- the folder and each folder below it are used only when they are real folders (not
  links) of this user that no one else may write to; otherwise nothing is read or
  written there;
- a file is read only when it is a regular file of this user that no one else may write
  to, of at most MAX_BYTES; it is opened without blocking and without following a link, so
  a FIFO, a device or a link to one in its place is refused at once;
- what it holds must be a JSON object. Anything else is a miss: the caller works the
  answer out again, and says nothing.
"""
from __future__ import annotations

import json
import os
import stat
import tempfile
from fnmatch import fnmatch
from pathlib import Path

MAX_BYTES = 1 << 20  # an image's distribution list is a few kilobytes
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_NOCTTY | os.O_CLOEXEC


def folder() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "envbuild"


def read_json(*parts: str) -> dict | None:
    """The JSON object kept as `folder()/parts...`, or None: absent, in a folder or file
    others may write, not a regular file, too large, or not a JSON object."""
    directory = _open_folder(parts[:-1])
    if directory is None:
        return None
    try:
        fd = os.open(parts[-1], _FILE_FLAGS, dir_fd=directory)
    except OSError:
        return None
    finally:
        os.close(directory)
    info = os.fstat(fd)
    if not _ours(info, stat.S_ISREG) or info.st_size > MAX_BYTES:
        os.close(fd)
        return None
    with os.fdopen(fd, "rb") as handle:
        try:
            data = handle.read(MAX_BYTES + 1)
        except OSError:
            return None
    try:
        found = json.loads(data) if len(data) <= MAX_BYTES else None
    except ValueError:  # not JSON, or not UTF-8
        return None
    return found if isinstance(found, dict) else None


def write_json(data: dict, *parts: str, keep: int) -> None:
    """Keep `data` as `folder()/parts...`, and only the `keep` newest files beside it. A
    folder that cannot be made, or that others may write to, only costs the next run the
    work again."""
    path = folder().joinpath(*parts)
    try:
        folder().mkdir(mode=0o700, parents=True, exist_ok=True)
        for depth in range(1, len(parts)):
            folder().joinpath(*parts[:depth]).mkdir(mode=0o700, exist_ok=True)
    except OSError:
        return
    directory = _open_folder(parts[:-1])
    if directory is None:
        return
    os.close(directory)
    try:
        fd, partial = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")  # mode 0600
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(json.dumps(data, sort_keys=True) + "\n")
        os.replace(partial, path)
    except OSError:
        return
    _forget_oldest(path.parent, "*" + path.suffix, keep)


def _open_folder(parts: tuple[str, ...]) -> int | None:
    """A descriptor of `folder()/parts...`, each step checked, or None."""
    try:
        fd = os.open(folder(), _DIR_FLAGS)
    except OSError:
        return None
    for part in ("", *parts):
        if part:
            try:
                below = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except OSError:
                os.close(fd)
                return None
            os.close(fd)
            fd = below
        if not _ours(os.fstat(fd), stat.S_ISDIR):
            os.close(fd)
            return None
    return fd


def _ours(info: os.stat_result, kind) -> bool:
    return kind(info.st_mode) and info.st_uid == os.getuid() and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def _forget_oldest(directory: Path, pattern: str, keep: int) -> None:
    """Delete all but the `keep` most recently written files matching `pattern`; a write
    under way (a dot file) is never touched."""
    try:
        entries = [e for e in os.scandir(directory) if not e.name.startswith(".") and fnmatch(e.name, pattern)]
        entries.sort(key=lambda e: e.stat(follow_symlinks=False).st_mtime_ns)
    except OSError:
        return
    for stale in entries[:-keep] if keep > 0 else entries:
        try:
            os.unlink(stale.path)
        except OSError:
            pass
