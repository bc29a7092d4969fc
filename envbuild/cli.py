"""The `envbuild` command line.

Each subcommand lives in `envbuild/commands/<name>.py` with `HELP`, `configure(parser)`
and `run(args) -> int`. Those modules import only the standard library at module
level; heavy libraries (docker, rattler, conda-lock, cupy) are imported inside `run`
so that `envbuild resolve` starts fast.
"""
from __future__ import annotations

import argparse
import importlib
import sys

from envbuild import __version__
from envbuild.errors import UserError

COMMANDS = ("resolve", "matrix", "lock", "dockerfile", "image", "export", "verify", "doctor")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line and exit 2, like every other bad input
        raise UserError(message, hint=f"see `{self.prog} --help`")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="envbuild", description="GPU environments that work on the GPU they will run on.")
    parser.add_argument("--version", action="version", version=f"envbuild {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in COMMANDS:
        try:
            module = importlib.import_module(f"envbuild.commands.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"envbuild.commands.{name}":
                raise
            continue  # command not shipped in this build
        cmd = sub.add_parser(name, help=module.HELP, description=module.HELP)
        module.configure(cmd)
        cmd.set_defaults(_run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except UserError as exc:
        return _fail(exc, json_wanted="--json" in argv)
    if not getattr(args, "_run", None):
        parser.print_help()
        return 2
    try:
        return int(args._run(args) or 0)
    except UserError as exc:
        return _fail(exc, json_wanted=getattr(args, "json", None) is True)
    except KeyboardInterrupt:
        print("envbuild: interrupted", file=sys.stderr)
        return 130


def _fail(exc: UserError, *, json_wanted: bool) -> int:
    """The one-line error on stderr; with --json also one JSON object on stdout, so a CI
    parser never reads an empty stdout (schema: schema/error.schema.json)."""
    print(f"envbuild: error: {exc.line()}", file=sys.stderr)
    if json_wanted:
        import json

        print(json.dumps(error_json(exc), indent=2))
    return exc.exit_code


def error_json(exc: UserError) -> dict:
    kind = "environment" if exc.exit_code == 3 else "bad_input"
    return {"verdict": "error",
            "error": {"kind": kind, "exit_code": exc.exit_code, "line": exc.line(), "message": exc.message,
                      "where": exc.where, "hint": exc.hint}}


if __name__ == "__main__":
    sys.exit(main())
