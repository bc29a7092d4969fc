"""Atomic writes: every output is written in a staging folder next to its final place and
moved in with os.replace only after all of them were written, so a failed or interrupted
run never leaves a half-written lockfile and never replaces a good one."""
from __future__ import annotations

import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator


class Staging:
    """A hidden folder inside the output folder (same filesystem, so os.replace is atomic).
    Files are created under `path` with their final names; `commit` moves them in."""

    def __init__(self, out_dir: Path):
        self.out_dir = out_dir
        self.path = Path(tempfile.mkdtemp(prefix=".envbuild-lock-", dir=out_dir))
        self.names: list[str] = []

    def file(self, name: str) -> Path:
        self.names.append(name)
        return self.path / name

    def write_text(self, name: str, text: str) -> Path:
        path = self.file(name)
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        return path

    def commit(self) -> list[Path]:
        written = []
        for name in self.names:
            target = self.out_dir / name
            os.replace(self.path / name, target)
            written.append(target)
        return written


@contextmanager
def staging(out_dir: Path) -> Iterator[Staging]:
    """Yield a Staging; the caller commits it. Whatever is left is removed on the way out."""
    out_dir.mkdir(parents=True, exist_ok=True)
    stage = Staging(out_dir)
    try:
        yield stage
    finally:
        shutil.rmtree(stage.path, ignore_errors=True)
