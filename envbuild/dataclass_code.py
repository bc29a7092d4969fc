"""Compiled methods of dataclasses, kept between runs.

`@dataclass` writes the source text of each class's `__init__`, `__repr__`, `__eq__`,
`__hash__` and (frozen) `__setattr__`/`__delattr__` and compiles it with `exec` when the
class is defined. The ~50 classes behind `envbuild resolve` mean ~270 such compilations,
the largest part of the command's import time; reading the same code objects back with
`marshal` is about 50 times faster.

`install()` gives the `dataclasses` module an `exec` that compiles each distinct text
once and keeps the code in the cache folder, keyed by the text itself, in a file named
by the exact Python version. The classes are therefore exactly those `dataclasses`
builds; only where their methods' bytecode comes from changes, as with `.pyc` files.
"""
from __future__ import annotations

import marshal
import os
import sys

from envbuild.paths import cache_dir

MAX_ENTRIES = 4096  # beyond this (many edited classes over time) the cache starts afresh

_codes: dict | None = None
_added = 0


def install() -> None:
    """Serve `dataclasses`' compilations from the cache from now on (idempotent)."""
    global _codes
    if _codes is not None:
        return
    import atexit
    import dataclasses

    try:
        with open(_path(), "rb") as handle:
            codes = marshal.loads(handle.read())  # marshal.load(handle) reads piecemeal: 20x slower
    except (OSError, EOFError, ValueError, TypeError):
        codes = {}
    _codes = codes if isinstance(codes, dict) and len(codes) <= MAX_ENTRIES else {}
    # `exec` is looked up in the module's globals before the builtins
    dataclasses.exec = _exec
    atexit.register(_save)


def _exec(source, globals=None, locals=None, /):  # noqa: A002 - exec's own parameter names
    if isinstance(source, str):
        global _added
        code = _codes.get(source)
        if code is None:
            code = _codes[source] = compile(source, "<string>", "exec", dont_inherit=True)
            _added += 1
        source = code
    if globals is None:  # as the builtin would: the caller's (dataclasses') namespace
        import dataclasses

        globals = vars(dataclasses)
    exec(source, globals, locals)


def _path() -> str:
    return os.path.join(cache_dir(), f"dataclass-code-{sys.implementation.cache_tag}-{sys.hexversion:x}.marshal")


def _save() -> None:
    if not _added:
        return
    try:
        from envbuild import atomic

        os.makedirs(cache_dir(), exist_ok=True)
        with atomic.replacing(_path(), "wb") as handle:
            marshal.dump(_codes, handle)
    except (OSError, ValueError):
        pass  # a read-only home only costs speed
