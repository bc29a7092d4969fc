"""Write the solved packages as conda-lock's unified `conda-lock.yml` (with conda-lock's
own models and writer, so `conda-lock render`/`install` read it) and as one `@EXPLICIT`
file per platform for plain `conda create --file` / `micromamba create -f`."""
from __future__ import annotations

from pathlib import Path

from envbuild.errors import UserError
from envbuild.lock.folder import explicit_name
from envbuild.lock.metadata import PREFIX, Stamp
from envbuild.lock.request import SolveRequest
from envbuild.lock.solve import LockedPackage
from envbuild.model import sha256_json

def _dependencies(depends: tuple[str, ...]) -> dict[str, str]:
    """`name -> version spec` as conda-lock records them (build pins dropped, the same
    name twice merged with a comma)."""
    merged: dict[str, str] = {}
    for text in depends:
        parts = text.split()
        name, version = parts[0], (parts[1] if len(parts) > 1 else "")
        if name in merged and version:
            merged[name] = f"{merged[name]},{version}" if merged[name] else version
        else:
            merged.setdefault(name, version)
    return merged


def content_hash(request: SolveRequest, stamp: Stamp) -> str:
    return sha256_json({
        "stamp": stamp.fields(), "platform": request.platform, "channels": request.channels,
        "specs": request.specs, "constraints": request.constraints,
        "virtual_packages": [str(v) for v in request.virtual_packages],
    })


def build_lockfile(solved: dict[str, list[LockedPackage]], requests: list[SolveRequest], stamp: Stamp,
                   custom: dict[str, str], sources: list[str]):
    from conda_lock.lockfile.v2prelim.models import HashModel, LockedDependency, Lockfile, LockMeta

    packages = []
    for platform, records in solved.items():
        for p in records:
            if not p.md5:
                raise UserError(f"the channel gives no md5 for {p.name} {p.version} {p.build}",
                                where=p.url, hint="re-index the channel (e.g. with `rattler-index`) so every record has md5 and sha256")
            packages.append(LockedDependency(
                name=p.name, version=p.version, manager="conda", platform=platform,
                dependencies=_dependencies(p.depends), url=p.url,
                hash=HashModel(md5=p.md5, sha256=p.sha256), categories={"main"}, build=p.build,
            ))
    first = requests[0]
    meta = LockMeta(
        content_hash={r.platform: content_hash(r, stamp) for r in requests},
        channels=list(first.channels),
        platforms=[r.platform for r in requests],
        sources=sources,
        custom_metadata=custom,
    )
    return Lockfile(package=packages, metadata=meta)


HEADER = """\
# conda-lock unified lockfile written by `envbuild lock`; do not edit.
# Solved with py-rattler for the target machine (see metadata.custom_metadata).
# Install: conda-lock install --name ENV conda-lock.yml   (or micromamba create -n ENV -f conda-lock.yml)
# Update:  envbuild lock <spec>; check in CI with `envbuild lock <spec> --check`.
"""


def write_lockfile(lockfile, path: Path) -> None:
    from conda_lock.lockfile import write_conda_lock_file

    # conda-lock's own help text would point at `conda-lock lock` for updates; ours goes
    # first instead. No time or git metadata: the same inputs give identical bytes.
    write_conda_lock_file(lockfile, path, metadata_choices=None, include_help_text=False)
    path.write_text(HEADER + path.read_text(encoding="utf-8"), encoding="utf-8")


def record_base_image(path: Path, ref: str, digest: str) -> None:
    """Add a pinned base image and its digest to a conda-lock.yml's metadata, so the lock
    names the exact base it was built on. `path` is the copy in a lock folder's staging
    folder (`folder.update`), which replaces the lock as a unit."""
    from conda_lock.lockfile import parse_conda_lock_file

    lockfile = parse_conda_lock_file(path)
    custom = dict(lockfile.metadata.custom_metadata or {})
    custom.update({PREFIX + "base_image": ref, PREFIX + "base_digest": digest})
    meta = lockfile.metadata.model_copy(update={"custom_metadata": custom})
    write_lockfile(lockfile.model_copy(update={"metadata": meta}), path)


def render_explicit(platform: str, packages: list[LockedPackage], stamp: Stamp) -> str:
    lines = [
        "# Explicit conda environment written by `envbuild lock`; do not edit.",
        f"# Install: conda create --name ENV --file {explicit_name(platform)}",
        f"#      or: micromamba create --name ENV --file {explicit_name(platform)}",
        f"# platform: {platform}",
        *(f"# {key}: {value}" for key, value in stamp.fields().items() if key != "platforms"),
        "@EXPLICIT",
    ]
    lines += [f"{p.url}#{p.md5}" for p in packages]
    return "\n".join(lines) + "\n"
