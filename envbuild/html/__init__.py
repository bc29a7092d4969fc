"""Self-contained HTML pages of what the commands answer (`--html FILE`).

Each page is rendered from the JSON object its command prints with `--json` (never from
the objects behind it), so the page and the JSON cannot disagree:

    resolve_page   `resolve --html`, and with `--fleet` the target x link grid
    grid_page      `matrix grid FRAMEWORK --html`: builds x GPU architectures
    verify_page    `verify --html`: checks, and measured bandwidth/TFLOP/s against the peak

Markup is built by `markup.h`, which escapes every value; `page` holds the document
around a body, the status colours and the style sheet.
"""
from __future__ import annotations

import os
from pathlib import Path

from envbuild.infra import atomic
from envbuild.infra.errors import UserError


def check_target(path: str, *, inputs: tuple[str | None, ...] = (), others: tuple[str | None, ...] = (),
                 flag: str = "--html") -> None:
    """Refuse, before any work is done, a page FILE that could not be written or would
    replace a file the command reads (`inputs`: the spec, the fleet file) or writes
    (`others`: --json FILE, --junit FILE)."""
    target = Path(os.path.abspath(path))
    where = f"{flag} {path}"
    if target.is_dir():
        raise UserError("is a folder, not a file", where=where, hint="name the page's file, e.g. report.html")
    if target.exists() and not target.is_file():  # a device or pipe would be replaced by a file
        raise UserError("is not a regular file", where=where, hint="name a file for the page, e.g. report.html")
    if not target.parent.is_dir():
        raise UserError("its folder does not exist", where=where, hint="create the folder first, or name another file")
    for name, paths in (("an input of this command", inputs), ("another output of this command", others)):
        for other in paths:
            if other and other != "-" and _same_file(target, Path(os.path.abspath(other))):
                raise UserError(f"is {name} ({other}); the page would replace it", where=where,
                                hint="name another file for the page")


def _same_file(a: Path, b: Path) -> bool:
    if a == b:
        return True
    try:
        return a.exists() and b.exists() and os.path.samefile(a, b)
    except OSError:
        return False


def write(path: str, text: str) -> None:
    """Write the page whole or not at all (a failed write leaves the old file); a symlink
    stays one, and the file it leads to gets the page."""
    with atomic.naming(path):
        atomic.write_text(os.path.realpath(path), text)
