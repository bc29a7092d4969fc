"""`envbuild resolve`: check a requested GPU stack against the matrices and complete it.

Exit 0 when no check fails (verdict ok, or unverified: some link could not be checked),
1 when there is a conflict or, under --strict, an unverified verdict, 2 for bad input.
"""
from __future__ import annotations

import gc
import json
import os
import sys

from envbuild import html
from envbuild.commands._spec import spec_from_args
from envbuild.fleet import load_fleet
from envbuild.fleet.resolve import render_text, resolve_fleet, to_json
from envbuild.html import resolve_page
from envbuild.image.facts import read
from envbuild.infra.errors import UserError
from envbuild.infra.urls import mask_text
from envbuild.output.report import render
from envbuild.resolver import resolve
from envbuild.spec.cli_args import add_judged_for_argument, add_spec_arguments


def configure(parser) -> None:
    add_spec_arguments(parser)
    add_judged_for_argument(parser)
    parser.add_argument("--json", action="store_true", help="print the resolution as JSON (schema in the README)")
    parser.add_argument("--fleet", metavar="FLEET.yaml", help="resolve against every target of a fleet file (docs/fleets.md)")
    parser.add_argument("--target", action="append", default=[], metavar="NAME", help="with --fleet: only these targets (repeatable)")
    parser.add_argument("--html", metavar="FILE", help="also write the answer as a self-contained HTML page (with --fleet: "
                        "a target x link grid)")


def run(args) -> int:
    spec = spec_from_args(args)  # bad input ends here, before the matrices are read
    if args.html:
        html.check_target(args.html, inputs=(spec.source, args.fleet))
    if getattr(args, "fleet", None) or getattr(args, "target", None):
        return _run_fleet(spec, args)
    resolution = resolve(spec, read_base=read)
    data = resolution.to_json() if args.json or args.html else None
    if args.html:
        html.write(args.html, resolve_page.render(data, source=spec.source or "command line"))
    if args.json:
        text = json.dumps(data, indent=2)
    else:
        text = render(resolution, colour=_colour_wanted(sys.stdout))
    _write(mask_text(text) + "\n")  # a channel URL's credentials are never shown
    return resolution.exit_code


def _run_fleet(spec, args) -> int:
    if not args.fleet:
        raise UserError("--target needs --fleet", where="--target", hint="pass --fleet FLEET.yaml")
    # A fleet's resolves make a few hundred thousand objects that live until the answer is
    # written; the cyclic collector would traverse them and free nothing (`cli.main` turns
    # it back on, unless the process exits next).
    gc.disable()
    targets = load_fleet(args.fleet).select(args.target)
    # the text report shows no joint fixes; the JSON and the page do
    result = resolve_fleet(spec, targets, joint_fixes=bool(args.json or args.html), read_base=read)
    data = to_json(result) if args.json or args.html else None
    if args.html:
        html.write(args.html, resolve_page.render_fleet(data, source=spec.source or "command line", fleet=args.fleet))
    if args.json:
        text = json.dumps(data, indent=2)
    else:
        text = render_text(result)
    _write(text + "\n")
    return 0 if result.ok else 1


def _write(text: str) -> None:
    """Write the answer; a reader that stops early (`| head`) is not an error."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        # keep Python's exit-time flush from raising again on the closed pipe
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def _colour_wanted(stream) -> bool:
    """Colour only on a terminal, and never when NO_COLOR is set (https://no-color.org)."""
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    return hasattr(stream, "isatty") and stream.isatty()
