"""Whole-file writes that never leave a half-written file behind.

The data goes to a hidden temporary file in the target's folder (same filesystem, so
os.replace is atomic) and replaces the target only once it is complete; on any error the
temporary file is removed and the target keeps its old content.
"""
from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Iterator


@contextmanager
def replacing(path: str | os.PathLike, mode: str = "w") -> Iterator[IO]:
    """Yield a file opened with `mode` ("w" is UTF-8 text, "wb" bytes) that becomes `path`
    when the block ends without an error."""
    import tempfile  # here: `envbuild resolve` imports this module but seldom writes

    target = Path(path)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
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
    import ctypes
    import errno

    renameat2 = getattr(ctypes.CDLL(None, use_errno=True), "renameat2", None)
    if renameat2 is None:
        return False
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.EXDEV):
        return False
    raise OSError(code, os.strerror(code), str(b))
