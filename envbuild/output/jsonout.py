"""`--json` answers: one JSON object on stdout per command.

Each command's object is described by `schema/<command>.schema.json` (errors by
`schema/error.schema.json`). The schemas are stable: keys may be added, none renamed
or removed. Human progress and warnings go to stderr, so stdout stays parseable.
"""
from __future__ import annotations

import json
import sys

from envbuild.core.model import to_jsonable


def emit(data: dict) -> None:
    """Print `data` as the command's one JSON object."""
    sys.stdout.write(json.dumps(to_jsonable(data), indent=2, default=str) + "\n")
    sys.stdout.flush()


def wanted(args) -> bool:
    """True when the command was asked for JSON on stdout (`--json`, or verify's `--json -`)."""
    value = getattr(args, "json", None)
    return value is True or value == "-"
