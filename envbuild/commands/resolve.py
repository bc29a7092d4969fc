"""`envbuild resolve`: check a requested GPU stack against the matrices and complete it.

Exit 0 when every check passes, 1 when there is a conflict, 2 for bad input.
"""
from __future__ import annotations

import json
import os
import sys

HELP = "check framework, CUDA, cuDNN, driver, GPU and Python against each other; explain each conflict with fixes"


def configure(parser) -> None:
    from envbuild.spec.cli_args import add_spec_arguments

    add_spec_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print the resolution as JSON (schema in the README)")


def run(args) -> int:
    from envbuild.spec.cli_args import spec_from_args

    spec = spec_from_args(args)  # bad input ends here, before the matrices are read
    from envbuild.resolver import resolve

    resolution = resolve(spec)
    if args.json:
        json.dump(resolution.to_json(), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        from envbuild.report import render

        print(render(resolution, colour=_colour_wanted(sys.stdout)))
    return 0 if resolution.ok else 1


def _colour_wanted(stream) -> bool:
    """Colour only on a terminal, and never when NO_COLOR is set (https://no-color.org)."""
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    return hasattr(stream, "isatty") and stream.isatty()
