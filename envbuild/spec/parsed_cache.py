"""A cache of parsed spec files, so that running a command again on the same spec does
not import PyYAML (about 25 ms, a tenth of `envbuild resolve`).

What is cached is the output of `parse.parse_text` for one exact text: the plain values
and their positions, stored with `marshal` (no classes to build when it loads). A hit
needs the same text, the same source label and the same `parse.py` (its size and
modification time name the cache file), so any edit of the spec or of the parser parses
again. Only texts that parsed without an error are stored, so every error message still
comes from the parser. A spec holding a value marshal cannot store (a YAML date) is
simply not cached.
"""
from __future__ import annotations

import marshal
import os

from envbuild.paths import cache_dir
from envbuild.spec import parse

FORMAT = 1
KEEP = 32  # specs remembered; the oldest is forgotten first
MAX_TEXT = 64 * 1024  # a larger spec is parsed every time rather than bloating the cache


def _cache_file() -> str:
    info = os.stat(parse.__file__)
    return os.path.join(cache_dir(), f"specs-{FORMAT}-{info.st_size:x}-{info.st_mtime_ns:x}.marshal")


def _read(path: str) -> dict:
    try:
        with open(path, "rb") as handle:
            entries = marshal.loads(handle.read())
    except (OSError, EOFError, ValueError, TypeError):
        return {}  # cold or unreadable: parse
    return entries if isinstance(entries, dict) else {}


def parse_text(text: str, source: str | None) -> parse.RawSpec:
    """`parse.parse_text(text, source)`, from the cache when this text was parsed before."""
    if len(text) > MAX_TEXT:
        return parse.parse_text(text, source)
    path = _cache_file()
    entries = _read(path)
    found = entries.get((source, text))
    if found is not None:
        data, locations, key_locations, texts = found
        return parse.RawSpec(data=data, source=source, locations=locations, key_locations=key_locations, texts=texts)
    raw = parse.parse_text(text, source)
    entry = (raw.data, raw.locations, raw.key_locations, raw.texts)
    try:
        marshal.dumps(entry)
    except ValueError:
        return raw  # a value marshal cannot store
    entries[(source, text)] = entry
    for stale in list(entries)[:-KEEP]:
        del entries[stale]
    try:
        from envbuild import atomic

        os.makedirs(os.path.dirname(path), exist_ok=True)
        with atomic.replacing(path, "wb") as handle:
            marshal.dump(entries, handle)
    except OSError:
        pass  # a read-only home only costs speed
    return raw
