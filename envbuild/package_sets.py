"""Named sets of package names that several stages share (matrices/packages.yaml).

The spec refuses the conda packages that choose a CUDA variant, the lock pins and checks
the same packages, the resolver knows which packages need a compiler: one table says
which names are meant. This module reads only that file (not the whole matrices), so
that the spec, which sits below the matrices, can use it; the matrix loader validates the
same rows (source or reason, unique names) with the other tables.
"""
from __future__ import annotations

import functools
import marshal
import os
import time

from envbuild.paths import MATRICES_DIR, cache_dir

FILE = MATRICES_DIR / "packages.yaml"


@functools.lru_cache(maxsize=1)
def _sets() -> dict[str, tuple[str, ...]]:
    # Kept in the cache folder by the file's size and modification time, so that a
    # resolve does not import PyYAML for this one small file (see envbuild.matrix).
    info = os.stat(FILE)
    key = (str(FILE), info.st_size, info.st_mtime_ns)
    cached = cache_dir() / f"package-sets-{info.st_ino:x}.marshal"
    try:
        stored_key, sets = marshal.loads(cached.read_bytes())
        if stored_key == key:
            return sets
    except (OSError, EOFError, ValueError, TypeError):
        pass
    sets = _parse()
    if info.st_mtime_ns < time.time_ns() - 2_000_000_000:  # not "racy": see matrix._remember_version
        try:
            from envbuild import atomic

            cached.parent.mkdir(parents=True, exist_ok=True)
            atomic.write_bytes(cached, marshal.dumps((key, sets)))
        except OSError:
            pass  # a read-only home only costs speed
    return sets


def _parse() -> dict[str, tuple[str, ...]]:
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    sets: dict[str, list[str]] = {}
    for row in yaml.load(FILE.read_bytes(), Loader=loader)["packages"]:
        for name in row["sets"]:
            sets.setdefault(name, []).append(row["name"])
    return {name: tuple(members) for name, members in sets.items()}


def package_set(name: str) -> tuple[str, ...]:
    """The packages of set `name`, in the file's order (an unknown set is a KeyError: a bug)."""
    return _sets()[name]


@functools.lru_cache(maxsize=None)
def package_frozenset(name: str) -> frozenset[str]:
    return frozenset(package_set(name))
