"""Markup built in Python, with every value escaped.

`h(tag, attrs, *children)` writes one element. A child that is `Markup` (what `h` and
`raw` return) is markup already; anything else is a value: a URL's credentials are
masked and the text is escaped, so a GPU or target named `<script>` shows as text.
Attribute values are escaped the same way; attribute and tag names come from the code,
never from data.
"""
from __future__ import annotations

import html
from collections.abc import Iterable
from typing import Any

from envbuild.infra.urls import mask_text


class Markup(str):
    """Text that is HTML already (built by `h`, or a constant of the code)."""

    __slots__ = ()


def raw(text: str) -> Markup:
    """A constant of the code (never data) used as markup."""
    return Markup(text)


def esc(value: Any) -> Markup:
    """A value as HTML text: None is empty, credentials in URLs masked, <>&"' escaped."""
    if isinstance(value, Markup):
        return value
    if value is None:
        return Markup("")
    text = str(value)
    if "@" in text:  # only `scheme://user:password@` is masked
        text = mask_text(text)
    return Markup(html.escape(text, quote=True))


def _add(parts: list[str], items: Iterable[Any]) -> None:
    """Append each child as markup: values escaped, lists and generators flattened,
    None and False left out."""
    for item in items:
        if isinstance(item, str):
            parts.append(item if isinstance(item, Markup) else esc(item))
        elif isinstance(item, (list, tuple)) or hasattr(item, "__next__"):
            _add(parts, item)
        elif item is not None and item is not False:
            parts.append(esc(item))


def void(tag: str, attrs: dict[str, Any] | None = None) -> Markup:
    """`<tag attrs>`, an element without content (meta, br); attributes as in `h`."""
    parts = [f"<{tag}"]
    for name, value in (attrs or {}).items():
        if value is None or value is False:
            continue
        parts.append(f" {name}" if value is True else f' {name}="{esc(value)}"')
    parts.append(">")
    return Markup("".join(parts))


def h(tag: str, attrs: dict[str, Any] | None = None, *children: Any) -> Markup:
    """`<tag attrs>children</tag>`; attributes whose value is None or False are left out,
    True writes the bare attribute. Lists and generators of children are flattened."""
    parts = [void(tag, attrs)]
    _add(parts, children)
    parts.append(f"</{tag}>")
    return Markup("".join(parts))


def join(items: Iterable[Any], separator: str = "") -> Markup:
    """Values and markup joined into one piece of markup."""
    parts: list[str] = []
    _add(parts, items)
    return Markup(esc(separator).join(parts))
