"""Whole-file writes that never leave a half-written file behind.

The data goes to a hidden temporary file in the target's folder (same filesystem, so
os.replace is atomic) and replaces the target only once it is complete; on any error the
temporary file is removed and the target keeps its old content.
"""
from __future__ import annotations

import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Iterator


@contextmanager
def replacing(path: str | os.PathLike, mode: str = "w") -> Iterator[IO]:
    """Yield a file opened with `mode` ("w" is UTF-8 text, "wb" bytes) that becomes `path`
    when the block ends without an error."""
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
