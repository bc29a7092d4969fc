"""Read `envbuild lock`'s output into what the image installer needs.

Conda: the `@EXPLICIT` file of the platform (`conda-<platform>.lock`) when present,
otherwise the unified `conda-lock.yml`; both give each package's URL and hash. Pip:
`requirements.lock` (pip's own format, `--hash` lines honoured by pip itself).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from envbuild.infra.errors import UserError
from envbuild.lock import folder

HEX = re.compile(r"^[0-9a-f]+$")


@dataclass(frozen=True)
class CondaPackage:
    url: str
    sha256: str | None = None
    md5: str | None = None

    @property
    def filename(self) -> str:
        return self.url.rstrip("/").rsplit("/", 1)[-1]

    @property
    def subdir(self) -> str:
        parts = self.url.rstrip("/").rsplit("/", 2)
        return parts[-2] if len(parts) == 3 else "noarch"


@dataclass(frozen=True)
class LockInput:
    """The lockfiles found for one platform, in the order the installer needs them."""

    files: tuple[Path, ...]  # every lockfile that was read (copied into the image)
    conda: tuple[CondaPackage, ...] = ()
    pip_lock: Path | None = None  # a pip requirements file with pins (and hashes)
    pip_lines: tuple[str, ...] = field(default=())  # pip entries of a conda-lock.yml
    # base-packages.json of the pip lock: the pins the base image provides (not installed)
    base: dict | None = None

    @property
    def installer(self) -> str:
        return "conda" if self.conda else "pip"


def _hash_fields(fragment: str) -> dict[str, str]:
    fragment = fragment.strip()
    if fragment.startswith("sha256:"):
        return {"sha256": fragment[7:]}
    if HEX.match(fragment) and len(fragment) == 64:
        return {"sha256": fragment}
    if HEX.match(fragment) and len(fragment) == 32:
        return {"md5": fragment}
    return {}


def parse_explicit(path: Path) -> tuple[CondaPackage, ...]:
    packages, seen_marker = [], False
    for number, raw in enumerate(folder.read_lock_text(path).splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line == "@EXPLICIT":
            seen_marker = True
            continue
        if not seen_marker:
            continue
        url, _, fragment = line.partition("#")
        if "://" not in url:
            raise UserError(f"line {number} is not a package URL: {line!r}", where=str(path),
                            hint="regenerate it with `envbuild lock`")
        packages.append(CondaPackage(url=url, **_hash_fields(fragment)))
    if not seen_marker:
        raise UserError("not an explicit conda lock (no @EXPLICIT line)", where=str(path),
                        hint="regenerate it with `envbuild lock`")
    return tuple(packages)


def parse_conda_lock_yml(path: Path, platform: str) -> tuple[tuple[CondaPackage, ...], tuple[str, ...]]:
    try:
        data = folder.read_conda_lockfile(path) or {}
    except yaml.YAMLError as exc:
        raise UserError(f"not valid YAML ({exc.problem})", where=str(path)) from None
    conda, pip = [], []
    for entry in data.get("package") or []:
        if entry.get("platform") != platform:
            continue
        digests = entry.get("hash") or {}
        if entry.get("manager") == "conda":
            conda.append(CondaPackage(url=entry["url"], sha256=digests.get("sha256"), md5=digests.get("md5")))
        elif entry.get("manager") == "pip":
            line = f"{entry['name']} @ {entry['url']}"
            if digests.get("sha256"):
                line += f" --hash=sha256:{digests['sha256']}"
            pip.append(line)
    return tuple(conda), tuple(pip)


def read_lock_dir(lock_dir: Path, platform: str) -> LockInput:
    """Find and read the lockfiles for `platform`; a clear error names what is missing."""
    if not lock_dir.is_dir():
        raise UserError("lock folder does not exist", where=str(lock_dir), hint="run `envbuild lock SPEC -o DIR` first")
    folder.recover(lock_dir)  # a lock write killed after its commit point is finished first
    explicit = lock_dir / folder.explicit_name(platform)
    unified = lock_dir / folder.CONDA_LOCKFILE
    # `envbuild lock` writes requirements.lock for its first platform, requirements-<p>.lock for others.
    pip_names = (folder.pip_lock_name(platform, first=False), folder.PIP_LOCKFILE)
    pip_lock = next((lock_dir / n for n in pip_names if (lock_dir / n).is_file()), None)
    if explicit.is_file():
        files = [explicit] + ([unified] if unified.is_file() else [])
        _, pip_lines = parse_conda_lock_yml(unified, platform) if unified.is_file() and not pip_lock else ((), ())
        return LockInput(files=tuple(files), conda=parse_explicit(explicit), pip_lines=pip_lines,
                         pip_lock=pip_lock)
    if unified.is_file():
        conda, pip_lines = parse_conda_lock_yml(unified, platform)
        pip_lines = () if pip_lock else pip_lines  # the pip lock (with hashes) wins
        if conda:
            return LockInput(files=(unified,), conda=conda, pip_lines=pip_lines, pip_lock=pip_lock)
    if pip_lock:
        base = folder.read_base_packages(lock_dir)
        extra = (lock_dir / folder.BASE_PACKAGES,) if base is not None else ()
        if base is not None and base.get("platform") != platform:  # the record speaks of the first platform's lock
            base, extra = {"base_image": base.get("base_image"), "source": None, "from_base": {}, "differs": {},
                           "note": f"what the base image provides was read for the {base.get('platform')} lock, so "
                                   f"every pin of the {platform} lock is installed"}, ()
        return LockInput(files=(pip_lock, *extra), pip_lock=pip_lock, base=base)
    raise UserError(f"no lockfile for {platform} (looked for {explicit.name}, {unified.name}, "
                    f"{', '.join(pip_names)})",
                    where=str(lock_dir), hint="run `envbuild lock SPEC -o DIR` first")
