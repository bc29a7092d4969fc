"""What a stream can show: colour and cursor movement only on a terminal."""
from __future__ import annotations

import os
import re

# CSI sequences (colours, cursor moves), OSC sequences (titles, links) and lone ESC pairs.
ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")


def strip_ansi(text: str) -> str:
    return ANSI.sub("", text)


def is_terminal(stream) -> bool:
    """A terminal that takes escape sequences (not TERM=dumb)."""
    return bool(getattr(stream, "isatty", None) and stream.isatty()) and os.environ.get("TERM") != "dumb"


def for_stream(text: str, stream) -> str:
    """`text` as it may be written to `stream`: escape sequences kept only on a terminal
    (and not with NO_COLOR, https://no-color.org)."""
    if is_terminal(stream) and not os.environ.get("NO_COLOR"):
        return text
    return strip_ansi(text).replace("\r", "")
