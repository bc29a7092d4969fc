"""One progress view for several builds at once (`envbuild image --fleet --jobs N`).

Each build reports through its own `Lane`, a `Progress` whose lines carry the build's
label (`[image 2] [3/12] ...`) and are written through the shared view one at a time, so
lines of two builds never mix. Transfers report as plain lines (at most one every
PLAIN_EVERY seconds per task), since bars of several builds redrawn in place would fight
over the same terminal lines. On a terminal the view keeps one status line at the bottom
(`images: 1 done, 1 building, 0 waiting`), rewritten in place; a build's own log lines
are shown only when piped (in CI), where they are printed with the label.
"""
from __future__ import annotations

import sys
import threading
import time

from envbuild.output.progress import Progress
from envbuild.output.terminal import is_terminal, strip_ansi


class SharedProgress:
    def __init__(self, stream=None, *, terminal: bool | None = None, quiet: bool = False):
        self.stream = stream or sys.stderr
        self.terminal = is_terminal(self.stream) if terminal is None else terminal
        self.quiet = quiet
        self.start = time.monotonic()
        self._lock = threading.Lock()
        self._status = ""

    def lane(self, label: str) -> "Lane":
        return Lane(self, label)

    def line(self, text: str) -> None:
        if not self.quiet:
            self._emit(text)

    def status(self, text: str, *, milestone: bool = True) -> None:
        """The line kept at the bottom of a terminal; plain streams get it as a line when
        it marks a milestone (an image done), not for every start."""
        if self.quiet:
            return
        if not self.terminal:
            if not milestone:
                return
            self._emit(text)
            return
        with self._lock:
            self._status = text
            self.stream.write("\r\033[K" + text[:150])
            self.stream.flush()

    def close(self) -> None:
        with self._lock:
            if self.terminal and self._status:
                self.stream.write("\r\033[K")
                self.stream.flush()
            self._status = ""

    def _emit(self, text: str) -> None:
        with self._lock:
            if self.terminal and self._status:
                self.stream.write("\r\033[K")
            self.stream.write(text + "\n")
            if self.terminal and self._status:
                self.stream.write(self._status[:150])
            self.stream.flush()


class Lane(Progress):
    """A build's progress inside a SharedProgress: plain mode, every line labelled."""

    def __init__(self, shared: SharedProgress, label: str):
        super().__init__(shared.stream, terminal=False, quiet=shared.quiet)
        self.shared, self.label = shared, label
        self.start = shared.start

    def _write(self, text: str) -> None:
        self.shared._emit(f"[{self.label}] {text}")

    def log(self, text: str) -> None:
        if not self.quiet and not self.shared.terminal:  # a log line of one of several builds: CI logs only

            self._write(f"    | {strip_ansi(text)}")

    def done(self) -> None:
        pass  # nothing is drawn in place by a lane
