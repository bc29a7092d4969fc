"""The `envbuild` command line.

Each subcommand lives in `envbuild/commands/<name>.py` with `configure(parser)` and
`run(args) -> int`, and its one-line help in `COMMANDS`; only the module of the command
that runs is imported (none for `--help` and `--version`, all of them for a completion
script). Like every module, they import what they use at the top, except the heavy
optional libraries (docs/architecture.md).
"""
from __future__ import annotations

import argparse
import atexit
import errno
import gc
import importlib
import importlib.util
import json
import os
import signal
import sys
import threading

from envbuild import __version__
from envbuild.infra.errors import EnvironmentProblem, LockRefused, Refused, Unresolved, UserError, UserErrors, bounded, clip
from envbuild.infra.urls import mask_text
from envbuild.output import say
from envbuild.output.completion import script
from envbuild.output.jsonout import emit, wanted
from envbuild.output.report import render
from envbuild.output.terminal import for_stream, strip_ansi

# No path (PATH_MAX), URL or name envbuild takes is longer; a longer argument is refused
# before anything reads it.
MAX_ARGUMENT_CHARS = 4096
# Each command and its one-line help, in the order `--help` lists them: the listing, --version
# and a misspelt command need no command module.
COMMANDS = {
    "resolve": "check framework, CUDA, cuDNN, driver, GPU and Python against each other; explain each conflict with "
               "fixes",
    "matrix": "query the compatibility matrices (GPUs, CUDA/driver, frameworks, base images)",
    "lock": "write conda and pip lockfiles for the resolved GPU stack, solved for the target machine",
    "wheelhouse": "download the locked wheels (and conda archives, as a local channel) for offline builds",
    "dockerfile": "render the Dockerfile and build context for the resolved, locked stack",
    "image": "build (or reuse) the image for the resolved, locked stack and push it",
    "export": "write the job definition (k8s, slurm, batch, metaflow, coiled, flyte) that runs an image on a target's "
              "GPUs",
    "verify": "run the GPU probe inside an image and report pass/fail per check (JSON, JUnit)",
    "doctor": "check this host: NVIDIA driver, newest CUDA, GPUs and their architectures, Docker and its GPU runtime",
    "init": "write a commented starter spec (with --host: for this machine's driver and GPUs)",
    "env": "install the spec's environment on this host (venv or conda prefix), hash-checked; a no-op when current",
    "run": "run a command in the spec's environment on this host: envbuild run [SPEC] -- CMD ...",
}
# Commands that run another command: everything after the first `--` is that command's
# (`envbuild run spec.yaml -- python -V`), never parsed as envbuild's own flags.
PASSTHROUGH = ("run",)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line and exit 2, like every other bad input
        raise UserError(message, hint=f"see `{self.prog} --help`")


def build_parser(only: str | None = None, *, listing: bool = False) -> argparse.ArgumentParser:
    """The whole command line, or with `only` the one subcommand that will run: each
    subcommand's options cost about 1 ms to declare, more than `resolve` itself.
    `listing`: every command with its help but without its options, which imports no
    command module: enough for `--help`, `--version` and a misspelt command."""
    parser = _Parser(prog="envbuild", description="GPU environments that work on the GPU they will run on.")
    parser.add_argument("--version", action="version", version=f"envbuild {__version__}")
    parser.add_argument("--completion", choices=("bash", "zsh", "fish"),
                        help="print a shell completion script: eval \"$(envbuild --completion bash)\"")
    add_verbosity_arguments(parser, default=False)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in (only,) if only else COMMANDS:
        if listing:
            if importlib.util.find_spec(f"envbuild.commands.{name}") is not None:  # shipped in this build
                sub.add_parser(name, help=COMMANDS[name], description=COMMANDS[name])
            continue
        try:
            module = importlib.import_module(f"envbuild.commands.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"envbuild.commands.{name}":
                raise
            continue  # command not shipped in this build
        cmd = sub.add_parser(name, help=COMMANDS[name], description=COMMANDS[name])
        module.configure(cmd)
        _verbosity_after(cmd)
        cmd.set_defaults(_run=module.run)
    return parser


def add_verbosity_arguments(parser: argparse.ArgumentParser, *, default) -> None:
    """-q/--quiet and -v/--verbose, taken before or after the subcommand (envbuild/output/say.py)."""
    group = parser.add_argument_group("output")
    group.add_argument("-q", "--quiet", action="store_true", default=default,
                       help="errors and warnings only: no progress, no notes")
    group.add_argument("-v", "--verbose", action="store_true", default=default,
                       help="also the details: the commands envbuild runs (credentials masked), the inputs it read")


def _verbosity_after(parser: argparse.ArgumentParser) -> None:
    """-q/-v after a subcommand (and a `matrix` topic) too; SUPPRESS keeps one given before it."""
    add_verbosity_arguments(parser, default=argparse.SUPPRESS)
    for action in parser._actions:  # argparse keeps subparsers here; there is no public accessor
        if isinstance(action, argparse._SubParsersAction):
            for topic in action.choices.values():
                _verbosity_after(topic)


def main(argv: list[str] | None = None, *, leaving: bool = False) -> int:
    """Run one command; `leaving`: the process exits right after (the console entry)."""
    collecting = gc.isenabled()
    try:
        return _main(sys.argv[1:] if argv is None else list(argv))
    finally:
        # A command may pause the cyclic collector for its work (`resolve --fleet`); a
        # process that exits next never needs it back, and turning it on would first
        # traverse every object the command made.
        if collecting and not leaving:
            gc.enable()


def _main(argv: list[str]) -> int:
    if hasattr(signal, "SIGXFSZ"):  # past `ulimit -f` a write fails with EFBIG instead of killing us
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    # `envbuild [-q|-v] COMMAND ...` parses with that subcommand alone; anything else
    # (help, the version, a misspelt command) with the listing of the commands. The one
    # option of envbuild's own that takes a value is --completion, and no shell is named
    # like a command, so the first word that is not an option names the command.
    command = next((word for word in argv if not word.startswith("-")), None)
    parser = build_parser(command) if command in COMMANDS else build_parser(listing=True)
    passthrough = None
    if "--" in argv:
        before = argv[:argv.index("--")]
        if next((word for word in before if not word.startswith("-")), None) in PASSTHROUGH:
            argv, passthrough = before, argv[argv.index("--") + 1:]
    try:
        _check_lengths(argv)
        args = parser.parse_args(argv)
    except UserError as exc:
        return _fail(exc, json_wanted=_json_flag(argv))
    args.passthrough = passthrough
    if args.quiet and args.verbose:
        return _fail(UserError("-q and -v ask for opposite things", where="-q/-v", hint="give one of them"),
                     json_wanted=_json_flag(argv))
    say.set_level(say.QUIET if args.quiet else say.VERBOSE if args.verbose else say.NORMAL)
    if getattr(args, "completion", None):
        sys.stdout.write(script(args.completion, build_parser()))  # every command's options
        return 0
    if not getattr(args, "_run", None):
        parser.print_help()
        return 2
    try:
        return int(args._run(args) or 0)
    except Refused as exc:
        return _refused(exc, json_wanted=wanted(args))
    except UserError as exc:
        return _fail(exc, json_wanted=wanted(args))
    except BrokenPipeError:
        # A reader that stops early (`envbuild matrix ... | head`) is not an error; keep
        # Python's exit-time flush from raising again on the closed pipe.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as exc:  # the operating system's answer (disk full, read-only, ...): one line, exit 3
        return _fail(os_problem(exc), json_wanted=wanted(args))
    except KeyboardInterrupt:
        print("envbuild: interrupted", file=sys.stderr)
        return 130


def _json_flag(argv: list[str]) -> bool:
    return any(a == "--json" or a.startswith("--json=") for a in argv)


def _check_lengths(argv: list[str]) -> None:
    for i, arg in enumerate(argv):
        if len(arg) > MAX_ARGUMENT_CHARS:
            if arg.startswith("--") and "=" in arg:
                flag = arg.split("=", 1)[0]
            else:
                flag = argv[i - 1] if i and argv[i - 1].startswith("-") else f"argument {i + 1}"
            raise UserError(f"the value is {len(arg)} characters long; envbuild takes at most {MAX_ARGUMENT_CHARS}",
                            where=clip(flag, 40), hint="check the value")


def _fail(exc: UserError, *, json_wanted: bool) -> int:
    """The one-line error on stderr; with --json also one JSON object on stdout, so a CI
    parser never reads an empty stdout (schema: schema/error.schema.json).

    Evidence (a failed build's step and log tail) comes first, the summary line last: the
    one-line rule is for the summary, the evidence keeps its lines."""
    _settle()
    if exc.evidence:
        sys.stderr.write(for_stream(exc.evidence, sys.stderr).rstrip("\n") + "\n")
    for line in exc.lines():  # one mistake a line (a spec's are all reported at once)
        print(f"envbuild: error: {line}", file=sys.stderr)
    if json_wanted:
        print(json.dumps(error_json(exc), indent=2))
    return exc.exit_code


def _refused(exc: Refused, *, json_wanted: bool) -> int:
    """A stage's own report of why it refused: the resolver's conflicts with their fixes,
    or the solver's conflicts one line each; with --json that stage's JSON object."""
    _settle()
    if isinstance(exc, Unresolved):
        print(render(exc.resolution, colour=False), file=sys.stderr)
        if exc.note:
            print(f"envbuild: {mask_text(exc.note)}", file=sys.stderr)
        if json_wanted:  # the resolver's own JSON (schema/resolve.schema.json), verdict "conflict"
            emit(exc.resolution.to_json())
    elif isinstance(exc, LockRefused):  # the same refusal `envbuild lock` gives
        for message in exc.conflicts:
            print(mask_text(f"envbuild: lock conflict: {message}"), file=sys.stderr)
        if not exc.conflicts:
            print(mask_text(f"envbuild: error: the stack could not be locked: {exc.reason}"), file=sys.stderr)
        if json_wanted:
            emit({"verdict": "conflict", "stage": "lock", "spec_hash": exc.spec_hash,
                  "conflicts": [{"message": mask_text(m)} for m in exc.conflicts or (exc.reason,)]})
    else:
        print(f"envbuild: error: {mask_text(str(exc))}", file=sys.stderr)
    return exc.exit_code


def _settle() -> None:
    loop = sys.modules.get("envbuild.lock.loop")
    if loop is not None:  # rattler's worker threads may still be winding down: let them settle
        loop.settle_at_exit()


# errno -> what to do about it
_OS_HINTS = {
    errno.ENOSPC: "free space on that filesystem or write somewhere else",
    errno.EDQUOT: "free space within your quota or write somewhere else",
    errno.EFBIG: "the file-size limit is too small: raise `ulimit -f` or write somewhere else",
    errno.EROFS: "the filesystem is read-only: choose a writable folder",
    errno.EACCES: "you have no permission there: choose a folder you can write to, or fix its permissions",
    errno.EPERM: "the operation is not permitted there: choose another folder",
    errno.ENOENT: "check the path",
    errno.ENOTDIR: "a part of the path is a file, not a folder: check the path",
    errno.EISDIR: "the path is a folder, not a file: check the path",
    errno.EMFILE: "too many open files: raise `ulimit -n`",
    errno.EIO: "the disk reported an I/O error: check the device",
}


def os_problem(exc: OSError) -> EnvironmentProblem:
    """An OSError as one line naming the path and what to do (exit 3)."""
    where = exc.filename if exc.filename is not None else None
    if exc.filename2 is not None:
        where = f"{exc.filename} -> {exc.filename2}"
    what = exc.strerror or str(exc) or type(exc).__name__
    return EnvironmentProblem(what, where=None if where is None else str(where),
                              hint=_OS_HINTS.get(exc.errno, "check the path and try again"))


def error_json(exc: UserError) -> dict:
    kind = {2: "bad_input", 3: "environment"}.get(exc.exit_code, "failed")  # failed: a build/push/verify, exit 1

    def masked(text):  # as the line shows it: credentials masked, over-long values clipped
        return None if text is None else bounded(mask_text(text))

    evidence = mask_text(strip_ansi(exc.evidence)) if exc.evidence else None  # a log tail: its lines are kept
    error = {"kind": kind, "exit_code": exc.exit_code, "line": exc.line(), "message": masked(exc.message),
             "where": masked(exc.where), "hint": masked(exc.hint), "evidence": evidence}
    if isinstance(exc, UserErrors):  # every mistake; the fields above are the first one's
        error["errors"] = [{"line": e.line(), "message": masked(e.message), "where": masked(e.where),
                            "hint": masked(e.hint)} for e in exc.errors]
    return {"verdict": "error", "error": error}


def run() -> None:
    """The console entry point: `main`, then a quick exit (see `leave`)."""
    leave(main(leaving=True))


def leave(code: int) -> None:
    """Exit with `code` without tearing the interpreter down object by object.

    Finalization frees every object one at a time and collects cycles: 35 ms after one
    `resolve`, 150 ms after a 100-target fleet, time spent on nothing the user sees. The
    standard streams are flushed and the atexit handlers (the solver's settle,
    temporary folders) run first, as a normal exit would. The normal exit is
    kept while another non-daemon thread runs (it waits for it) and under a profiler or
    tracer (`python -m cProfile`, coverage), which write their results after `main`."""
    if sys.getprofile() or sys.gettrace() or any(
            t is not threading.current_thread() and not t.daemon for t in threading.enumerate()):
        sys.exit(code)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe or stream: nothing more can be said there
            pass
    atexit._run_exitfuncs()
    os._exit(code if 0 <= code <= 255 else 1)


if __name__ == "__main__":
    run()
