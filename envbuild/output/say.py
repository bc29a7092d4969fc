"""What envbuild says on stderr beside its answer, at the verbosity the user chose.

    -q / --quiet     errors and warnings only: no progress, no notes
    (default)        progress, notes ("using spec ./envbuild.yaml") and warnings
    -v / --verbose   also the details: the commands envbuild runs, which inputs came
                     from the environment, which lock folder is used

The command line sets the level once, before a command runs (`set_level`); everything
else reads it through `note`, `detail`, `command` and `quiet`. Every line is masked
(`envbuild.infra.urls.mask_text`): credentials in URLs never reach the terminal or a CI log.
"""
from __future__ import annotations

import shlex
import sys

from envbuild.infra.urls import mask_text

QUIET, NORMAL, VERBOSE = 0, 1, 2
_level = [NORMAL]  # the one setting, made by envbuild.cli from -q/-v


def set_level(level: int) -> None:
    _level[0] = level


def quiet() -> bool:
    return _level[0] <= QUIET


def verbose() -> bool:
    return _level[0] >= VERBOSE


def note(text: str) -> None:
    """A line the user should see (what envbuild chose for them); silent with -q."""
    if _level[0] >= NORMAL:
        _write(f"envbuild: {text}")


def warning(text: str) -> None:
    """Something that may be wrong: shown even with -q."""
    _write(f"envbuild: warning: {text}")


def detail(text: str) -> None:
    """A line only -v shows."""
    if _level[0] >= VERBOSE:
        _write(f"envbuild: {text}")


def command(argv: list[str], *, where: str | None = None) -> None:
    """With -v: the command about to run, as a shell would take it (credentials masked)."""
    if _level[0] >= VERBOSE:
        _write(f"envbuild: running{' in ' + where if where else ''}: {shlex.join(str(a) for a in argv)}")


def _write(text: str) -> None:
    try:
        sys.stderr.write(mask_text(text) + "\n")
        sys.stderr.flush()
    except (BrokenPipeError, ValueError):  # a closed stderr: nothing more can be said there
        pass
