"""`envbuild lock --check`: does the lock in a folder still match the spec, the matrix
data and the resolved stack, and is it the complete set that was written (every file
against the sha256 recorded with it)? Returns the reasons it is not (empty = up to date)."""
from __future__ import annotations

from pathlib import Path

from envbuild.lock import folder
from envbuild.lock.metadata import read_custom_metadata, stamp_for
from envbuild.model import Resolution, Spec


def check(spec: Spec, resolution: Resolution, platforms, out_dir) -> list[str]:
    import yaml

    from envbuild.lock.api import target_platforms
    from envbuild.lock.request import needs_conda, needs_pip

    out = Path(out_dir)
    if out.is_dir():
        folder.recover(out)  # a write killed after its commit point is finished first
    if not resolution.ok or resolution.resolved is None:
        return ["the spec no longer resolves (run `envbuild resolve` for the conflicts)"]
    chosen = target_platforms(resolution, platforms)
    stamp = stamp_for(resolution, chosen)
    problems: list[str] = []

    if needs_conda(spec, resolution):
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

    wants_pip = needs_pip(spec, resolution)
    if wants_pip:
        from envbuild.lock import pip_lock, pylock  # the installer and network modules: only for a pip lock
    for i, platform in enumerate(chosen if wants_pip else ()):
        if pip_lock.build_pip_request(spec, resolution, platform, None) is None:
            continue
        path = out / folder.pip_lock_name(platform, i == 0)
        if not path.exists():
            problems.append(f"{path} is missing")
            continue
        text = path.read_text(encoding="utf-8")
        problems += [f"{path.name}: {line}" for line in stamp.differences(pip_lock.read_stamp(text))]
        path = out / folder.pylock_name(platform, i == 0)
        if not path.exists():
            if pip_lock.is_hashed(text):  # PEP 751 holds hashed locks only
                problems.append(f"{path} is missing")
            continue
        problems += [f"{path.name}: {line}"
                     for line in stamp.differences(pylock.read_stamp(path.read_text(encoding="utf-8")))]

    if not problems and out.is_dir():  # the stamps agree: is every file the one written with them?
        problems += folder.verify(out)
    return problems
