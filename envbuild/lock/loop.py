"""One asyncio event loop per process for all of rattler's coroutines, and a grace period
at exit after a solver failure.

py-rattler 0.28 runs its solver on tokio worker threads. After a solve that ended in
SolverError, a process that exits at once sometimes crashes in interpreter finalization
(segfault with no Python frame, seen in roughly 1 in 10 runs here); letting the workers
settle for a moment before finalization avoided it in every trial. Reusing one loop also
avoids the crash seen after several `asyncio.run` calls.
"""
from __future__ import annotations

import atexit
import os
import time
from typing import TYPE_CHECKING, Awaitable, TypeVar

if TYPE_CHECKING:
    import asyncio

T = TypeVar("T")
_loop: asyncio.AbstractEventLoop | None = None
_settle_registered = False
SETTLE_MIN_S = 0.2
SETTLE_MAX_S = 1.0


def run(awaitable: Awaitable[T]) -> T:
    global _loop
    if _loop is None or _loop.is_closed():
        import asyncio  # here, not at import: with ssl and sockets it costs more than the rest of `lock`'s modules

        _loop = asyncio.new_event_loop()
    return _loop.run_until_complete(awaitable)


def settle_at_exit() -> None:
    """Call after a rattler SolverError: at exit, wait until rattler's worker threads are idle."""
    global _settle_registered
    if not _settle_registered:
        atexit.register(_settle)
        _settle_registered = True


def _busy_workers() -> int:
    """Runtime worker threads of this process that are running (Linux /proc; 0 elsewhere)."""
    busy = 0
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return 0
    for tid in tasks:
        try:
            with open(f"/proc/self/task/{tid}/stat", encoding="ascii", errors="replace") as handle:
                stat = handle.read()
        except OSError:
            continue
        name = stat[stat.find("(") + 1:stat.rfind(")")]
        state = stat[stat.rfind(")") + 2:stat.rfind(")") + 3]
        if name.startswith("tokio") and state not in ("S", "I"):
            busy += 1
    return busy


def settle() -> None:
    """Wait until rattler's worker threads are idle: after an install that raised, its other
    tasks may still be writing into the prefix for a moment."""
    _settle()


def _settle() -> None:
    time.sleep(SETTLE_MIN_S)
    deadline = time.monotonic() + SETTLE_MAX_S
    while _busy_workers() and time.monotonic() < deadline:
        time.sleep(0.01)
