"""Content-addressed image tags: `<repository>:<hash>`.

The hash covers everything that decides what the image contains: the resolved stack,
the spec hash, every file of the build context (rendered Dockerfile, lockfiles, plan,
probe), the bundled archives and wheels, the base digest when pinned, and the data version
(matrix version + envbuild version). Same inputs, same tag; any change, a new tag.

Bundled archives and wheels count by name and size, not by their bytes: the lockfiles,
which are hashed, carry their sha256 and the installer checks each file against it, so
reading gigabytes of wheels would add nothing but time to every cache check.
"""
from __future__ import annotations

import re
from pathlib import Path

from envbuild import __version__
from envbuild.core.model import Resolution, sha256_json, to_jsonable
from envbuild.dockerfile.context import OWNED
from envbuild.lock.folder import sha256_file

TAG_LENGTH = 16  # hex digits: 64 bits, far from collisions within one repository


# Context folders whose files the lock pins by hash (see the module docstring): the
# wheelhouse, the bundled conda archives, and the wheels of each pip layer.
PINNED_BY_LOCK = ("envbuild/wheelhouse/", "envbuild/pkgs/")
LAYER_WHEELS = re.compile(r"^envbuild/layers/[^/]+/wheels/")


def pinned_by_lock(name: str) -> bool:
    return name.startswith(PINNED_BY_LOCK) or LAYER_WHEELS.match(name) is not None


def file_digests(root: Path, names: tuple[str, ...] | None = None) -> dict[str, str]:
    """sha256 (with an x/- mode flag) of every file under `root`, or under its entries `names`;
    files the lock pins by hash count by size."""
    tops = [root / name for name in names] if names is not None else [root]
    files = [p for top in tops for p in ([top] if top.is_file() else top.rglob("*")) if p.is_file()]
    digests = {}
    for path in sorted(files):
        name = path.relative_to(root).as_posix()
        if pinned_by_lock(name):
            digests[name] = f"size:{path.stat().st_size}"
            continue
        mode = "x" if path.stat().st_mode & 0o111 else "-"
        digests[name] = f"{mode}{sha256_file(path)}"
    return digests


def canonical_inputs(resolution: Resolution, context_dir: Path, base_digest: str | None,
                     platform: str) -> dict:
    return {
        "stack": to_jsonable(resolution.resolved),
        "spec": resolution.spec.hash(),
        "context": file_digests(context_dir, OWNED),  # the user's own files in that folder are no input
        "base_digest": base_digest,
        "platform": platform,
        "data_version": {"matrices": resolution.matrix_version, "envbuild": __version__},
    }


def content_tag(resolution: Resolution, context_dir: Path, base_digest: str | None, platform: str) -> str:
    return sha256_json(canonical_inputs(resolution, context_dir, base_digest, platform))[:TAG_LENGTH]
