"""A framework's builds, kept between runs per data version and code.

Making PyTorch's 258 builds and their wheel sets from the matrix rows takes about 15 ms
of every command that resolves; reading them back takes about 4. The matrix rows a build
points to are not stored with it: each is written as its place in the loaded matrices
(pickle's persistent IDs) and read back as that very object, so a cached build and a
freshly made one lead to the same rows. The file name holds the data version and a
checksum of the code that makes builds (and the `packaging` release whose versions they
hold), so a change to any of them makes a new file.
"""
from __future__ import annotations

import dataclasses
import io
import pickle
import zlib
from pathlib import Path

from envbuild import atomic
from envbuild.matrix import from_files
from envbuild.matrix import tables as t
from envbuild.paths import cache_dir, forget_oldest

# the code whose output or classes the files hold: every framework plugin and the build
# class, the resolver's wheel sets, the row classes and the value types they carry
_CODE = ("frameworks", "resolver/artefacts.py", "resolver/context.py", "resolver/build_cache.py",
         "resolver/lockable.py", "matrix", "versions.py", "values.py")
_PACKAGE = Path(__file__).resolve().parent.parent
KEEP = 8  # files per framework (data and code versions); the oldest go first
_code_key: int | None = None


def load(m, framework: str) -> list | None:
    """The builds stored for this data version and code, or None (not stored, unreadable,
    or matrices changed in memory, whose version does not name their content)."""
    if not from_files(m):
        return None
    try:
        with open(_path(m, framework), "rb") as fh:
            unpickler = pickle.Unpickler(io.BytesIO(fh.read()))
        unpickler.persistent_load = lambda pid: getattr(m, pid[0])[pid[1]]
        builds = unpickler.load()
    except (OSError, pickle.PickleError, EOFError, AttributeError, IndexError, TypeError, ValueError):
        return None
    return builds if isinstance(builds, list) else None


def store(m, framework: str, builds: list) -> None:
    """Keep `builds` for the next run; a cache that cannot be written only costs speed."""
    if not from_files(m):
        return
    places = {id(row): (f.name, i) for f in dataclasses.fields(m) for i, row in enumerate(_rows(getattr(m, f.name)))}
    buffer = io.BytesIO()
    pickler = pickle.Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL)
    pickler.persistent_id = lambda obj: places.get(id(obj)) if isinstance(obj, t.Row) else None
    try:
        pickler.dump(builds)
        path = _path(m, framework)
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic.replacing(path, "wb") as fh:
            fh.write(buffer.getvalue())
        forget_oldest(path.parent, f"builds-{framework}-*.pickle", KEEP)
    except (OSError, pickle.PicklingError, TypeError, AttributeError):
        pass


def _rows(value) -> tuple:
    return value if isinstance(value, tuple) else ()


def _path(m, framework: str) -> Path:
    return Path(cache_dir()) / f"builds-{framework}-{m.version}-code{_code_checksum():08x}.pickle"


def _code_checksum() -> int:
    global _code_key
    if _code_key is None:
        import packaging

        checksum = zlib.crc32(packaging.__version__.encode())
        for part in _CODE:
            path = _PACKAGE / part
            files = sorted(path.glob("*.py")) if path.is_dir() else [path]
            for file in files:
                checksum = zlib.crc32(file.name.encode() + file.read_bytes(), checksum)
        _code_key = checksum
    return _code_key

