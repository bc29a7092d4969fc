"""The lock folder: the names of a lock's files, the record of their hashes, and
replacing the whole set as one unit.

A lock is a set of files (conda-lock.yml, conda-<platform>.lock, requirements*.lock,
pylock*.toml, base-image.json) plus `.envbuild-lock.json`, which records the sha256 of each. Nobody may
ever see a new conda-lock.yml next to an old explicit file, so a set is replaced whole:

* A folder that holds nothing but the lock (the usual `-o lock`): the new set is written to
  a staging folder beside it and the two folders are exchanged with one atomic
  renameat2(RENAME_EXCHANGE). At every instant the folder holds the old set or the new one.
* A folder shared with other files (`-o .` in a project, or a mount point): the new set is
  written to a staging folder inside it, which is renamed to `.envbuild-commit` once
  complete (the commit point). The files are then moved into place, the record last. A run
  killed after the commit point is rolled forward by the next envbuild run that reads or
  writes the folder (`recover`), like a journal: no envbuild reader ever sees the mix.

Writers hold an flock on the folder while they write, so two runs never interleave; the
second says it waits. Staging folders of killed runs are removed by the next writer (while
it holds the lock, no other run can be using one).

A file is replaced or removed only where the record proves envbuild wrote it: a regular
file whose sha256 is the recorded one. A file without that proof (a project's own
requirements.lock, one edited by hand, one a stale or forged record names; a link, pipe
or device) is the user's: a lock that would write that name is refused (before the solve,
and again before the switch), and an old name the new set drops is left as it is. The
record is a hint that can prove a file is envbuild's, never authority to remove another.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import signal
import stat
import sys
import tempfile
import time
from contextlib import contextmanager
from fnmatch import fnmatch
from pathlib import Path
from typing import Iterator

import yaml

from envbuild.infra.atomic import exchange, move_aside, naming
from envbuild.infra.errors import UserError
from envbuild.infra.urls import strip_text
from envbuild.output import say

CONDA_LOCKFILE = "conda-lock.yml"
PIP_LOCKFILE = "requirements.lock"
PYLOCK = "pylock.toml"  # the same pip lock in PEP 751's format
BASE_RECORD = "base-image.json"  # the base image and its digest, when `--pin-digests` pinned it
RECORD = ".envbuild-lock.json"  # {"files": {name: sha256}}: what `lock --check` verifies
COMMIT = ".envbuild-commit"
STAGE = ".envbuild-stage-"
BASE_PACKAGES = "base-packages.json"  # the pins of a pip lock the base image provides (lock.base_packages)
_LOCK_PATTERNS = (CONDA_LOCKFILE, "conda-*.lock", PIP_LOCKFILE, "requirements-*.lock", PYLOCK, "pylock.*.toml",
                  BASE_RECORD, BASE_PACKAGES)


def explicit_name(platform: str) -> str:
    return f"conda-{platform}.lock"


def pip_lock_name(platform: str, first: bool) -> str:
    """requirements.lock for the first platform, requirements-<platform>.lock for others."""
    return PIP_LOCKFILE if first else f"requirements-{platform}.lock"


def pylock_name(platform: str, first: bool) -> str:
    """pylock.toml for the first platform, pylock.<platform>.toml for others (PEP 751's
    `pylock.<name>.toml`: a platform name holds no dot)."""
    return PYLOCK if first else f"pylock.{platform}.toml"


def is_lock_file(name: str) -> bool:
    return any(fnmatch(name, pattern) for pattern in _LOCK_PATTERNS)


def _is_ours(name: str) -> bool:
    return is_lock_file(name) or name in (RECORD, COMMIT) or name.startswith(STAGE)


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


# --- reading and checking -----------------------------------------------------------------

def read_conda_lockfile(path: Path):
    """The parsed conda-lock.yml at `path`, read with PyYAML's C loader where it is built (a
    lock of 200 packages parses several times faster than with the pure-Python one).
    Raises OSError, UnicodeDecodeError or yaml.YAMLError."""
    return yaml.load(read_lock_text(path), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def read_lock_text(path: Path) -> str:
    """The text of a lock file. A pipe or device in its place (or a link to one) is refused
    in one line, never read or waited on. Raises OSError, UnicodeDecodeError or UserError."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise UserError("is not a regular file, so it cannot be envbuild's lock file", where=str(path),
                            hint="move it out of the lock folder and run `envbuild lock` again")
        return handle.read().decode("utf-8")


_MAX_RECORD_BYTES = 1 << 20  # a record of a few dozen files is a few KB


def read_record(folder: Path) -> dict[str, str] | None:
    """{file name: sha256} as the last complete write recorded it; None when there is none
    (or a link, pipe or device stands in its place: never followed, read or waited on)."""
    try:
        fd = os.open(Path(folder) / RECORD, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            return None
        text = handle.read(_MAX_RECORD_BYTES + 1)
    try:
        files = json.loads(text)["files"]
    except (ValueError, KeyError, TypeError):
        return None
    if not isinstance(files, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in files.items()):
        return None
    if not all("/" not in name and is_lock_file(name) for name in files):  # a record names files in this folder only
        return None
    return files


def read_base_packages(folder: Path) -> dict | None:
    """base-packages.json of a lock folder (`envbuild.lock.base_packages`: which pins of the
    pip lock the base image provides), None when there is none or it is unreadable."""
    try:
        data = json.loads(read_lock_text(Path(folder) / BASE_PACKAGES))
    except (OSError, ValueError):  # UnicodeDecodeError is a ValueError
        return None
    return data if isinstance(data, dict) and isinstance(data.get("from_base"), dict) else None


def verify(folder: Path) -> list[str]:
    """Every file of the set against the recorded hashes: the reasons the folder does not
    hold one complete lock (empty = it does)."""
    folder = Path(folder)
    problems = []
    if (folder / COMMIT / RECORD).exists():  # without its record the switch was complete
        problems.append(f"{folder / COMMIT} holds an interrupted write; run `envbuild lock` again to finish it")
    record = read_record(folder)
    if record is None:
        return problems + [f"{folder / RECORD} is missing or unreadable, so the lock's files cannot be checked"]
    for name, expected in sorted(record.items()):
        path = folder / name
        if not path.is_file():
            problems.append(f"{path} is missing")
        elif sha256_file(path) != expected:
            problems.append(f"{path} does not match the sha256 recorded when the lock was written "
                            "(edited, or left from another run)")
    for path in sorted(folder.iterdir()):
        if is_lock_file(path.name) and path.name not in record:
            problems.append(f"{path} is not part of the recorded lock (left from an older run, or not "
                            "envbuild's: move it out of the lock folder)")
    return problems


def is_proven(folder: Path, name: str, record: dict[str, str] | None) -> bool:
    """Whether `folder/name` is the file envbuild wrote: a regular file (not a link) whose
    sha256 is the one `record` has for it."""
    path = Path(folder) / name
    try:
        regular = stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False
    return regular and record is not None and name in record and sha256_file(path) == record[name]


def not_ours(folder: Path, names) -> list[str]:
    """Those of `names` (and the record) that exist in `folder` without proof that envbuild
    wrote them: a new lock must not replace them."""
    folder = Path(folder)
    record = read_record(folder)
    found = []
    for name in sorted({*names, RECORD}):
        try:
            info = os.lstat(folder / name)
        except OSError:
            continue
        if name == RECORD:
            if not stat.S_ISREG(info.st_mode):
                found.append(name)
        elif not is_proven(folder, name, record):
            found.append(name)
    return found


def guard(folder: Path, where: str, names) -> None:
    """Refuse a lock folder where writing the lock files `names` would replace a file
    envbuild did not write (before the solve, and again under the folder's lock before the
    switch)."""
    folder = Path(folder)
    if Path(os.path.abspath(folder)).resolve() == Path("/"):
        raise UserError("the lock folder cannot be the filesystem root", where=where, hint="name a folder of its own")
    if folder.exists() and not folder.is_dir():
        raise UserError("exists and is not a folder", where=where, hint="name a folder for the lockfiles")
    foreign = not_ours(folder, names) if folder.is_dir() else []
    if foreign:
        shown = ", ".join(foreign[:3]) + (", ..." if len(foreign) > 3 else "")
        raise UserError(f"the folder holds {shown}, which envbuild did not write (or which changed since) and "
                        "will not replace", where=where,
                        hint="move it out of the folder, or lock into a folder of its own, e.g. -o lock")


def foreign_entries(folder: Path) -> list[str]:
    """Entries in `folder` that are no part of an envbuild lock: the folder is then not a lock
    folder (a project root, /etc) and only `envbuild lock -o` may write a lock into it."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    record = read_record(folder) or {}
    return [entry for entry in sorted(os.listdir(folder))
            if not (entry in (RECORD, COMMIT) or entry.startswith(STAGE) or entry in record)]


# --- writing ------------------------------------------------------------------------------

_steps = 0


def fault_step(what: str) -> None:
    """Test hook for the kill sweep: with ENVBUILD_FAULT_STEP=N the process SIGKILLs itself
    at the N-th step of a lock write (ENVBUILD_FAULT_TRACE=1 prints the steps), and with
    ENVBUILD_FAULT_HOLD=SECONDS a sealed set waits that long before it is switched in (so
    concurrency tests can make two writers meet)."""
    global _steps
    if what == "sealed" and os.environ.get("ENVBUILD_FAULT_HOLD"):
        time.sleep(float(os.environ["ENVBUILD_FAULT_HOLD"]))
    wanted = os.environ.get("ENVBUILD_FAULT_STEP")
    if not wanted:
        return
    _steps += 1
    if os.environ.get("ENVBUILD_FAULT_TRACE"):
        print(f"envbuild: fault step {_steps}: {what}", file=sys.stderr, flush=True)
    if str(_steps) == wanted:
        os.kill(os.getpid(), signal.SIGKILL)


class NewSet:
    """The files of the lock being written, in a staging folder, under their final names."""

    def __init__(self, path: Path):
        self.path = path
        self.names: list[str] = []

    def file(self, name: str) -> Path:
        """Where to write `name` (for writers that take a path, such as conda-lock's)."""
        if not is_lock_file(name):
            raise ValueError(f"{name} is not a lock file name")
        if name not in self.names:
            self.names.append(name)
        return self.path / name

    def write_text(self, name: str, text: str) -> Path:
        path = self.file(name)
        data = text.encode("utf-8")
        fault_step(f"open {name}")
        with open(path, "wb") as handle:
            handle.write(data[: len(data) // 2])
            handle.flush()
            fault_step(f"half of {name}")
            handle.write(data[len(data) // 2:])
            handle.flush()
            os.fsync(handle.fileno())
        fault_step(f"wrote {name}")
        return path

    def copy_from(self, folder: Path, name: str) -> None:
        """Carry a file of the current set over unchanged."""
        shutil.copy2(folder / name, self.file(name))

    def seal(self) -> None:
        """Write the record of every file's hash; the set is complete after this. Lockfiles
        are committed to repositories: no URL in them keeps its credentials."""
        files = {}
        for name in self.names:
            text = (self.path / name).read_text(encoding="utf-8")
            if strip_text(text) != text:
                (self.path / name).write_text(strip_text(text), encoding="utf-8")
            fault_step(f"hash {name}")
            files[name] = sha256_file(self.path / name)
            with open(self.path / name, "rb") as handle:
                os.fsync(handle.fileno())
        text = json.dumps({"written_by": "envbuild lock", "files": files}, indent=2, sort_keys=True) + "\n"
        with open(self.path / RECORD, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        fault_step("sealed")


@contextmanager
def replacing(folder: Path) -> Iterator[NewSet]:
    """Yield an empty NewSet to fill; when the block ends without an error it replaces the
    lock in `folder` as one unit. On an error the folder keeps its old set."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    with naming(folder), _exclusive(folder):
        _clean_stale(folder)
        finish_interrupted(folder)
        swap = _can_swap(folder)
        try:
            stage = Path(tempfile.mkdtemp(prefix=f".{folder.name}{STAGE}" if swap else STAGE,
                                          dir=folder.parent if swap else folder))
        except OSError as exc:  # name the lock folder, not the hidden staging folder
            raise OSError(exc.errno, exc.strerror, str(folder)) from None
        fault_step("staging folder made")
        try:
            new = NewSet(stage)
            yield new
            guard(folder, str(folder), new.names)
            new.seal()
            if not (swap and _exchange(stage, folder)):
                _commit(stage, folder)
        finally:
            fault_step("remove staging")
            shutil.rmtree(stage, ignore_errors=True)  # after an exchange: the old set


def update(folder: Path, texts: dict[str, str], edit=None) -> None:
    """Replace some files of the current lock (the rest carried over) as one unit.
    `edit(new_set)` may change carried-over files in the staging folder."""
    folder = Path(folder)
    record = read_record(folder)
    with replacing(folder) as new:
        for path in sorted(folder.iterdir()):
            recorded = path.name in record if record is not None else is_lock_file(path.name)
            if recorded and path.name not in texts and path.is_file():
                new.copy_from(folder, path.name)
        for name, text in texts.items():
            new.write_text(name, text)
        if edit is not None:
            edit(new)


@contextmanager
def _exclusive(folder: Path) -> Iterator[None]:
    """An flock on the folder itself. A folder exchanged while we waited is a new inode:
    lock that one instead."""
    said = False
    while True:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if not said:
                    say.note(f"waiting for another envbuild run that is writing {folder}")
                    said = True
                fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                now = os.stat(folder)
            except FileNotFoundError:
                folder.mkdir(parents=True, exist_ok=True)
                now = None
            held = os.fstat(fd)
            if now is not None and (now.st_ino, now.st_dev) == (held.st_ino, held.st_dev):
                if said:
                    say.note(f"the other run finished; writing {folder}")
                yield
                return
        finally:
            os.close(fd)


def _clean_stale(folder: Path) -> None:
    """Staging folders left by killed runs (under the lock, nobody else can own one)."""
    beside = f".{folder.name}{STAGE}"
    stale = [p for p in folder.iterdir() if p.name.startswith(STAGE)]
    stale += [p for p in folder.parent.iterdir() if p.name.startswith(beside)]
    for path in stale:
        shutil.rmtree(path, ignore_errors=True)


def _can_swap(folder: Path) -> bool:
    """The folder may be exchanged whole when it holds nothing but the recorded lock, is a
    real folder (not a symlink) other than the working directory, and its parent is on the
    same filesystem (not a mount point)."""
    try:
        if folder.is_symlink() or folder.resolve() == Path.cwd().resolve():
            return False
        if os.stat(folder).st_dev != os.stat(folder.resolve().parent).st_dev:
            return False
        if not os.access(folder.resolve().parent, os.W_OK):
            return False
        record = read_record(folder)
        return all(is_proven(folder, path.name, record) or (_is_ours(path.name) and not is_lock_file(path.name))
                   for path in folder.iterdir())
    except OSError:
        return False


def _exchange(stage: Path, folder: Path) -> bool:
    """Swap the two folders atomically; False when this kernel or filesystem cannot."""
    os.chmod(stage, os.stat(folder).st_mode & 0o7777)
    fault_step("exchange")
    if exchange(stage, folder):
        fault_step("exchanged")
        return True
    return False


def _commit(stage: Path, folder: Path) -> None:
    fault_step("commit")
    os.rename(stage, folder / COMMIT)  # the commit point: the new set is complete
    finish_interrupted(folder)


def recover(folder: Path) -> None:
    """Before reading a lock folder: finish a write that was killed after its commit point,
    so every reader (lock --check, dockerfile, image) sees the whole new set."""
    folder = Path(folder)
    if (folder / COMMIT / RECORD).exists():
        with _exclusive(folder):
            finish_interrupted(folder)


def finish_interrupted(folder: Path) -> None:
    """Move a committed set into place (again: every step may already have been done)."""
    commit = folder / COMMIT
    if not commit.is_dir():
        return
    record = read_record(commit)
    if record is None:  # the record is moved last: the set is in place already
        shutil.rmtree(commit)
        return
    old = read_record(folder) or {}
    for name in record:
        if (commit / name).exists():
            _set_aside_unless_ours(folder, name, old, record)
            os.replace(commit / name, folder / name)
            fault_step(f"moved {name}")
    for name in old:  # files of the old set that the new one does not have; never anyone else's
        if name not in record and is_lock_file(name) and is_proven(folder, name, old):
            (folder / name).unlink()
            fault_step(f"removed old {name}")
    os.replace(commit / RECORD, folder / RECORD)
    fault_step("moved the record")
    shutil.rmtree(commit)


def _set_aside_unless_ours(folder: Path, name: str, old: dict[str, str], new: dict[str, str]) -> None:
    """Before a committed file takes its place: whatever is at `folder/name` and is neither
    the old set's file nor already the new one (put there while a killed write waited to be
    finished) is moved aside, never replaced."""
    path = folder / name
    if not os.path.lexists(path) or is_proven(folder, name, old) or is_proven(folder, name, new):
        return
    aside = move_aside(path)
    say.warning(f"moved {path}, which envbuild did not write, aside to {aside}")
