"""Output folders (`dockerfile -o DIR`, `image --context DIR`): envbuild writes only its
fixed entries there (`Dockerfile`, `envbuild/`) and removes nothing else, ever.

Replacing an entry needs proof that envbuild wrote it. Right after a write,
`.envbuild-outputs` records a fingerprint of each entry: the path, size, mtime and inode
of every file under it. An entry whose fingerprint still matches is envbuild's and is
replaced. Anything else at those names (a project's own Dockerfile or `envbuild/`
package, a file edited since, whatever a stale, copied or forged record names) is the
user's: the folder is refused, and with `--force` the entry is moved aside to a free
name, said in one line, before the new one goes in.

Why a stat fingerprint and not a content hash: the context bundles archives and wheels
(gigabytes; hashing 10 GB takes 45 s), and a fingerprint changes just as surely with any
write (mtime, size), any replacement or copy (inode) and any file added or removed. Its
mistakes can only fall on the safe side: an entry that does not match is moved aside,
never deleted.

The record is a hint, never authority: it can prove that an entry is envbuild's, it
never makes another name removable, and it never lets a folder that holds other files
through without `--force`. Folders that can never be outputs: `/`, the parent of the
spec's folder, and any folder that is or contains the lock folder.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import tempfile
from pathlib import Path

from envbuild.infra import atomic
from envbuild.infra.errors import UserError
from envbuild.output import say

MANIFEST = ".envbuild-outputs"
STAGE = ".envbuild-stage-"
_MAX_RECORD_BYTES = 64 * 1024  # a record is a few hundred bytes


def fingerprint(path: Path) -> str | None:
    """The sha256 of (relative path, size, mtime, inode) of every file under `path` (or of
    `path` itself); None when anything there is neither a file nor a folder: envbuild
    writes no links, devices or pipes, so such an entry is never its own."""
    digest = hashlib.sha256()
    pending = [(Path(path), ".")]
    while pending:
        current, rel = pending.pop()
        try:
            info = os.lstat(current)
        except OSError:
            return None
        name = rel.encode("utf-8", "surrogateescape")
        if stat.S_ISDIR(info.st_mode):
            digest.update(b"d " + name + b"\0")
            try:
                children = sorted(os.listdir(current), reverse=True)
            except OSError:
                return None
            pending += [(current / child, f"{rel}/{child}") for child in children]
        elif stat.S_ISREG(info.st_mode):
            digest.update(b"f " + name + f" {info.st_size} {info.st_mtime_ns} {info.st_ino}\0".encode())
        else:
            return None
    return digest.hexdigest()


def read_record(out: Path) -> dict[str, str]:
    """{entry name: fingerprint} as the last write recorded it; {} when there is no
    readable record (a link, a pipe or a device in its place is never read)."""
    try:
        fd = os.open(out / MANIFEST, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return {}
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            return {}
        data = handle.read(_MAX_RECORD_BYTES + 1)
    try:
        entries = json.loads(data)["entries"]
    except (ValueError, KeyError, TypeError):
        return {}
    if not isinstance(entries, dict):
        return {}
    return {name: value for name, value in entries.items() if isinstance(name, str) and isinstance(value, str)}


def _record_is_ours(out: Path) -> bool:
    """The record file itself may be replaced: a regular file (not a link) holding a record."""
    try:
        return stat.S_ISREG(os.lstat(out / MANIFEST).st_mode) and bool(read_record(out))
    except OSError:
        return False


def not_ours(out: Path, owned: tuple[str, ...]) -> list[str]:
    """The names in `out` that envbuild may not replace or remove: everything but its
    staging folders, a proven record, and the owned entries the record proves."""
    record = read_record(out)
    found = []
    for entry in sorted(os.listdir(out)):
        if entry.startswith(STAGE) or (entry == MANIFEST and _record_is_ours(out)):
            continue
        if entry in owned and entry in record and fingerprint(out / entry) == record[entry]:
            continue
        found.append(entry)
    return found


def guard(out: Path, owned: tuple[str, ...], *, force: bool, spec_source: str | None,
          lock_dir: Path | None, flag: str = "-o") -> None:
    """Refuse an output folder that envbuild could not write without harming other files."""
    where = f"{flag} {out}"
    target = Path(os.path.abspath(out)).resolve()
    if target == Path(target.anchor):
        raise UserError("the output folder cannot be the filesystem root", where=where, hint="name a folder of its own")
    if spec_source and os.path.isfile(spec_source):
        spec_dir = Path(os.path.abspath(spec_source)).resolve().parent
        if target == spec_dir.parent:
            raise UserError("the output folder cannot be the parent of the spec's folder", where=where,
                            hint="name a folder of its own, e.g. -o build/context")
    if lock_dir is not None:
        lock = Path(os.path.abspath(lock_dir)).resolve()
        if lock == target or target in lock.parents:
            raise UserError(f"the output folder holds the lock folder {lock_dir}", where=where,
                            hint="write the context to a folder of its own, e.g. -o build/context")
    if not target.exists():
        return
    if not target.is_dir():
        raise UserError("exists and is not a folder", where=where, hint="name a folder")
    foreign = not_ours(target, owned)
    if foreign and not force:
        shown = ", ".join(foreign[:3]) + (", ..." if len(foreign) > 3 else "")
        mine = " or ".join(f"{name}{'/' if name != 'Dockerfile' else ''}" for name in owned)
        raise UserError(f"the folder holds files envbuild did not write ({shown})", where=where,
                        hint=f"name an empty or new folder, or pass --force: other files stay as they are, and a "
                             f"{mine} that envbuild did not write is moved aside")


def staging(out: Path) -> Path:
    """A fresh staging folder inside `out` (same filesystem, so the moves are renames);
    stale ones of killed runs are removed first."""
    out.mkdir(parents=True, exist_ok=True)
    for stale in out.glob(f"{STAGE}*"):
        pid = stale.name[len(STAGE):].split("-", 1)[0]
        if stale.is_dir() and not stale.is_symlink() and (not pid.isdigit() or not _alive(int(pid))):
            shutil.rmtree(stale, ignore_errors=True)
    try:
        return Path(tempfile.mkdtemp(prefix=f"{STAGE}{os.getpid()}-", dir=out))
    except OSError as exc:  # name the folder the user chose, not the hidden staging folder
        raise OSError(exc.errno, exc.strerror, str(out)) from None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def replace_owned(out: Path, stage: Path, owned: tuple[str, ...], *, force: bool) -> None:
    """Move each owned entry from the finished `stage` into `out`. An old entry the record
    proves envbuild's goes into the stage's trash (removed with it); any other one is the
    user's: refused, or with `force` moved aside. Then the new entries are recorded.
    Nothing else in `out` is touched."""
    foreign = [name for name in not_ours(out, owned) if name in owned or name == MANIFEST]
    if foreign and not force:  # the folder changed since the guard looked at it
        raise UserError(f"{out / foreign[0]} was not written by envbuild", where=f"-o {out}",
                        hint="pass --force to move it aside, or name another folder")
    for name in foreign:
        aside = atomic.move_aside(out / name)
        say.warning(f"moved {out / name}, which envbuild did not write, aside to {aside}")
    trash = stage / ".replaced"
    trash.mkdir()
    for name in owned:
        if os.path.lexists(out / name):
            os.replace(out / name, trash / name)
        os.replace(stage / name, out / name)
    record = {"written_by": "envbuild", "entries": {name: fingerprint(out / name) for name in owned}}
    atomic.write_text(out / MANIFEST, json.dumps(record, indent=2) + "\n")
