"""Write the solved packages as conda-lock's unified `conda-lock.yml` (conda-lock's
format, checked in the tests by `conda-lock render` and conda-lock's own parser) and as one `@EXPLICIT`
file per platform for plain `conda create --file` / `micromamba create -f`."""
from __future__ import annotations

from pathlib import Path
from urllib.parse import urlparse, urlunparse

import yaml

from envbuild.core.model import sha256_json
from envbuild.infra.errors import UserError
from envbuild.lock.folder import explicit_name, read_conda_lockfile
from envbuild.lock.metadata import PREFIX, Stamp
from envbuild.lock.request import SolveRequest
from envbuild.lock.solve import LockedPackage

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
                   custom: dict[str, str], sources: list[str]) -> dict:
    """The conda-lock.yml document (format version 1, as conda-lock writes it): packages
    sorted by (manager, name, platform), each package's dependencies by name, optional
    fields left out rather than written as null."""
    packages = []
    for platform, records in solved.items():
        for p in records:
            if not p.md5:
                raise UserError(f"the channel gives no md5 for {p.name} {p.version} {p.build}",
                                where=p.url, hint="re-index the channel (e.g. with `rattler-index`) so every record has md5 and sha256")
            if p.name.startswith("__"):
                continue  # virtual packages are never installed
            packages.append({
                "name": p.name, "version": p.version, "manager": "conda", "platform": platform,
                "dependencies": dict(sorted(_dependencies(p.depends).items())), "url": p.url,
                "hash": {"md5": p.md5, **({"sha256": p.sha256} if p.sha256 is not None else {})},
                "build": p.build, "category": "main", "optional": False,
            })
    packages.sort(key=lambda d: (d["manager"], d["name"], d["platform"]))
    first = requests[0]
    metadata = {
        "content_hash": {r.platform: content_hash(r, stamp) for r in requests},
        "channels": [_channel(c) for c in first.channels],
        "platforms": [r.platform for r in requests],
        "sources": list(sources),
        "custom_metadata": dict(custom),
    }
    return {"version": 1, "metadata": metadata, "package": packages}


def _channel(text: str) -> dict:
    """A channel as conda-lock records it. A URL carrying a user, password or `/t/` token
    goes through conda-lock itself, which swaps a secret for the environment variable
    holding it (`${VAR}`); that rare case pays for importing conda-lock."""
    if "://" not in text:
        return {"url": text, "used_env_vars": []}
    parsed = urlparse(text)
    if parsed.username or parsed.password or "/t/" in parsed.path:
        from conda_lock.models.channel import Channel

        channel = Channel.from_string(text)
        return {"url": channel.url, "used_env_vars": list(channel.used_env_vars)}
    return {"url": urlunparse(parsed), "used_env_vars": []}


HEADER = """\
# conda-lock unified lockfile written by `envbuild lock`; do not edit.
# Solved with py-rattler for the target machine (see metadata.custom_metadata).
# Install: conda-lock install --name ENV conda-lock.yml   (or micromamba create -n ENV -f conda-lock.yml)
# Update:  envbuild lock <spec>; check in CI with `envbuild lock <spec> --check`.
"""


def write_lockfile(document: dict, path: Path) -> None:
    """Write the document the way conda-lock's own writer does (block-style YAML, keys in
    the order above), after our header. Written here rather than with conda-lock's models:
    importing conda-lock loads its whole command-line tool, several times the cost of the
    solve. No time or git metadata: the same inputs give identical bytes."""
    text = yaml.dump(document, Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper), sort_keys=False)
    path.write_text(HEADER + text, encoding="utf-8")


def record_base_image(path: Path, ref: str, digest: str) -> None:
    """Add a pinned base image and its digest to a conda-lock.yml's metadata, so the lock
    names the exact base it was built on. `path` is the copy in a lock folder's staging
    folder (`folder.update`), which replaces the lock as a unit."""
    document = read_conda_lockfile(path)
    metadata = document.setdefault("metadata", {})
    custom = dict(metadata.get("custom_metadata") or {})
    custom.update({PREFIX + "base_image": ref, PREFIX + "base_digest": digest})
    metadata["custom_metadata"] = custom
    write_lockfile(document, path)


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
