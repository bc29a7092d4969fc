"""`envbuild lock --check`: does the lock in a folder still match the spec, the matrix
data and the resolved stack, and is it the complete set that was written (every file
against the sha256 recorded with it)? Returns the reasons it is not (empty = up to date)."""
from __future__ import annotations

from pathlib import Path
from typing import Mapping

import yaml

from envbuild.core.model import Resolution, Spec
from envbuild.lock import folder, pip_lock, pylock
from envbuild.lock.api import by_platform, target_platforms
from envbuild.lock.metadata import read_custom_metadata, stamp_for
from envbuild.lock.request import needs_conda, needs_pip
from envbuild.lock.solve import SolveFailed


def check(spec: Spec, resolution: Resolution, platforms, out_dir,
          platform_resolutions: "Mapping[str, Resolution] | None" = None) -> list[str]:
    """`platform_resolutions`: the spec's resolution for each other platform of the lock
    (as for `envbuild.lock.api.lock`)."""
    out = Path(out_dir)
    if out.is_dir():
        folder.recover(out)  # a write killed after its commit point is finished first
    if not resolution.usable or resolution.resolved is None:
        return ["the spec no longer resolves (run `envbuild resolve` for the conflicts)"]
    chosen = target_platforms(resolution, platforms)
    try:
        resolutions = by_platform(resolution, chosen, platform_resolutions)
    except SolveFailed:
        return ["the spec no longer resolves for every platform of the lock (run `envbuild resolve --platform P`)"]
    stamp = stamp_for([resolutions[p] for p in chosen], chosen)
    problems: list[str] = []

    if any(needs_conda(spec, r) for r in resolutions.values()):
        path = out / folder.CONDA_LOCKFILE
        if not path.exists():
            problems.append(f"{path} is missing")
        else:
            try:
                data = folder.read_conda_lockfile(path) or {}
            except (yaml.YAMLError, UnicodeDecodeError):
                data = None
            if not isinstance(data, dict):
                problems.append(f"{path} is not a conda-lock file")
                data = {}
            found = read_custom_metadata((data.get("metadata") or {}).get("custom_metadata"))
            problems += [f"{path.name}: {line}" for line in stamp.differences(found)]
            for platform in chosen:
                if not (out / folder.explicit_name(platform)).exists():
                    problems.append(f"{out / folder.explicit_name(platform)} is missing")

    wants_pip = any(needs_pip(spec, r) for r in resolutions.values())
    for i, platform in enumerate(chosen if wants_pip else ()):
        if pip_lock.build_pip_request(spec, resolutions[platform], platform, None) is None:
            continue
        path = out / folder.pip_lock_name(platform, i == 0)
        if not path.exists():
            problems.append(f"{path} is missing")
            continue
        text = folder.read_lock_text(path)
        problems += [f"{path.name}: {line}" for line in stamp.differences(pip_lock.read_stamp(text))]
        path = out / folder.pylock_name(platform, i == 0)
        if not path.exists():
            if pip_lock.is_hashed(text):  # PEP 751 holds hashed locks only
                problems.append(f"{path} is missing")
            continue
        problems += [f"{path.name}: {line}"
                     for line in stamp.differences(pylock.read_stamp(folder.read_lock_text(path)))]

    if not problems and out.is_dir():  # the stamps agree: is every file the one written with them?
        problems += folder.verify(out)
    return problems
