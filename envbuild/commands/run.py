"""`envbuild run [SPEC] [--prefix DIR] -- CMD [ARG ...]`: run a command in the spec's
environment on this host. The environment is made current first, as `envbuild env` does
(nothing to do, in well under a second, when it is); then envbuild replaces itself with
CMD, so CMD's exit code, signals and terminal are the caller's.

CMD runs with the environment activated and the spec's `env` variables set (as the image
sets them): a venv's `bin` first on PATH and VIRTUAL_ENV set;
a conda prefix's `bin` first on PATH, CONDA_PREFIX set, and the activation scripts its
packages ship (`etc/conda/activate.d/*.sh`) sourced by bash before CMD, as conda does.
"""
from __future__ import annotations

import atexit
import os
import sys
from pathlib import Path

from envbuild.commands.env import add_env_arguments, make_env
from envbuild.infra.errors import UserError

# Sources a conda prefix's activation scripts, then becomes the command. The prefix comes in
# CONDA_PREFIX and the command as arguments: no value is ever part of the script.
CONDA_ACTIVATE = ('for script in "$CONDA_PREFIX"/etc/conda/activate.d/*.sh; do '
                  '[ -f "$script" ] && . "$script"; done; exec "$@"')


def configure(parser) -> None:
    add_env_arguments(parser)
    parser.usage = "envbuild run [SPEC.yaml] [spec flags] [--prefix DIR] [-q] -- CMD [ARG ...]"


def run(args) -> int:
    command = list(getattr(args, "passthrough", None) or [])
    if not command:
        raise UserError("no command to run", where="envbuild run",
                        hint="put it after `--`: envbuild run [SPEC] -- python -c 'import cupy'")
    result = make_env(args, warn_when_current=False)
    env, argv = activated(result.prefix, result.record.get("installer"), command, dict(result.request.spec.env))
    sys.stdout.flush()
    sys.stderr.flush()
    _before_exec()
    try:
        os.execvpe(argv[0], argv, env)
    except FileNotFoundError:
        print(f"envbuild: error: {command[0]}: command not found in the environment {result.prefix} or on PATH",
              file=sys.stderr)
        return 127
    except PermissionError:
        print(f"envbuild: error: {command[0]}: permission denied", file=sys.stderr)
        return 126
    except OSError as exc:
        print(f"envbuild: error: {command[0]}: {exc.strerror or exc}", file=sys.stderr)
        return 126
    raise AssertionError("exec returned")


def activated(prefix, installer: str | None, command: list[str],
              variables: "dict[str, str] | None" = None) -> tuple[dict[str, str], list[str]]:
    """The environment and argv that run `command` in the environment at `prefix`, with
    the spec's `env` variables (as the image sets them)."""
    prefix = Path(os.path.abspath(prefix))
    env = {**os.environ, **(variables or {})}
    env["PATH"] = os.pathsep.join([str(prefix / "bin")] + [p for p in env.get("PATH", "").split(os.pathsep) if p])
    env.pop("PYTHONHOME", None)
    if installer == "conda":
        env.pop("VIRTUAL_ENV", None)
        env.update(CONDA_PREFIX=str(prefix), CONDA_DEFAULT_ENV=str(prefix), CONDA_SHLVL="1")
        if any((prefix / "etc" / "conda" / "activate.d").glob("*.sh")):
            return env, ["bash", "-c", CONDA_ACTIVATE, "envbuild-run", *command]
        return env, command
    env["VIRTUAL_ENV"] = str(prefix)
    env.pop("CONDA_PREFIX", None)
    return env, command


def _before_exec() -> None:
    """What a normal exit would do first: the exit handlers (caches, the solver's settle)."""
    atexit._run_exitfuncs()
