"""Named sets of package names that several stages share (matrices/packages.yaml).

The spec refuses the conda packages that choose a CUDA variant, the lock pins and checks
the same packages, the resolver knows which packages need a compiler: one table says
which names are meant. This module reads only that table of the compiled matrices (not
the typed tables of `envbuild.matrix`), so that the spec, which sits below the matrices,
can use it; the matrix loader validates the same rows (source or reason, unique names)
with the other tables.
"""
from __future__ import annotations

import functools

from envbuild.infra.paths import compiled_matrices


@functools.lru_cache(maxsize=1)
def _sets() -> dict[str, tuple[str, ...]]:
    sets: dict[str, list[str]] = {}
    for row in compiled_matrices()["tables"]["packages"]:
        for name in row.get("sets", ()):
            sets.setdefault(name, []).append(row["name"])
    return {name: tuple(members) for name, members in sets.items()}


def package_set(name: str) -> tuple[str, ...]:
    """The packages of set `name`, in the file's order (an unknown set is a KeyError: a bug)."""
    return _sets()[name]


@functools.lru_cache(maxsize=None)
def package_frozenset(name: str) -> frozenset[str]:
    return frozenset(package_set(name))
