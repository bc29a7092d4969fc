"""`docker build` through the SDK's low-level API with the classic builder.

Progress: each step with its number and the elapsed time; on a terminal the step's
latest log line is shown in place, in CI (no TTY) the log lines are printed as they come.
The image is built untagged; the caller tags it only after it built (and verified), so a
failure never moves a tag.
"""
from __future__ import annotations

import re
import sys
import time
from collections import deque
from pathlib import Path

from envbuild.errors import UserError

STEP = re.compile(r"^Step (\d+)/(\d+) : (.*)$", re.S)
ANSI = re.compile(r"\x1b\[[0-9;]*m")  # the classic builder colours a step's stderr red
TAIL_LINES = 15


class BuildFailed(UserError):
    """A build step failed: which one, its command, the end of its log. Exit code 1."""

    exit_code = 1


class Progress:
    def __init__(self, stream=None, *, terminal: bool | None = None):
        self.stream = stream or sys.stderr
        self.terminal = self.stream.isatty() if terminal is None else terminal
        self.start = time.monotonic()
        self._transient = False

    def elapsed(self) -> str:
        return f"{time.monotonic() - self.start:6.1f}s"

    def _clear(self) -> None:
        if self._transient:
            self.stream.write("\r\033[K")
            self._transient = False

    def line(self, text: str) -> None:
        self._clear()
        self.stream.write(text + "\n")
        self.stream.flush()

    def log(self, text: str) -> None:
        if self.terminal:
            self._clear()
            self.stream.write(("    " + text)[:120])
            self._transient = True
        else:
            self.stream.write(f"    | {text}\n")
        self.stream.flush()

    def done(self) -> None:
        self._clear()
        self.stream.flush()


def build(client, context: Path, *, platform: str | None = None, progress: Progress | None = None,
          labels: dict[str, str] | None = None) -> str:
    """Build `context` (which holds its Dockerfile); return the image ID."""
    import docker

    progress = progress or Progress()
    step, total, command = 0, 0, ""
    tail: deque[str] = deque(maxlen=TAIL_LINES)
    image_id = None
    try:
        stream = client.api.build(path=str(context), rm=True, forcerm=True, decode=True,
                                  platform=_docker_platform(platform), labels=labels)
        for item in stream:
            if "error" in item:
                progress.done()
                detail = (item.get("errorDetail") or {}).get("message") or item["error"]
                raise _failure(step, total, command, list(tail), detail)
            if "aux" in item and isinstance(item["aux"], dict) and item["aux"].get("ID"):
                image_id = item["aux"]["ID"]
            text = item.get("stream")
            if not text:
                continue
            for raw in text.splitlines():
                line = ANSI.sub("", raw).rstrip()
                match = STEP.match(line)
                if match:
                    step, total, command = int(match[1]), int(match[2]), match[3]
                    tail.clear()
                    progress.line(f"[{step}/{total}] {progress.elapsed()}  {_short(command)}")
                elif line.startswith("Successfully built "):
                    image_id = image_id or line.split()[-1]
                elif line.strip() and not line.startswith(" ---> ") and not line.startswith("Removing intermediate"):
                    tail.append(line)
                    progress.log(line)
    except docker.errors.APIError as exc:
        progress.done()
        raise _failure(step, total, command, list(tail), exc.explanation or str(exc)) from None
    progress.done()
    if not image_id:
        raise _failure(step, total, command, list(tail), "the engine reported no image")
    return image_id


def _short(command: str, width: int = 100) -> str:
    command = " ".join(command.split())
    return command if len(command) <= width else command[: width - 3] + "..."


OWN_ERROR = "envbuild: error: "  # how the Dockerfile's own checks explain a failed step


def _failure(step: int, total: int, command: str, tail: list[str], detail: str) -> BuildFailed:
    where = f"build step {step}/{total}" if step else "build"
    own = next((line for line in reversed(tail) if line.startswith(OWN_ERROR)), None)
    if own is not None:  # one of the Dockerfile's checks said what is wrong: that line is the error
        return BuildFailed(f"{where} failed: {own[len(OWN_ERROR):]}", hint="no tag was changed")
    lines = "\n".join(f"    {line}" for line in tail[-TAIL_LINES:]) or "    (no output)"
    return BuildFailed(f"{where} failed: {detail.strip()}\n  command: {_short(command, 300)}\n  last lines of its log:\n{lines}",
                       hint="no tag was changed")


def _docker_platform(platform: str | None) -> str | None:
    """conda platform names to Docker's (`linux-64` -> `linux/amd64`)."""
    names = {"linux-64": "linux/amd64", "linux-aarch64": "linux/arm64"}
    return names.get(platform, platform) if platform else None
