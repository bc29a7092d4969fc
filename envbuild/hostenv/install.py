"""Install a lock folder into a staging prefix, for the prefix's final path.

- pip: `uv venv --relocatable` over the host interpreter, then `uv pip sync
  --require-hashes` of requirements.lock: uv checks every file against the lock's sha256
  and removes anything the lock does not name. A relocatable venv's scripts find their
  interpreter relative to themselves, so the venv works once renamed into place.
- conda: every package of conda-lock.yml with py-rattler (`envbuild.lock.install`, hashes
  compared with the lock), linked with the final prefix as the path patched into its
  files. A pip section of the lock is then installed with `uv pip install --no-deps
  --require-hashes` by the environment's own python, and the scripts it writes are
  pointed at the final prefix.

Progress: the installers' own lines, and while they are silent how long they have run
(`Progress.follow`); rattler reports bytes downloaded against the lock's sizes.
"""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

from uv import find_uv_bin

from envbuild.infra.errors import EnvironmentProblem
from envbuild.infra.urls import mask_text
from envbuild.lock import folder
from envbuild.lock.install import install
from envbuild.lock.pip_config import read_pip_settings, uv_arguments, uv_environment, with_credentials


def _uv() -> str:
    return find_uv_bin()


def _uv_env(lock_file: Path) -> tuple[dict[str, str], list[str]]:
    """The environment and flags that let uv reach the lock's indexes the way this host's
    pip configuration says (CA bundle, proxy, credentials), as `envbuild lock` does."""
    settings = read_pip_settings()
    indexes = []
    for line in lock_file.read_text(encoding="utf-8").splitlines():
        words = line.split()
        if len(words) == 2 and words[0] in ("--index-url", "--extra-index-url"):
            indexes.append(with_credentials(words[1], settings))
    env = uv_environment(settings, indexes[0] if indexes else "https://pypi.org/simple", tuple(indexes[1:]))
    return env, uv_arguments(settings)


def _run_uv(command: list[str], env: dict[str, str], progress, label: str) -> None:
    """Run uv with its lines shown as they come (on a terminal uv draws its own bars) and,
    while it is silent, how long it has run. EnvironmentProblem with uv's cause on failure."""
    if progress.mode == "live":  # uv's own progress bars, with bytes, on the user's terminal
        done = subprocess.run(command, env=env, stdout=subprocess.DEVNULL, stderr=None)
        if done.returncode:
            raise EnvironmentProblem(f"{label} failed (uv exit code {done.returncode})",
                                     hint="uv's output is above; nothing was changed in the environment")
        return
    with subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) as proc:
        tail: list[str] = []
        for line in progress.follow(proc.stderr, label):
            line = mask_text(line.rstrip())
            if line:
                tail = (tail + [line])[-20:]
                progress.log(line)
        code = proc.wait()
    if code:
        cause = next((x for x in reversed(tail) if x.strip().startswith(("error:", "×", "Caused by:", "╰─▶"))),
                     tail[-1] if tail else "no output")
        raise EnvironmentProblem(f"{label} failed: {cause.strip()}",
                                 hint="check the network and the indexes the lock names; nothing was changed in "
                                      "the environment")


def install_pip(stage: Path, lock_dir: Path, interpreter: str, progress) -> None:
    lock_file = lock_dir / folder.PIP_LOCKFILE
    env, flags = _uv_env(lock_file)
    progress.line(f"envbuild: creating a venv over {interpreter}")
    _run_uv([_uv(), "venv", "--quiet", "--no-config", "--relocatable", "--allow-existing", "--python", interpreter,
             "--no-python-downloads", str(stage)], env, progress, "uv venv")
    count = sum(1 for line in lock_file.read_text(encoding="utf-8").splitlines() if "==" in line or " @ " in line)
    progress.line(f"envbuild: installing {count} locked packages with uv (hashes checked)")
    _run_uv([_uv(), "pip", "sync", "--no-config", "--require-hashes", "--index-strategy", "unsafe-best-match",
             "--python", str(stage / "bin" / "python"), *flags, str(lock_file)], env, progress, "uv pip sync")


def install_conda(stage: Path, final: Path, lock_dir: Path, platform: str, progress) -> list[str]:
    """Returns the installed packages as `name=version=build`."""
    from rattler.exceptions import InstallerError

    progress.line("envbuild: installing the locked conda packages with py-rattler (hashes checked)")
    try:
        installed = install(lock_dir / folder.CONDA_LOCKFILE, stage, platform, alternative_target_prefix=final,
                            reporter=_RattlerProgress(progress))
    except InstallerError as exc:
        progress.done()
        causes = [line.split(":", 1)[1].strip() for line in str(exc).splitlines() if line.startswith("Caused by:")]
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise EnvironmentProblem(f"py-rattler could not install the lock: {first}" + (f" ({causes[-1]})" if causes else ""),
                                 hint="check the channel and the network; the environment was left as it was") from None
    (stage / "CACHEDIR.TAG").unlink(missing_ok=True)  # rattler marks the prefix; it is no cache
    lock_file = lock_dir / folder.PIP_LOCKFILE
    if lock_file.is_file():
        env, flags = _uv_env(lock_file)
        progress.line("envbuild: installing the locked pip packages into it with uv (hashes checked)")
        _run_uv([_uv(), "pip", "install", "--no-config", "--require-hashes", "--no-deps", "--index-strategy",
                 "unsafe-best-match", "--python", str(stage / "bin" / "python"), *flags, "-r", str(lock_file)],
                env, progress, "uv pip install")
        point_scripts_at(stage, final)
    return installed


# How an installer names a console script's python: on the first line, or, where that line
# would pass the kernel's 127-byte limit (a deep folder) or holds a space, through /bin/sh.
SCRIPT_HEADS = ("#!{}/", "#!/bin/sh\n'''exec' '{}/")


def point_scripts_at(stage: Path, final: Path) -> None:
    """Scripts pip-installed into a conda prefix name its python by absolute path: the
    staging folder's. Make them name the final prefix's (conda's packages already do)."""
    heads = [(head.format(stage).encode(), head.format(final).encode()) for head in SCRIPT_HEADS]
    longest = max(len(old) for old, _new in heads)
    for path in (stage / "bin").iterdir():
        if path.is_symlink() or not path.is_file():
            continue
        with open(path, "rb") as handle:
            start = handle.read(longest)
        for old, new in heads:
            if start.startswith(old):
                data = path.read_bytes()
                path.write_bytes(new + data[len(old):])
                break


class _RattlerProgress:
    """py-rattler's installer callbacks as one task: bytes downloaded of the packages'
    total (what each download reports), then the packages linked."""

    def __init__(self, progress):
        self.progress = progress
        self.bytes: dict[int, int] = {}
        self.totals: dict[int, int] = {}
        self.download = None
        self.link = None
        self.linked = 0

    def on_transaction_start(self, total_operations: int) -> None:
        self.link = self.progress.task(f"linking {total_operations} packages", total=total_operations, unit="packages")

    def on_download_start(self, cache_entry: int) -> int:
        if self.download is None:
            self.download = self.progress.task("downloading conda packages")
        return cache_entry

    def on_download_progress(self, download_idx: int, progress: int, total: "int | None") -> None:
        self.bytes[download_idx] = progress
        if total:
            self.totals[download_idx] = total
        if self.download is not None:
            self.download.update(sum(self.bytes.values()), total=sum(self.totals.values()) or None)

    def on_link_complete(self, index: int) -> None:
        self.linked += 1
        if self.link is not None:
            self.link.update(self.linked)

    def on_transaction_complete(self) -> None:
        for task in (self.download, self.link):
            if task is not None:
                task.done()

    def __getattr__(self, name: str):  # every other callback: nothing to show
        if name.startswith("on_"):
            return lambda *args, **kwargs: 0
        raise AttributeError(name)


def python_runs(prefix: Path) -> bool:
    """Whether the environment's python is there (its base interpreter included)."""
    return os.path.exists(Path(prefix) / "bin" / "python")
