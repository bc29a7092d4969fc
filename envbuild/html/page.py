"""The parts every page shares: the document around a body, the one set of status colours
with its legend, facts and fixes, key/value lists.

A page is one self-contained file: its style sheet is inline (page.css, next to this
module), pictures are inline SVG, and a Content-Security-Policy forbids every fetch and
every script, so opening it never reaches the network nor runs code.
"""
from __future__ import annotations

from importlib import resources
from typing import Any

from envbuild import __version__
from envbuild.html.markup import Markup, h, join, raw, void

# One vocabulary for every page: (CSS class, glyph, what it means). The glyph keeps the
# meaning in a greyscale print and for readers who cannot tell the colours apart.
STATUSES = {
    "ok": ("s-ok", "\u2713", "ok"),
    "unchecked": ("s-unchecked", "?", "unchecked: a fact needed to check it is unknown"),
    "warning": ("s-warning", "!", "warning"),
    "conflict": ("s-conflict", "\u2717", "conflict"),
    "skipped": ("s-skipped", "\u2013", "skipped: nothing to check it against"),
}
# the words each command's JSON uses, as one of STATUSES
ALIASES = {"unverified": "unchecked", "pass": "ok", "fail": "conflict", "warn": "warning", "skip": "skipped",
           "not_run": "skipped", "CONFLICT": "conflict"}

_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'"


def status_of(word: str | None) -> str:
    """A JSON status or verdict as one of STATUSES (an unknown word shows as skipped)."""
    word = ALIASES.get(word or "", word or "")
    return word if word in STATUSES else "skipped"


def badge(word: str | None, text: Any = None) -> Markup:
    """The status as a coloured pill with its glyph: `text`, or the JSON's own word."""
    cls, glyph, _meaning = STATUSES[status_of(word)]
    return h("span", {"class": f"badge {cls}"}, h("span", {"aria-hidden": "true"}, glyph), " ",
             (word or "").replace("_", " ") if text is None else text)


def legend(words: tuple[str, ...], labels: dict[str, str] | None = None) -> Markup:
    """The colours and glyphs used, each with what it means (or `labels[word]`)."""
    def label(word: str) -> str:
        if labels and word in labels:
            return labels[word]
        return STATUSES[word][2] if word in STATUSES else word.replace("_", " ")

    return swatches([(word, STATUSES[status_of(word)][1], label(word)) for word in words])


def swatches(items: list[tuple[str, str, Any]]) -> Markup:
    """A legend of (status, the text its cells show, what it means)."""
    return h("ul", {"class": "legend"}, [
        h("li", {}, h("span", {"class": f"swatch {STATUSES[status_of(word)][0]}", "aria-hidden": "true"}, glyph), " ", label)
        for word, glyph, label in items])


def document(title: str, body: list[Any], *, made_from: str, matrix_version: str | None = None) -> str:
    """The whole page. `made_from`: the command whose JSON the page shows."""
    footer = ["Written by envbuild ", __version__, " from the JSON of ", h("code", {}, made_from)]
    if matrix_version:
        footer += ["; matrices ", h("code", {}, matrix_version)]
    footer.append(".")
    head = join([
        void("meta", {"charset": "utf-8"}),
        void("meta", {"name": "viewport", "content": "width=device-width, initial-scale=1"}),
        void("meta", {"http-equiv": "Content-Security-Policy", "content": _CSP}),
        void("meta", {"name": "generator", "content": f"envbuild {__version__}"}),
        h("title", {}, title),
        h("style", {}, raw(_css())),
    ])
    return ("<!DOCTYPE html>\n" + h("html", {"lang": "en"}, h("head", {}, head),
                                     h("body", {}, h("main", {}, body), h("footer", {"class": "meta"}, footer))) + "\n")


def _css() -> str:
    return resources.files("envbuild.html").joinpath("page.css").read_text(encoding="utf-8")


def section(title: str, *children: Any, id: str | None = None) -> Markup:
    return h("section", {"id": id}, h("h2", {}, title), children)


def kv(rows: list[tuple[str, Any]]) -> Markup:
    """A key/value list; rows whose value is None are left out."""
    return h("dl", {"class": "kv"}, [(h("dt", {}, k), h("dd", {}, v)) for k, v in rows if v is not None])


def fact_item(fact: dict[str, Any]) -> Markup:
    marks = [m for m, key in (("inferred", "inferred"), ("secondary source", "secondary")) if fact.get(key)]
    return h("li", {}, fact.get("text"), h("span", {"class": "mark"}, f" ({', '.join(marks)})") if marks else None,
             h("div", {"class": "source"}, "source: ", fact.get("source")))


def fix_item(fix: dict[str, Any]) -> Markup:
    changes = fix.get("changes") or {}
    return h("li", {}, fix.get("description"),
             [(" ", h("code", {"class": "change"}, f"{key}: {'(any)' if value is None else value}"))
              for key, value in changes.items()])


def problem_card(item: dict[str, Any], word: str, *, heading: Any = None) -> Markup:
    """A conflict, unchecked link or warning: its sentence, the facts behind it and its fixes."""
    facts, fixes = item.get("facts") or [], item.get("fixes") or []
    kind = item.get("kind") or ", ".join(item.get("links") or ())
    parts = [h("p", {"class": "what"}, badge(word), " ", h("code", {}, kind) if kind else None, " ",
               heading, item.get("message"))]
    if facts:
        parts.append(h("ul", {"class": "facts", "aria-label": "facts"}, [fact_item(f) for f in facts]))
    if fixes:
        parts.append(h("p", {"class": "fixes-title"}, "Fixes:"))
        parts.append(h("ol", {"class": "fixes"}, [fix_item(f) for f in fixes]))
    elif word == "conflict":
        parts.append(h("p", {"class": "meta"}, "No fix found within the matrices."))
    if item.get("nearest"):
        parts.append(h("p", {"class": "meta"}, "nearest known: ", ", ".join(map(str, item["nearest"]))))
    return h("div", {"class": f"card {STATUSES[status_of(word)][0]}"}, parts)
