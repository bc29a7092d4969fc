"""What a lock folder pins, file by file: names, versions and hashes of the conda
archives and wheels. Labels report the installed versions from here; the wheelhouse
check and `envbuild wheelhouse` use the files and their hashes."""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from envbuild import frameworks as plugins
from envbuild.core.cuda_packages import installed_cuda as from_packages
from envbuild.core.package_sets import package_set
from envbuild.dockerfile.lockfiles import LockInput

_CONDA_SUFFIXES = (".tar.bz2", ".conda")
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?\s*==\s*([^\s;\\]+)")
_DIRECT = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?\s*@\s*(\S+)")
_HASH = re.compile(r"--hash=sha256:([0-9a-f]{64})")
_ANY_HASH = re.compile(r"--hash[=\s]")

# Besides the frameworks' own packages and the CUDA runtime, ptxas and cuDNN packages
# (matrices/packages.yaml), the libraries whose versions a user asks about when an image
# misbehaves (NCCL, the array library, the interpreter).
KEY_LIBRARIES = ("python", "cuda-version", "cuda-runtime", "nccl", "numpy", "nvidia-nccl-cu12", "nvidia-nccl-cu11")


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


def locked_pip_entries(text: str) -> list[LockedFile]:
    """The pins of a pip requirements text, with their file names and hashes."""
    return _pip_entries(text.splitlines())


def has_hashes(text: str) -> bool:
    """pip checks every pin's hash once one pin of a requirements file has one."""
    return _ANY_HASH.search(text) is not None


def locked_files(lock: LockInput) -> list[LockedFile]:
    files = [_conda_file(p.url, p.sha256) for p in lock.conda]
    pip_lines = list(lock.pip_lines)
    if lock.pip_lock is not None:
        pip_lines += lock.pip_lock.read_text(encoding="utf-8").splitlines()
    return files + _pip_entries(pip_lines)


def installed_versions(lock: LockInput, frameworks: tuple[str, ...] = ()) -> dict[str, str]:
    """Versions the image installs of the frameworks' packages and the key libraries."""
    wanted = {normalize(n) for n in KEY_LIBRARIES}
    # the CUDA runtime, ptxas and cuDNN, which the probe compares with the image's labels
    wanted |= {normalize(n) for name in ("cuda_runtime_package", "ptxas_package", "cudnn_package")
               for n in package_set(name)}
    wanted |= {normalize(n) for p in plugins.all() for n in p.lock.conda_packages}
    wanted |= {normalize(f) for f in frameworks}
    # pip names of the frameworks: torch, cupy-cuda12x, jax-cuda12-plugin, tensorflow...
    wanted |= {n for p in plugins.all() for n in p.lock.pip_names}
    prefixes = tuple(n for p in plugins.all() for n in p.lock.name_prefixes())
    found = {}
    for item in locked_files(lock):
        key = normalize(item.name)
        if key in wanted or key.startswith(prefixes):
            if item.version:
                found[key] = item.version
    return dict(sorted(found.items()))


def installed_cuda(lock: LockInput, fallback: str | None) -> str | None:
    """The CUDA runtime (major.minor) the lock installs; `fallback` when it locks none (the
    framework's wheel or the base image carries the CUDA)."""
    return from_packages([(item.name, item.version) for item in locked_files(lock) if item.version], fallback)


def wheel_matches(entry: LockedFile, wheel: Path) -> bool:
    """`wheel` is a file of this pinned distribution (name and version from its file name)."""
    if entry.filename:
        return wheel.name == entry.filename
    parts = wheel.name.split("-")
    return len(parts) >= 2 and normalize(parts[0]) == entry.name and parts[1] == entry.version


def missing_from_wheelhouse(lock: LockInput, wheelhouse: Path) -> list[str]:
    """The pinned pip distributions the image installs that the wheelhouse has no file for
    (conda packages come from the lock's own URLs or the local channel, not from the
    wheelhouse; what the base image provides is not installed)."""
    wheels = [p for p in wheelhouse.iterdir() if p.is_file() and p.suffix in (".whl", ".gz", ".zip")]
    missing = []
    from_base = (lock.base or {}).get("from_base") or {}
    for entry in locked_files(lock):
        if entry.manager != "pip" or from_base.get(entry.name) == entry.version:
            continue  # conda archives, and the pins the base image provides (not installed)
        if not any(wheel_matches(entry, w) for w in wheels):
            missing.append(entry.filename or f"{entry.name}=={entry.version}")
    return missing


# --- what the base image provides (base-packages.json beside the pip lock) --------------------

def lock_entries(text: str) -> list[tuple[str | None, str | None, list[str]]]:
    """A pip lock's text as entries in order: (name, version, lines) for a pin with its
    continuation lines (`--hash=...`), (None, None, [line]) for any other line (options,
    comments). The name is the PEP 503 one; `name @ URL` pins have no version."""
    entries: list[tuple[str | None, str | None, list[str]]] = []
    continued = False
    for line in text.splitlines():
        if continued:  # the previous line ended with a backslash: this one belongs to its entry
            entries[-1][2].append(line)
        else:
            pin = _PIN.match(line.strip())
            direct = None if pin else _DIRECT.match(line.strip())
            if pin:
                entries.append((normalize(pin[1]), pin[2], [line]))
            elif direct and not line.lstrip().startswith("-"):
                entries.append((normalize(direct[1]), None, [line]))
            else:
                entries.append((None, None, [line]))
        continued = line.rstrip().endswith("\\")
    return entries


def without_base_pins(text: str, from_base: dict[str, str]) -> str:
    """A pip lock's text without the pins the base provides (each pin with its `--hash`
    continuation lines); options and the other pins as they were."""
    kept = [line for name, version, lines in lock_entries(text)
            if name is None or from_base.get(name) != version for line in lines]
    return "\n".join(kept) + "\n"


def base_summary(lock: LockInput) -> dict | None:
    """What the image of a pip lock installs and what it uses from the base image (for
    `dockerfile --json` and its text line); None for a conda lock."""
    if lock.pip_lock is None or lock.conda:
        return None
    record = lock.base or {}
    from_base = record.get("from_base") or {}
    installed = {e.name: e.version for e in locked_files(lock) if from_base.get(e.name) != e.version}
    note = record.get("note") if lock.base is not None else (
        "the lock has no record of what the base image carries (base-packages.json), so every locked package is "
        "installed; lock again to use what the base provides")
    return {"base_image": record.get("base_image"), "source": record.get("source"), "installed": installed,
            "from_base": from_base, "differs": record.get("differs") or {}, "note": note}


def base_summary_line(found: dict) -> str:
    """One line for the text output: how many pins are installed, how many come from the base."""
    reused = sorted(found["from_base"].items())
    shown = ", ".join(f"{n} {v}" for n, v in reused[:4]) + (", ..." if len(reused) > 4 else "")
    line = f"installs {len(found['installed'])} locked packages"
    layers = found.get("layers") or []
    if layers:
        counts = ", ".join(f"{layer['name']} {len(layer['packages'])}" for layer in layers)
        line += f" in {len(layers)} layer{'s' if len(layers) > 1 else ''} ({counts})"
    return line + (f"; uses {len(reused)} from the base image ({shown})" if reused else "")
