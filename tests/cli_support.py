"""The command line run in the test process: `envbuild.cli.main`, the function the console
script calls, with the working folder, stdin, stdout and stderr of one run.

A spawned `python -m envbuild` costs half a second of start-up before it does anything;
this costs nothing beyond the command itself. Use it where a test reads what a command
says and returns; keep a real process where the process is the point (exit status of the
interpreter, signals, buffering through pipes and terminals, start-up, environment)."""
from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from pathlib import Path

from envbuild.cli import main


def in_process(*args, cwd: Path | str | None = None, stdin: str | None = None,
               env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run `envbuild ARGS` here; the answer has the shape `subprocess.run` gives. `env`,
    as for `subprocess.run`, is the whole environment of the run."""
    argv = [str(a) for a in args]
    out, err = io.StringIO(), io.StringIO()
    reader = io.TextIOWrapper(io.BytesIO((stdin or "").encode()), encoding="utf-8")
    with contextlib.ExitStack() as stack:
        stack.enter_context(contextlib.redirect_stdout(out))
        stack.enter_context(contextlib.redirect_stderr(err))
        stack.enter_context(contextlib.chdir(cwd or Path.cwd()))
        saved_stdin, sys.stdin = sys.stdin, reader
        stack.callback(setattr, sys, "stdin", saved_stdin)
        if env is not None:
            stack.enter_context(_environment(env))
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse's --help and --version leave through sys.exit
            code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
    return subprocess.CompletedProcess(["envbuild", *argv], code, out.getvalue(), err.getvalue())


@contextlib.contextmanager
def _environment(env: dict[str, str]):
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)
