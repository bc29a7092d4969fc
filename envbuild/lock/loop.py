"""One asyncio event loop per process for all of rattler's coroutines.

py-rattler's Python objects outlive the loop that created them; a process that ran
several `asyncio.run` calls (each creating and closing a loop) was seen to crash at exit
after solver errors. Reusing one loop avoids that and costs nothing.
"""
from __future__ import annotations

import asyncio
from typing import Awaitable, TypeVar

T = TypeVar("T")
_loop: asyncio.AbstractEventLoop | None = None


def run(awaitable: Awaitable[T]) -> T:
    global _loop
    if _loop is None or _loop.is_closed():
        _loop = asyncio.new_event_loop()
    return _loop.run_until_complete(awaitable)
