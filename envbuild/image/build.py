"""`docker build` through the SDK's low-level API with the classic builder.

Progress: each step with its number and the elapsed time; on a terminal the step's
latest log line is shown in place, in CI (no TTY) the log lines are printed as they come.
A step that prints nothing (the `COPY --from` of the environment prefix, which for a
multi-GB prefix takes minutes) is followed by how long it has run (`Progress.follow`),
with the size of the prefix it copies as the installer reported it.
The image is built untagged; the caller tags it only after it built (and verified), so a
failure never moves a tag.
"""
from __future__ import annotations

import re
import tarfile
import tempfile
from collections import deque
from pathlib import Path

from envbuild.infra.errors import UserError
from envbuild.output.progress import Progress, human_bytes  # Progress: `envbuild.image.build.Progress` stays importable

STEP = re.compile(r"^Step (\d+)/(\d+) : (.*)$", re.S)
# the in-image installer's last line: how many bytes the final stage's COPY --from will copy
# (a pip environment's layer stages say it of their layer)
READY = re.compile(r"^envbuild-install: (?:environment|layer) ready in \S+ \((\d+) bytes\)")
STAGE = re.compile(r"^FROM \S+ AS (\S+)$", re.I)
FROM_STAGE = re.compile(r"--from=(\S+)")
ANSI = re.compile(r"\x1b\[[0-9;]*m")  # the classic builder colours a step's stderr red
TAIL_LINES = 15


class BuildFailed(UserError):
    """A build step failed: which one, its command, the end of its log. Exit code 1."""

    exit_code = 1


def build(client, context: Path, *, platform: str | None = None, progress: Progress | None = None,
          labels: dict[str, str] | None = None) -> str:
    """Build `context` (which holds its Dockerfile); return the image ID."""
    import docker

    progress = progress or Progress()
    step, total, command = 0, 0, ""
    tail: deque[str] = deque(maxlen=TAIL_LINES)
    image_id = None
    stage = None  # the build stage the steps are in, by its name
    copy_bytes = {}  # stage -> what its installer said the final stage will copy from it
    archive, size = _context_archive(context, progress)
    try:
        upload = _Upload(archive, size, progress.task("sending the build context", total=size))
        stream = client.api.build(fileobj=upload, custom_context=True, rm=True, forcerm=True, decode=True,
                                  platform=_docker_platform(platform), labels=labels)
        def running() -> str:  # what a silent step is called while it runs
            source = FROM_STAGE.search(command)
            size = copy_bytes.get(source[1]) if source else None
            copying = f" ({human_bytes(size)} to copy)" if size else ""
            return f"[{step}/{total}] {_short(command, 60)}{copying}"

        for item in progress.follow(stream, running):
            upload.finish()
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
                    named = STAGE.match(command)
                    stage = named[1] if named else (None if command.upper().startswith("FROM ") else stage)
                    tail.clear()
                    progress.line(f"[{step}/{total}] {progress.elapsed()}  {_short(command)}")
                elif line.startswith("Successfully built "):
                    image_id = image_id or line.split()[-1]
                elif READY.match(line):
                    copy_bytes[stage] = int(READY.match(line)[1])
                    tail.append(line)
                    progress.log(line)
                elif line.strip() and not line.startswith(" ---> ") and not line.startswith("Removing intermediate"):
                    tail.append(line)
                    progress.log(line)
    except docker.errors.APIError as exc:
        progress.done()
        raise _failure(step, total, command, list(tail), exc.explanation or str(exc)) from None
    finally:
        archive.close()
    progress.done()
    if not image_id:
        raise _failure(step, total, command, list(tail), "the engine reported no image")
    return image_id


def _context_archive(context: Path, progress):
    """The build context as a tar file on disk, written with progress (a multi-GB context
    of wheels and conda archives takes a while). Files are added in sorted order."""
    files = sorted(p for p in context.rglob("*") if p.is_file() or p.is_dir())
    total = sum(p.stat().st_size for p in files if p.is_file())
    task = progress.task("preparing the build context", total=total)
    archive = tempfile.TemporaryFile(prefix="envbuild-context-", suffix=".tar")
    with tarfile.open(fileobj=archive, mode="w") as tar:
        for path in files:
            tar.add(path, arcname=path.relative_to(context).as_posix(), recursive=False)
            if path.is_file():
                task.update(advance=path.stat().st_size)
    task.done()
    size = archive.tell()
    archive.seek(0)
    return archive, size


class _Upload:
    """The context file as the engine reads it, reporting how much was sent."""

    def __init__(self, archive, size: int, task):
        self.archive, self.size, self.task, self._finished = archive, size, task, False

    def __len__(self) -> int:  # requests sends a Content-Length instead of chunks
        return self.size

    def read(self, size: int = -1) -> bytes:
        block = self.archive.read(size)
        self.task.update(advance=len(block))
        return block

    def finish(self) -> None:  # the engine answered: everything was sent
        if not self._finished:
            self._finished = True
            self.task.done()


def _short(command: str, width: int = 100) -> str:
    command = " ".join(command.split())
    return command if len(command) <= width else command[: width - 3] + "..."


OWN_ERROR = "envbuild: error: "  # how the Dockerfile's own checks explain a failed step


def _failure(step: int, total: int, command: str, tail: list[str], detail: str) -> BuildFailed:
    """The failing step and its log tail as evidence (printed before the summary, ANSI
    stripped off a terminal); the summary names the step, its command and the engine's words."""
    where = f"build step {step}/{total}" if step else "build"
    own = next((line for line in reversed(tail) if line.startswith(OWN_ERROR)), None)
    if own is not None:  # one of the Dockerfile's checks said what is wrong: that line is the error
        return BuildFailed(f"{where} failed: {own[len(OWN_ERROR):]}", hint="no tag was changed")
    lines = "\n".join(f"    {line}" for line in tail[-TAIL_LINES:]) or "    (no output)"
    evidence = f"{where} failed: {_short(command, 300)}\nlast lines of its log:\n{lines}"
    first = next((x.strip() for x in detail.strip().splitlines() if x.strip()), "no reason given")
    return BuildFailed(f"{where} failed ({_short(command, 120)}): {_short(first, 300)}",
                       hint="the step's log is above; no tag was changed", evidence=evidence)


def _docker_platform(platform: str | None) -> str | None:
    """conda platform names to Docker's (`linux-64` -> `linux/amd64`)."""
    names = {"linux-64": "linux/amd64", "linux-aarch64": "linux/arm64"}
    return names.get(platform, platform) if platform else None
