"""Whole-file writes that never leave a half-written file behind.

The data goes to a hidden temporary file in the target's folder (same filesystem, so
os.replace is atomic) and replaces the target only once it is complete; on any error the
temporary file is removed and the target keeps its old content. The new file gets the
mode the old one had, or for a new name the mode `open()` would give it (0666 less the
umask), never the temporary file's 0600.

A file the user names on the command line (`-o FILE`, `--json FILE`) is written with
`output`: a symlink is followed (the link stays, its target gets the content), a
character device or pipe (`/dev/stdout`, `>(cmd)`) is written through, and a folder,
block device or socket is refused; none of them is ever replaced by a regular file.
"""
from __future__ import annotations

import ctypes
import errno
import os
import stat
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Iterator

from envbuild.infra.errors import UserError


def umask() -> int:
    """The process's umask, read without changing it (os.umask can only set it, and setting
    it for a moment would race with threads that create files)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    old = os.umask(0o022)  # no /proc (or an old kernel): the only other way to read it
    os.umask(old)
    return old


def new_file_mode() -> int:
    return 0o666 & ~umask()


@contextmanager
def replacing(path: str | os.PathLike, mode: str = "w") -> Iterator[IO]:
    """Yield a file opened with `mode` ("w" is UTF-8 text, "wb" bytes) that becomes `path`
    when the block ends without an error."""
    target = Path(path)
    try:
        old = os.stat(target, follow_symlinks=False)
        permissions = stat.S_IMODE(old.st_mode) if stat.S_ISREG(old.st_mode) else new_file_mode()
    except FileNotFoundError:
        permissions = new_file_mode()
    try:
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    except OSError as exc:  # name the file asked for, not the hidden temporary one
        raise OSError(exc.errno, exc.strerror, str(target)) from None
    try:
        os.fchmod(fd, permissions)
        with os.fdopen(fd, mode, encoding=None if "b" in mode else "utf-8") as handle:
            yield handle
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@contextmanager
def naming(path: str | os.PathLike) -> Iterator[None]:
    """An OSError raised inside that names no file (a failed write() does not) names `path`,
    so the one-line message says where the disk was full or read-only."""
    try:
        yield
    except OSError as exc:
        if exc.filename is None and exc.errno is not None:
            raise OSError(exc.errno, exc.strerror, str(path)) from None
        raise


def write_text(path: str | os.PathLike, text: str) -> None:
    with replacing(path) as handle:
        handle.write(text)


def write_bytes(path: str | os.PathLike, data: bytes) -> None:
    with replacing(path, "wb") as handle:
        handle.write(data)


_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def exchange(a: str | os.PathLike, b: str | os.PathLike) -> bool:
    """Swap two existing paths (folders) in one atomic step, renameat2(RENAME_EXCHANGE):
    at every instant each name holds one whole tree. False when this kernel, C library or
    filesystem cannot; any other failure is raised as the OSError naming `b`."""
    renameat2 = getattr(ctypes.CDLL(None, use_errno=True), "renameat2", None)
    if renameat2 is None:
        return False
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.EXDEV):
        return False
    raise OSError(code, os.strerror(code), str(b))
_REFUSED = ((stat.S_ISDIR, "a folder"), (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


@contextmanager
def output(path: str | os.PathLike, mode: str = "w") -> Iterator[IO]:
    """Like `replacing`, for a file the user named (see the module's docstring)."""
    try:
        info = os.stat(path)  # through every link, /proc's magic ones (/dev/stdout) too
    except FileNotFoundError:
        info = None
    if info is None or stat.S_ISREG(info.st_mode):
        # replaced where the links lead: a link itself is never replaced
        with naming(path), replacing(os.path.realpath(path), mode) as handle:
            yield handle
        return
    kind = next((name for test, name in _REFUSED if test(info.st_mode)), None)
    if kind is not None:
        raise UserError(f"is {kind}, not a file", where=str(path), hint="name a file to write")
    # A character device or a FIFO: written through, as a shell's `>` would. O_NONBLOCK
    # first, so that a FIFO nobody reads is refused instead of waiting for ever.
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as exc:
        if stat.S_ISFIFO(info.st_mode) and exc.errno == errno.ENXIO:  # no reader
            raise UserError("is a named pipe that nobody reads", where=str(path),
                            hint="start its reader first, or name a file") from None
        raise
    os.set_blocking(fd, True)
    with naming(path), os.fdopen(fd, mode, encoding=None if "b" in mode else "utf-8") as handle:
        yield handle


def write_output(path: str | os.PathLike, text: str) -> None:
    with output(path) as handle:
        handle.write(text)


def move_aside(path: Path) -> Path:
    """Rename `path` (a file, folder, link, anything) to the first free name
    `<name>.before-envbuild[-N]` beside it, never over an existing entry; return that name."""
    for n in range(1, 1000):
        aside = path.with_name(f"{path.name}.before-envbuild" + (f"-{n}" if n > 1 else ""))
        if os.path.lexists(aside):
            continue
        try:
            _rename_without_replacing(path, aside)
        except FileExistsError:  # taken meanwhile: try the next name
            continue
        return aside
    raise UserError("no free name to move it aside to", where=str(path), hint="move it away yourself")


def _rename_without_replacing(source: Path, target: Path) -> None:
    """os.rename replaces an existing file: a hard link fails instead (then the old name
    goes). A folder cannot be hard-linked; os.rename cannot replace a file or a non-empty
    folder with one, and the name was free a moment ago."""
    if stat.S_ISDIR(os.lstat(source).st_mode):
        os.rename(source, target)
        return
    try:
        os.link(source, target, follow_symlinks=False)
    except FileExistsError:
        raise
    except OSError:  # a filesystem without hard links
        if os.path.lexists(target):
            raise FileExistsError(str(target)) from None
        os.rename(source, target)
        return
    os.unlink(source)
