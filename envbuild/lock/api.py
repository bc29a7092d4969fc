"""`lock(spec, resolution, platforms, out_dir)`: solve and write every lockfile the
resolved stack needs, atomically. Used by `envbuild lock` and by the image builder.

Files written in `out_dir` (names are part of the interface, see `envbuild.lock.folder`):
  conda-lock.yml               conda-lock unified lockfile, all platforms (conda path)
  conda-<platform>.lock        @EXPLICIT file per platform (conda path)
  requirements.lock            pip lock for the first platform (pip requirements present)
  requirements-<platform>.lock pip lock for each further platform
  pylock.toml                  the same pip lock in PEP 751's format (pylock.<platform>.toml: further ones)
  base-packages.json           which pins of the first pip lock the base image provides (a pip environment)
  .envbuild-lock.json          the sha256 of each file above (`lock --check` verifies them)
The set replaces the folder's previous lock as one unit (`folder.replacing`).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from envbuild import matrix
from envbuild.core.model import BUILD_PLATFORMS, Resolution, Spec
from envbuild.infra.errors import UserError
from envbuild.infra.urls import mask
from envbuild.lock import base_packages, conda_lockfile, folder, pip_lock, pylock
from envbuild.lock.cuda_check import CudaReport, judge, lock_pip
from envbuild.lock.metadata import Stamp, custom_metadata, stamp_for
from envbuild.lock.pip_config import other_sources, read_pip_settings
from envbuild.lock.request import build_requests, needs_conda, needs_pip
from envbuild.lock.solve import LockedPackage, SolveFailed, solve
from envbuild.lock.virtual import unknown_os_note

LockConflict = SolveFailed  # raised with .conflicts (resolve's format) and .raw (solver text)


@dataclass(frozen=True)
class LockResult:
    """The lock files written and the packages solved per platform."""

    out_dir: Path
    platforms: tuple[str, ...]
    files: tuple[Path, ...]
    conda: dict[str, list[LockedPackage]] = field(default_factory=dict)
    pip_hashed: bool | None = None  # None: no pip lock
    notes: tuple[str, ...] = ()  # things the user must know (e.g. no hashes: index unreachable)
    stamp: Stamp | None = None
    pip: dict[str, tuple] = field(default_factory=dict)  # platform -> its pinned PipPins
    base: dict | None = None  # base-packages.json: the pins the base image provides, what differs
    cuda: tuple[CudaReport, ...] = ()  # per platform: the CUDA the lock installs, judged again


def target_platforms(resolution: Resolution, platforms: "tuple[str, ...] | list[str] | None") -> tuple[str, ...]:
    """The platforms to lock: `platforms`, else every platform the spec's lock covers."""
    chosen = tuple(dict.fromkeys(platforms or resolution.spec.lock_platforms))
    for platform in chosen:
        if platform not in BUILD_PLATFORMS:
            raise UserError(f"cannot lock for platform {platform!r}", where="--platform",
                            hint=f"envbuild locks for {', '.join(BUILD_PLATFORMS)}")
    return chosen


def by_platform(resolution: Resolution, chosen: tuple[str, ...],
                others: "Mapping[str, Resolution] | None") -> dict[str, Resolution]:
    """{platform: its own resolution} for every chosen platform: each platform is locked
    from what resolve chose for it (its framework build, CUDA variant, base and Python),
    never from another platform's stack. A resolution with conflicts is refused."""
    found = {}
    for platform in chosen:
        own = resolution if resolution.resolved is not None and resolution.resolved.platform == platform \
            else (others or {}).get(platform)
        if own is None:
            raise ValueError(f"locking {platform} needs the resolution of the spec for {platform} "
                             "(pipeline.platform_resolutions gives it)")
        if not own.usable or own.resolved is None:
            raise LockConflict(tuple(own.conflicts), "")
        found[platform] = own
    return found


def lock(spec: Spec, resolution: Resolution, platforms=None, out_dir: "str | os.PathLike[str]" = ".",
         *, index_url: str | None = None, extra_index_urls: tuple[str, ...] = (), pip_timeout: float = 10.0,
         allow_unhashed: bool = False, platform_resolutions: "Mapping[str, Resolution] | None" = None,
         read_base=None, glibc: str | None = None) -> LockResult:
    """Solve and write the lockfiles. `resolution` is the spec's own; every other platform
    locked needs its resolution in `platform_resolutions`. Raises LockConflict when the
    stack cannot be locked (a resolution with conflicts is refused the same way), UserError
    for bad input and EnvironmentProblem when an index or channel cannot be read. A pip
    lock without hashes is refused unless `allow_unhashed`. `read_base(ref)` reads what a
    base image the local engine holds carries (`envbuild.image.facts.read_local`), for a
    pip environment over it. `glibc`: the target's C library when it is known directly
    (`envbuild env`: this host's), instead of from the base image's OS."""
    if not resolution.usable or resolution.resolved is None:
        raise LockConflict(tuple(resolution.conflicts), "")
    resolved_names = {f.name for f in resolution.resolved.frameworks}
    for wanted in spec.frameworks:
        if wanted.name not in resolved_names:
            # resolve only warned (no --strict): without a matrix row there is no GPU build to
            # pin, and locking the rest would silently drop the framework.
            raise UserError(
                f"{wanted.name} {wanted.constraint or ''}".rstrip() + " has no row in the matrices, so its GPU build cannot be pinned",
                where=spec.source or "spec", hint=f"pick a version `envbuild matrix {wanted.name}` lists")
    chosen = target_platforms(resolution, platforms)
    resolutions = by_platform(resolution, chosen, platform_resolutions)
    out = Path(out_dir)
    stamp = stamp_for([resolutions[p] for p in chosen], chosen)
    first = resolutions[chosen[0]]

    # Everything that can fail runs before anything is written.
    folder.guard(out, str(out), _names_written(any(needs_conda(spec, r) for r in resolutions.values()),
                                               any(needs_pip(spec, r) for r in resolutions.values()), chosen))
    requests, solved = [], {}
    if any(needs_conda(spec, r) for r in resolutions.values()):
        requests = [r for p in chosen for r in build_requests(spec, resolutions[p], (p,), glibc)]
        solved = solve(requests)
    pip_locks, over_base = [], None
    released: dict = {}  # platform -> the CUDA wheels not held to the resolved release, and why
    if any(needs_pip(spec, r) for r in resolutions.values()):
        pip_locks, over_base = pip_lock_files(spec, resolutions, chosen, index_url, extra_index_urls,
                                              timeout=pip_timeout, allow_unhashed=allow_unhashed, read_base=read_base,
                                              released=released, glibc=glibc)

    if not requests and not pip_locks:
        raise UserError("nothing to lock: the spec has no conda or pip packages", where=spec.source or "spec")
    reports = _cuda_reports(resolutions, chosen, solved, pip_locks, released)
    refused = tuple(c for report in reports for c in report.conflicts)
    if refused:
        raise LockConflict(refused, "")

    notes = [unknown_os_note(r.resolved) for r in resolutions.values()]
    notes += [lock_.note for _, _, lock_ in pip_locks]
    if pip_locks:
        notes.append(_other_sources_note(pip_locks[0][2].request))
    if over_base is not None:
        notes.append(over_base.note)
    notes += [w for report in reports for w in report.warnings]
    lockfile = None
    if requests:
        virtual = {r.platform: " ".join(str(v) for v in r.virtual_packages) for r in requests}
        lockfile = conda_lockfile.build_lockfile(
            solved, requests, stamp, custom_metadata(stamp, first, virtual), _sources(spec))
    # The new set replaces the old one whole: files this run no longer produces (a dropped
    # platform, a switch between conda and pip) go with it.
    with folder.replacing(out) as new:
        if lockfile is not None:
            folder.fault_step(f"open {folder.CONDA_LOCKFILE}")
            conda_lockfile.write_lockfile(lockfile, new.file(folder.CONDA_LOCKFILE))
            folder.fault_step(f"wrote {folder.CONDA_LOCKFILE}")
            for platform, packages in solved.items():
                new.write_text(folder.explicit_name(platform), conda_lockfile.render_explicit(platform, packages, stamp))
        about = {report.platform: tuple(report.lines()) for report in reports}
        for platform, i, lock_ in pip_locks:
            _write_pip_lock(new, platform, i == 0, lock_, stamp, about.get(platform, ()))
        if over_base is not None:
            new.write_text(folder.BASE_PACKAGES, base_packages.record_text(over_base, pip_locks[0][0]))
        names = list(new.names)
    written = [out / name for name in names]
    return LockResult(
        out_dir=out, platforms=chosen, files=tuple(written), conda=solved,
        pip_hashed=all(lock_.hashed for _, _, lock_ in pip_locks) if pip_locks else None,
        notes=tuple(dict.fromkeys(n for n in notes if n)), stamp=stamp,
        pip={platform: lock_.pins for platform, _, lock_ in pip_locks}, cuda=reports,
        base=over_base.record(pip_locks[0][0]) if over_base is not None else None,
    )


def pip_lock_files(spec: Spec, resolutions: dict[str, Resolution], chosen: tuple[str, ...], index_url: str | None,
                   extra_index_urls: tuple[str, ...], *, timeout: float, allow_unhashed: bool, read_base=None,
                   released: dict | None = None, glibc: str | None = None):
    """([(platform, its position among the chosen, PipLock)] for each platform with pip
    requirements, each from its own resolution, its CUDA wheels held to the resolved CUDA
    release wherever the requirements allow (`released` gets, per platform, those that
    moved); and for the first platform's pip environment, a venv over its base image's
    Python, the split of its pins between what the base provides and what the image
    installs (lock.base_packages), else None). `glibc`: the target's C library when known
    directly (a host)."""
    if index_url:
        pip_lock.check_index_url(index_url)
    settings = read_pip_settings()  # how this machine reaches the indexes: CA bundle, proxy, credentials
    found, over_base = [], None
    for i, platform in enumerate(chosen):
        own = resolutions[platform]
        request = pip_lock.build_pip_request(spec, own, platform, index_url, settings, extra_index_urls, glibc)
        if request is None:
            continue

        def held(req, explain=True, platform=platform, own=own):
            locked, moved = lock_pip(matrix.load(), req, own.resolved.cudnn, timeout=timeout,
                                     allow_unhashed=allow_unhashed, explain=explain)
            if released is not None:
                released[platform] = moved
            return locked

        if not found and own.resolved.installer == "pip" and own.resolved.base_image is not None:
            # a venv over the base image's own Python (a host's environment has no base image)
            locked, over_base = base_packages.lock_over_base(own, request, timeout=timeout,
                                                             allow_unhashed=allow_unhashed, read_base=read_base,
                                                             lock=held)
        else:
            locked = held(request)
        found.append((platform, i, locked))
    return found, over_base


def _write_pip_lock(new, platform: str, first: bool, lock_, stamp: Stamp, about: tuple[str, ...] = ()) -> None:
    """requirements.lock (`about`: header lines on the CUDA it installs) and, when every file
    is hashed (PEP 751 wants that), pylock.toml."""
    name = folder.pip_lock_name(platform, first)
    new.write_text(name, pip_lock.render(lock_, stamp, name, about))
    if lock_.hashed:
        name = folder.pylock_name(platform, first)
        new.write_text(name, pylock.render(lock_, stamp, name))


def _other_sources_note(request) -> str | None:
    """What pip's configuration here would have added, said once: the lock leaves it out."""
    left_out = other_sources(request.settings, request.indexes)
    if not left_out:
        return None
    return (f"pip's configuration here adds {', '.join(mask(u) for u in left_out)}; the lock resolves only from "
            f"the indexes it names ({', '.join(mask(u) for u in request.indexes)}): pass --index-url or "
            "--extra-index-url to lock from another")


def _cuda_reports(resolutions: dict[str, Resolution], platforms, solved, pip_locks, released) -> tuple[CudaReport, ...]:
    """Per platform, the CUDA the locked records install, judged against that platform's
    resolved stack (pip's wheels first: the frameworks load them before the conda packages)."""
    m = matrix.load()
    pins = {platform: lock_.pins for platform, _, lock_ in pip_locks}
    out = []
    for platform in platforms:
        stack = resolutions[platform].resolved
        packages = [(p.name, p.version) for p in pins.get(platform, ())]
        packages += [(p.name, p.version) for p in solved.get(platform, ())]
        report = judge(m, stack, platform, packages, released.get(platform, ()))
        if stack.cuda or report.components:
            out.append(report)
    return tuple(out)


def _names_written(conda: bool, pip: bool, platforms) -> list[str]:
    """The files a lock may write, known before the solve."""
    names = []
    if conda:
        names += [folder.CONDA_LOCKFILE, *(folder.explicit_name(p) for p in platforms)]
    if pip:
        names += [folder.BASE_PACKAGES] + [name for i, p in enumerate(platforms)
                                            for name in (folder.pip_lock_name(p, i == 0), folder.pylock_name(p, i == 0))]
    return names


def _sources(spec: Spec) -> list[str]:
    """The spec file's name only: a path relative to the lock folder would make the same
    environment's lock (and so its content-addressed image tag) depend on where it was written."""
    if not spec.source:
        return []
    return [Path(spec.source).name]

