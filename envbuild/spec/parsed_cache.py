"""A cache of parsed spec files, so that running a command again on the same spec does
not import PyYAML (about 25 ms, a tenth of `envbuild resolve`).

What is cached is the output of `parse.parse_text` for one exact text: the plain values
and their positions, stored with `marshal` (no classes to build when it loads). A hit
needs the same text, the same source label and the same `parse.py` (its size and
modification time name the cache folder), so any edit of the spec or of the parser parses
again. Each text has its own file, named by a checksum of source and text, so a hit reads
only its own entry (a 100-target fleet file's is 70 KB; one file for all 32 entries grew
to 2 MB). Only texts that parsed without an error are stored, so every error message
still comes from the parser. A spec holding a value marshal cannot store (a YAML date) is
simply not cached.
"""
from __future__ import annotations

import marshal
import os
import zlib

from envbuild.paths import cache_dir, forget_oldest
from envbuild.spec import parse

FORMAT = 2
KEEP = 32  # specs remembered; the oldest is forgotten first
MAX_TEXT = 64 * 1024  # a larger spec is parsed every time rather than bloating the cache


def _folder() -> str:
    info = os.stat(parse.__file__)
    return os.path.join(cache_dir(), f"specs-{FORMAT}-{info.st_size:x}-{info.st_mtime_ns:x}")


def _entry_file(folder: str, text: str, source: str | None) -> str:
    checksum = zlib.crc32(text.encode(), zlib.crc32(str(source).encode()))
    return os.path.join(folder, f"{checksum:08x}.marshal")


def _read(path: str):
    try:
        with open(path, "rb") as handle:
            return marshal.loads(handle.read())
    except (OSError, EOFError, ValueError, TypeError):
        return None  # cold or unreadable: parse


def parse_text(text: str, source: str | None) -> parse.RawSpec:
    """`parse.parse_text(text, source)`, from the cache when this text was parsed before."""
    if len(text) > MAX_TEXT:
        return parse.parse_text(text, source)
    folder = _folder()
    path = _entry_file(folder, text, source)
    found = _read(path)
    if isinstance(found, tuple) and len(found) == 6 and found[:2] == (source, text):  # not a checksum's namesake
        _source, _text, data, locations, key_locations, texts = found
        return parse.RawSpec(data=data, source=source, locations=locations, key_locations=key_locations, texts=texts)
    raw = parse.parse_text(text, source)
    try:
        blob = marshal.dumps((source, text, raw.data, raw.locations, raw.key_locations, raw.texts))
    except ValueError:
        return raw  # a value marshal cannot store
    try:
        from envbuild import atomic

        os.makedirs(folder, exist_ok=True)
        with atomic.replacing(path, "wb") as handle:
            handle.write(blob)
        forget_oldest(folder, "*.marshal", KEEP)
    except OSError:
        pass  # a read-only home only costs speed
    return raw
