"""Step 1 of reading a spec: YAML text -> a raw mapping that remembers where each value was.

Nothing here knows what the keys mean (that is `validate.py`). The parser keeps, for
every value, the `file:line:column` it came from and, for unquoted scalars, the exact
text as written: YAML reads `python: 3.10` as the float 3.1, and the validator needs
"3.10" back.
"""
from __future__ import annotations

import os
import re
import stat
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from envbuild.infra.errors import UserError, clip

Path_ = tuple  # a path into the raw mapping: ("target", "gpus", 0)


@dataclass
class RawSpec:
    """A parsed but unchecked spec: plain dicts/lists/scalars plus positions."""

    data: dict[str, Any]
    source: str | None = None
    locations: dict[Path_, str] = field(default_factory=dict)  # path -> where its value is
    key_locations: dict[Path_, str] = field(default_factory=dict)  # path -> where its key is
    texts: dict[Path_, str] = field(default_factory=dict)  # path -> source text of a plain scalar

    def where(self, path: Path_ = (), *, key: bool = False) -> str | None:
        """The most precise known location of `path` (falling back to its parents)."""
        table = self.key_locations if key else self.locations
        for end in range(len(path), -1, -1):
            found = table.get(tuple(path[:end])) or self.locations.get(tuple(path[:end]))
            if found:
                return found
        return self.source

    def text(self, path: Path_, value: Any) -> Any:
        """`value` as written in the file when it was an unquoted number (3.10, 535.54, 12)."""
        # Booleans stay booleans here: `strict: yes` is True; env values use `texts` directly.
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return self.texts.get(tuple(path), str(value))
        return value

    def set(self, path: Path_, value: Any, where: str) -> None:
        """Set a value from outside the file (a command-line flag), creating parents."""
        node = self.data
        for part in path[:-1]:
            child = node.get(part)
            if not isinstance(child, dict):
                child = node[part] = {}
            node = child
        node[path[-1]] = value
        self._forget(tuple(path))
        self.locations[tuple(path)] = where
        self.key_locations[tuple(path)] = where

    def _forget(self, prefix: Path_) -> None:
        for table in (self.locations, self.key_locations, self.texts):
            for stale in [p for p in table if p[: len(prefix)] == prefix]:
                del table[stale]


_QUOTED = re.compile(r"'[^'\n]*'|\"[^\"\n]*\"")
_STANDARD_TAG = "tag:yaml.org,2002:"

MAX_SPEC_BYTES = 1 << 20  # 1 MiB: a spec is a few hundred bytes; anything near this is a mistake

_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"))


def read_spec_file(path: str | Path) -> RawSpec:
    """A spec from a regular file, or from stdin when `path` is `-`: at most MAX_SPEC_BYTES,
    read with that limit, so a device, a pipe or a huge file is refused at once."""
    source = str(path)
    if source == "-":
        data = sys.stdin.buffer.read(MAX_SPEC_BYTES + 1)
        return parse_text(_decode(data, "<stdin>"), "<stdin>")
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer; fstat then refuses it.
        fd = os.open(source, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise UserError("spec file not found", where=source, hint="check the path") from None
    except IsADirectoryError:
        raise UserError("is a directory, not a spec file", where=source, hint="name the spec file") from None
    except OSError as exc:
        raise UserError(f"cannot read spec file: {exc.strerror}", where=source, hint="check the path and its permissions") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        kind = next((name for test, name in _KINDS if test(info.st_mode)), "not a regular file")
        raise UserError(f"is {kind}, not a spec file", where=source,
                        hint="give a regular YAML file, or - to read the spec from stdin")
    with os.fdopen(fd, "rb") as handle:
        if info.st_size > MAX_SPEC_BYTES:
            raise UserError(f"spec file is {info.st_size} bytes; the limit is {MAX_SPEC_BYTES} (1 MiB)", where=source,
                            hint="a spec is a short YAML file: check that this is the right file")
        try:
            data = handle.read(MAX_SPEC_BYTES + 1)  # /proc-style files report size 0
        except OSError as exc:
            raise UserError(f"cannot read spec file: {exc.strerror}", where=source) from None
    return parse_text(_decode(data, source), source)


def _decode(data: bytes, source: str) -> str:
    if len(data) > MAX_SPEC_BYTES:
        raise UserError(f"spec is larger than {MAX_SPEC_BYTES} bytes (1 MiB)", where=source,
                        hint="a spec is a short YAML file: check that this is the right input")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(f"spec file is not UTF-8 text (byte {exc.start})", where=source) from None


def parse_text(text: str, source: str | None = None) -> RawSpec:
    loader_type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    loader = loader_type(text)
    label = source or "<spec>"
    try:
        root = loader.get_single_node()
        raw = RawSpec(data={}, source=source)
        builder = _Builder(loader, raw, label)
        data = builder.build(root, ()) if root is not None else None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        # The parser may quote the text it stopped at ("the tag '!...'"); a file that is not
        # YAML may be anything, a password file too, so no quoted part is shown.
        problem = _QUOTED.sub("", exc.problem or exc.context or "invalid YAML").strip(" :")
        where = f"{label}:{mark.line + 1}:{mark.column + 1}" if mark else label
        raise UserError(f"invalid YAML: {problem}", where=where, hint="fix the YAML syntax") from None
    except yaml.YAMLError:
        raise UserError("invalid YAML", where=label, hint="fix the YAML syntax") from None
    except RecursionError:
        raise UserError("invalid YAML: nested too deeply", where=label) from None
    finally:
        loader.dispose()
    if data is None:
        raise UserError("the spec is empty", where=label, hint="add at least `frameworks:` or `cuda:`")
    if not isinstance(data, dict):
        raise UserError(
            f"the spec must be a mapping of keys (name, frameworks, cuda, ...), not a {_kind(data)}",
            where=raw.where(()),
        )
    raw.data = data
    return raw


class _Builder:
    """Turns the YAML node tree into Python values, recording positions on the way and
    rejecting what a spec never needs: duplicate keys, non-string keys, recursive aliases."""

    def __init__(self, loader: Any, raw: RawSpec, label: str):
        self.loader = loader
        self.raw = raw
        self.label = label
        # node -> its value, so that an alias is built once. A node compares by identity:
        # an alias is the same node object as its anchor.
        self.done: dict[yaml.Node, Any] = {}
        self.active: set[yaml.Node] = set()

    def at(self, node: Any) -> str:
        mark = node.start_mark
        return f"{self.label}:{mark.line + 1}:{mark.column + 1}"

    def build(self, node: Any, path: Path_) -> Any:
        self.raw.locations.setdefault(path, self.at(node))
        if node in self.done:
            return self.done[node]
        if node in self.active:
            raise UserError("recursive YAML alias", where=self.at(node), hint="write the value out")
        self.active.add(node)
        try:
            if isinstance(node, yaml.MappingNode):
                self._expect_tag(node, "map")
                # YAML merge keys: `<<: *base` brings in base's keys, and a key written in
                # the mapping itself overrides a merged one. Only keys written twice in the
                # same mapping are duplicates.
                explicit = sum(1 for k, _ in node.value if k.tag != "tag:yaml.org,2002:merge")
                self.loader.flatten_mapping(node)  # merged pairs first, then the explicit ones
                merged_count = len(node.value) - explicit
                value: Any = {}
                written: set[str] = set()
                for index, (key_node, value_node) in enumerate(node.value):
                    if not isinstance(key_node, yaml.ScalarNode) or key_node.tag != "tag:yaml.org,2002:str":
                        raise UserError(
                            f"keys must be plain names, not {key_node.tag.rsplit(':', 1)[-1]}",
                            where=self.at(key_node),
                            hint="quote the key",
                        )
                    name = key_node.value
                    if index >= merged_count:
                        if name in written:
                            raise UserError(f"duplicate key {name!r}", where=self.at(key_node), hint="keep one of them")
                        written.add(name)
                    if name in value:  # an overridden merged value leaves no positions behind
                        self.raw._forget(path + (name,))  # (only then: scanning for every key is quadratic)
                    self.raw.key_locations[path + (name,)] = self.at(key_node)
                    value[name] = self.build(value_node, path + (name,))
            elif isinstance(node, yaml.SequenceNode):
                self._expect_tag(node, "seq")
                value = [self.build(item, path + (i,)) for i, item in enumerate(node.value)]
            else:
                value = self.loader.construct_object(node, deep=True)
                if not node.style and node.tag.rsplit(":", 1)[-1] in ("int", "float", "bool"):
                    self.raw.texts[path] = node.value
        finally:
            self.active.discard(node)
        self.done[node] = value
        return value

    def _expect_tag(self, node: Any, kind: str) -> None:
        if node.tag != f"tag:yaml.org,2002:{kind}":
            standard = node.tag.startswith(_STANDARD_TAG)  # `!!python/object`; a local tag is the file's own text
            shown = f" !!{clip(node.tag[len(_STANDARD_TAG):], 40)}" if standard else ""
            raise UserError(f"unsupported YAML tag{shown}", where=self.at(node), hint="remove the tag")


def _kind(value: Any) -> str:
    return {list: "list", str: "string", int: "number", float: "number", bool: "boolean"}.get(
        type(value), type(value).__name__
    )
