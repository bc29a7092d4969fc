"""Progress for the steps that take a while (base pull, build context, build steps,
push per layer, verification).

Three modes, chosen once per command:
  live   on a terminal: `rich` bars with bytes and rate, redrawn in place
         (rich is imported only when a bar is first shown, so fast commands never load it)
  plain  piped or in CI: milestone lines, and for a running task one line at most every
         PLAIN_EVERY seconds; a task that ends within that time prints only its last line
  quiet  (-q): nothing
Build log lines are shown in place on a terminal and printed as they come when piped.
A status line (`status`: "verify: 1/2 done (...)", polled every second) is redrawn in
place on a terminal; piped, it is printed at most every PLAIN_EVERY seconds, and the
last one once more when the step ends (`done`), so a CI log shows the outcome.
A step that prints nothing for a while (a `COPY --from` of a large prefix, an installer
downloading) is followed with `follow`, which says how long it has been running.

A byte count never exceeds its total: where the engine's total is an estimate that the
bytes overrun, the total grows with them. Docker's push is such a case: its `current`
counts the bytes of the layer's tar stream (file contents plus a 512-byte header and
padding per file), its `total` only the files' contents, so a layer of many small files
"pushes" more bytes than its total.
"""
from __future__ import annotations

import queue
import sys
import threading
import time
from typing import Callable, Iterable, Iterator, TypeVar

from envbuild.output import say
from envbuild.output.terminal import is_terminal, strip_ansi

PLAIN_EVERY = 10.0  # seconds between two plain lines about the same running task
SLOW = 2.0  # a task that ends sooner gets no "done" line of its own in plain mode
TICK = 1.0  # seconds between two redraws of a silent step's elapsed time on a terminal
T = TypeVar("T")


def human_bytes(n: float | None) -> str:
    if n is None:
        return "?"
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"


class Task:
    """One step with a size (bytes, when known) that advances."""

    def __init__(self, progress: "Progress", label: str, total: float | None, unit: str):
        self.progress, self.label, self.total, self.unit = progress, label, total, unit
        self.completed = 0.0
        self.started = self._last_line = time.monotonic()
        self._bar = None

    def _amount(self) -> str:
        if self.unit == "bytes":
            done = human_bytes(self.completed)
            rate = self.completed / max(time.monotonic() - self.started, 1e-6)
            of = f" of {human_bytes(self.total)}" if self.total else ""
            return f"{done}{of}, {human_bytes(rate)}/s"
        of = f"/{self.total:.0f}" if self.total else ""
        return f"{self.completed:.0f}{of} {self.unit}"

    def update(self, completed: float | None = None, *, total: float | None = None, advance: float = 0) -> None:
        if total is not None:
            self.total = total
        self.completed = completed if completed is not None else self.completed + advance
        if self.total is not None and self.completed > self.total:
            self.total = self.completed  # an estimate the bytes overran (see the module's docstring)
        self.progress._task_moved(self)

    def done(self, note: str = "") -> None:
        self.progress._task_done(self, note)


class Progress:
    def __init__(self, stream=None, *, terminal: bool | None = None, quiet: bool | None = None):
        """`quiet`: None follows -q (envbuild/output/say.py)."""
        self.stream = stream or sys.stderr
        self.terminal = is_terminal(self.stream) if terminal is None else terminal
        self.quiet = say.quiet() if quiet is None else quiet
        self.start = time.monotonic()
        self._transient = False
        self._live = None  # the rich Progress while bars are shown
        self._status: str | None = None  # the last status line not yet printed (plain mode)
        self._status_at = float("-inf")  # when a status line was last printed (plain mode)
        self._status_drawn = False  # the text drawn in place is a status line (terminal mode)

    @property
    def mode(self) -> str:
        return "quiet" if self.quiet else "live" if self.terminal else "plain"

    def elapsed(self) -> str:
        return f"{time.monotonic() - self.start:6.1f}s"

    # --- lines ------------------------------------------------------------------------------
    def _write(self, text: str) -> None:
        if self._live is not None:
            self._live.console.print(text, markup=False, highlight=False, soft_wrap=True)
            return
        self._keep_status()
        self._clear()
        self.stream.write(text + "\n")
        self.stream.flush()

    def _keep_status(self) -> None:
        """A status line drawn in place stays when a line follows it: the state it had then."""
        if self._transient and self._status_drawn:
            self.stream.write("\n")
            self._transient = self._status_drawn = False

    def _clear(self) -> None:
        if self._transient:
            self.stream.write("\r\033[K")
            self._transient = self._status_drawn = False

    def line(self, text: str) -> None:
        """A milestone: always shown (except with -q)."""
        if not self.quiet:
            self._write(text)

    def log(self, text: str) -> None:
        """A line of a build step's own output."""
        if self.quiet:
            return
        if self.terminal and self._live is None:
            self._clear()
            self.stream.write(("    " + text)[:120])
            self._transient = True
            self.stream.flush()
        elif not self.terminal:  # piped: the build's own colour codes are dropped
            self.stream.write(f"    | {strip_ansi(text)}\n")
            self.stream.flush()

    def status(self, text: str) -> None:
        """The running state of a step, given as often as it is polled."""
        if self.quiet:
            return
        if self.terminal and self._live is None:
            self._clear()
            self.stream.write(text[:150])
            self._transient = self._status_drawn = True
            self.stream.flush()
            return
        now = time.monotonic()
        if now - self._status_at >= PLAIN_EVERY:
            self._status_at, self._status = now, None
            self._write(text)
        else:
            self._status = text  # printed by `done` if nothing newer is

    def follow(self, items: Iterable[T], label: "str | Callable[[], str]") -> Iterator[T]:
        """Yield `items` (a blocking stream: a build's output, a process's lines) as they
        come. While it is silent, say how long the step named by `label` (a text, or a
        function giving the current one) has run without a word: on a terminal in place,
        once a second; piped, one line every PLAIN_EVERY seconds."""
        found: queue.Queue = queue.Queue()

        def pump() -> None:  # the stream blocks; it is read on a thread, written out here
            try:
                for item in items:
                    found.put((True, item))
            except BaseException as exc:  # noqa: BLE001 - handed to the reader, which raises it
                found.put((False, exc))
            else:
                found.put((False, None))

        threading.Thread(target=pump, name="envbuild-follow", daemon=True).start()
        quiet_since = last_line = time.monotonic()
        while True:
            try:
                more, item = found.get(timeout=TICK)
            except queue.Empty:
                now = time.monotonic()
                name = label() if callable(label) else label
                if self.mode == "live" and self._live is None:
                    self._clear()
                    self.stream.write(f"    {name}: {now - quiet_since:.0f} s without output"[:120])
                    self._transient = True
                    self.stream.flush()
                elif self.mode == "plain" and now - last_line >= PLAIN_EVERY:
                    last_line = now
                    self._write(f"  {self.elapsed()}  {name}: running, {now - quiet_since:.0f} s without output")
                continue
            if not more:
                if item is not None:
                    raise item
                return
            quiet_since = last_line = time.monotonic()
            yield item

    def done(self) -> None:
        """Between steps: clear what is drawn in place; piped, the last status line."""
        self._stop_live()
        self._keep_status()
        self._clear()
        if self._status is not None:
            self._write(self._status)
            self._status = None
        self.stream.flush()

    # --- tasks ------------------------------------------------------------------------------
    def task(self, label: str, total: float | None = None, unit: str = "bytes") -> Task:
        task = Task(self, label, total, unit)
        if self.mode == "live":
            live = self._live or self._start_live()
            task._bar = live.add_task(label, total=total, completed=0, amount="")
        return task

    def _start_live(self):
        from rich.console import Console
        from rich.progress import BarColumn, Progress as Bars, TextColumn, TimeElapsedColumn

        self._clear()
        console = Console(file=self.stream, force_terminal=True, highlight=False)
        # the amount column is the same text as the plain lines: bytes and rate, or a count
        self._live = Bars(TextColumn("  {task.description}"), BarColumn(), TextColumn("{task.fields[amount]}"),
                          TimeElapsedColumn(), console=console, transient=True)
        self._live.start()
        return self._live

    def _stop_live(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None

    def _task_moved(self, task: Task) -> None:
        if self.mode == "live" and task._bar is not None and self._live is not None:
            self._live.update(task._bar, completed=task.completed, total=task.total, amount=task._amount())
        elif self.mode == "plain":
            now = time.monotonic()
            if now - task._last_line >= PLAIN_EVERY:
                task._last_line = now
                self._write(f"  {self.elapsed()}  {task.label}: {task._amount()}")

    def _task_done(self, task: Task, note: str) -> None:
        took = time.monotonic() - task.started
        if self.mode == "live" and task._bar is not None and self._live is not None:
            self._live.remove_task(task._bar)
            if not self._live.tasks:
                self._stop_live()
        if self.mode != "quiet" and (took >= SLOW or note):
            self._write(f"  {self.elapsed()}  {task.label}: {note or 'done'} ({task._amount()}, {took:.1f}s)")
