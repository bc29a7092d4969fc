"""PEP 440 specifier questions, answered by `packaging`.

A resolve asks the same few questions many times ("does `>=3.8,<3.12` admit 3.11.0?",
once per build of a table), so each answer is kept for the rest of the process.
"""
from __future__ import annotations

import functools

from packaging.specifiers import InvalidSpecifier, SpecifierSet


@functools.lru_cache(maxsize=1024)
def normal(text: str) -> str | None:
    """`str(SpecifierSet(text))` (packaging's normal form), or None when packaging
    refuses the text."""
    try:
        return str(SpecifierSet(text))
    except InvalidSpecifier:
        return None


@functools.lru_cache(maxsize=16384)
def admits(text: str, version: str, prereleases: bool | None = None) -> bool:
    """`SpecifierSet(text).contains(version, prereleases=prereleases)`."""
    return _specifier_set(text).contains(version, prereleases=prereleases)


@functools.lru_cache(maxsize=1024)
def _specifier_set(text: str) -> SpecifierSet:
    return SpecifierSet(text)
