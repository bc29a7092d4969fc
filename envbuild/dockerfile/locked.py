"""What a lock folder pins, file by file: names, versions and hashes of the conda
archives and wheels. Labels report the installed versions from here; the wheelhouse
check and `envbuild wheelhouse` use the files and their hashes."""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from envbuild.dockerfile.lockfiles import LockInput

_CONDA_SUFFIXES = (".tar.bz2", ".conda")
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?\s*==\s*([^\s;\\]+)")
_DIRECT = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?\s*@\s*(\S+)")
_HASH = re.compile(r"--hash=sha256:([0-9a-f]{64})")

# Besides the frameworks' own packages, the libraries whose versions a user asks about
# when an image misbehaves (runtime, cuDNN, NCCL, the array library, the interpreter).
KEY_LIBRARIES = ("python", "cuda-version", "cuda-runtime", "cuda-cudart", "cudatoolkit", "cudnn", "nccl",
                 "numpy", "nvidia-cuda-runtime-cu12", "nvidia-cuda-runtime-cu11", "nvidia-cudnn-cu12",
                 "nvidia-cudnn-cu11", "nvidia-nccl-cu12", "nvidia-nccl-cu11")


def normalize(name: str) -> str:
    """PEP 503 name: lower case, runs of -_. as one dash."""
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass(frozen=True)
class LockedFile:
    manager: str  # conda | pip
    name: str
    version: str
    filename: str | None  # conda archive or wheel name when the lock names it
    sha256: tuple[str, ...] = ()
    url: str | None = None


def _conda_file(url: str, sha256: str | None) -> LockedFile:
    filename = url.rstrip("/").rsplit("/", 1)[-1]
    stem = next((filename[: -len(s)] for s in _CONDA_SUFFIXES if filename.endswith(s)), filename)
    name, version, _build = (stem.rsplit("-", 2) + ["", ""])[:3]
    return LockedFile("conda", name, version, filename, (sha256,) if sha256 else (), url)


def _pip_entries(lines: list[str]) -> list[LockedFile]:
    """`name==version --hash=...` (continuation lines joined) and `name @ URL --hash=...`."""
    joined, current = [], ""
    for raw in lines:
        line = raw.split(" #", 1)[0].rstrip() if not raw.lstrip().startswith("#") else ""
        current += " " + line.rstrip("\\").strip()
        if not line.endswith("\\"):
            if current.strip():
                joined.append(current.strip())
            current = ""
    if current.strip():
        joined.append(current.strip())
    out = []
    for entry in joined:
        hashes = tuple(_HASH.findall(entry))
        pin = _PIN.match(entry)
        if pin:
            out.append(LockedFile("pip", normalize(pin[1]), pin[2], None, hashes))
            continue
        direct = _DIRECT.match(entry)
        if direct:
            url = direct[2]
            filename = url.split("#", 1)[0].rstrip("/").rsplit("/", 1)[-1]
            version = filename.split("-")[1] if filename.count("-") >= 2 else ""
            out.append(LockedFile("pip", normalize(direct[1]), version, filename, hashes, url))
    return out


def locked_files(lock: LockInput) -> list[LockedFile]:
    files = [_conda_file(p.url, p.sha256) for p in lock.conda]
    pip_lines = list(lock.pip_lines)
    if lock.pip_lock is not None:
        pip_lines += lock.pip_lock.read_text(encoding="utf-8").splitlines()
    return files + _pip_entries(pip_lines)


def installed_versions(lock: LockInput, frameworks: tuple[str, ...] = ()) -> dict[str, str]:
    """Versions the image installs of the frameworks' packages and the key libraries."""
    from envbuild import frameworks as plugins

    wanted = {normalize(n) for n in KEY_LIBRARIES}
    wanted |= {normalize(n) for p in plugins.all() for n in p.conda_packages}
    wanted |= {normalize(f) for f in frameworks}
    # pip names of the frameworks: torch, cupy-cuda12x, jax-cuda12-plugin, tensorflow...
    wanted |= {n for p in plugins.all() for n in p.pip_names}
    prefixes = tuple(n for p in plugins.all() for n in p.pip_name_prefixes)
    found = {}
    for item in locked_files(lock):
        key = normalize(item.name)
        if key in wanted or key.startswith(prefixes):
            if item.version:
                found[key] = item.version
    return dict(sorted(found.items()))


def wheel_matches(entry: LockedFile, wheel: Path) -> bool:
    """`wheel` is a file of this pinned distribution (name and version from its file name)."""
    if entry.filename:
        return wheel.name == entry.filename
    parts = wheel.name.split("-")
    return len(parts) >= 2 and normalize(parts[0]) == entry.name and parts[1] == entry.version


def missing_from_wheelhouse(lock: LockInput, wheelhouse: Path) -> list[str]:
    """The pinned pip distributions the wheelhouse has no file for (conda packages come
    from the lock's own URLs or the local channel, not from the wheelhouse)."""
    wheels = [p for p in wheelhouse.iterdir() if p.is_file() and p.suffix in (".whl", ".gz", ".zip")]
    missing = []
    for entry in locked_files(lock):
        if entry.manager != "pip":
            continue
        if not any(wheel_matches(entry, w) for w in wheels):
            missing.append(entry.filename or f"{entry.name}=={entry.version}")
    return missing
