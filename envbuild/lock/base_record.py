"""The base-image record of a lock folder: the base image a lock was built on, pinned by
digest (`--pin-digests`).

It is written twice, as `base-image.json` and into conda-lock.yml's metadata, and the two
are replaced together with the rest of the set as one unit (`folder.update`), so no reader
sees one without the other.
"""
from __future__ import annotations

import json
from pathlib import Path

from envbuild.lock import folder
from envbuild.lock.conda_lockfile import record_base_image


def record_text(base_image: str, pulled_from: str, digest: str) -> str:
    """base-image.json: the catalog reference, where it was pulled from (a mirror), its digest."""
    return json.dumps({"base_image": base_image, "pulled_from": pulled_from, "digest": digest}, indent=2) + "\n"


def write(lock_dir: Path, base_image: str, pulled_from: str, digest: str) -> str:
    """Record the pinned base in the lock folder; returns the text of base-image.json."""
    record = record_text(base_image, pulled_from, digest)

    def edit(new) -> None:
        if folder.CONDA_LOCKFILE in new.names:
            record_base_image(new.path / folder.CONDA_LOCKFILE, base_image, digest)

    folder.update(lock_dir, {folder.BASE_RECORD: record}, edit)
    return record
