"""PEP 440 specifier questions, answered by `packaging` and remembered between runs.

`packaging.specifiers` imports `packaging.tags`, which brings `logging`, `subprocess`,
`platform` and `sysconfig` with it: about 20 ms, more than `envbuild resolve` spends
resolving. A repeated command asks the same few questions ("does `==2.1.2.*` admit
2.1.0?"), so packaging's answers are kept in the cache folder, in a file named by
packaging's version, and a run whose questions were all asked before never imports
`packaging.specifiers`. Every answer is packaging's own: a question not yet in the file
is put to a real SpecifierSet.
"""
from __future__ import annotations

import marshal
import os

MAX_ENTRIES = 50_000  # beyond this the file starts afresh (many distinct specs over time)

_answers: dict | None = None
_added = 0  # answers not yet saved
_saving = False


def normal(text: str) -> str | None:
    """`str(SpecifierSet(text))` (packaging's normal form), or None when packaging
    refuses the text."""
    answers = _known()
    key = (text,)
    if key not in answers:
        from packaging.specifiers import InvalidSpecifier, SpecifierSet

        try:
            found = str(SpecifierSet(text))
        except InvalidSpecifier:
            found = None
        _remember(key, found)
    return answers[key]


def admits(text: str, version: str, prereleases: bool | None = None) -> bool:
    """`SpecifierSet(text).contains(version, prereleases=prereleases)`."""
    answers = _known()
    key = (text, version, prereleases)
    found = answers.get(key)
    if found is None:
        from packaging.specifiers import SpecifierSet

        found = SpecifierSet(text).contains(version, prereleases=prereleases)
        _remember(key, found)
    return found


def _known() -> dict:
    global _answers
    if _answers is None:
        try:
            with open(_path(), "rb") as handle:
                answers = marshal.loads(handle.read())
        except (OSError, EOFError, ValueError, TypeError):
            answers = {}
        _answers = answers if isinstance(answers, dict) and len(answers) <= MAX_ENTRIES else {}
    return _answers


def _remember(key: tuple, answer) -> None:
    global _added, _saving
    if not _saving:
        import atexit

        atexit.register(_save)
        _saving = True
    _answers[key] = answer
    _added += 1


def _path() -> str:
    from packaging import __version__

    from envbuild.paths import cache_dir

    return os.path.join(cache_dir(), f"specifiers-packaging-{__version__}.marshal")


def _save() -> None:
    global _added
    if not _added:
        return
    try:
        from envbuild import atomic

        os.makedirs(os.path.dirname(_path()), exist_ok=True)
        with atomic.replacing(_path(), "wb") as handle:
            marshal.dump(_answers, handle)
        _added = 0
    except (OSError, ValueError):
        pass  # a read-only home only costs speed
