"""Up to three nearest fixes per conflict, each one verified.

Candidates move one side of the failing link at a time (the CUDA variant, the
framework version, the driver, Python, cuDNN, the platform, the base image), nearest
first. A candidate is offered only after the changed spec has been resolved (without
fix generation, so there is no recursion) and came back without a conflict (ok, or
unverified where the matrices lack a fact about the moved stack); when the spec has a
second, independent conflict, the candidate is combined with the first fix of that one.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

from envbuild.core.model import Fix, Resolution, Spec
from envbuild.core.values import ConflictKind, CudaVersion
from envbuild.core.versions import cuda_to_local, parse_constraint, parse_version
from envbuild.resolver import checks
from envbuild.resolver.problem import Problem

MAX_FIXES = 3
MAX_TRIES = 10  # resolves spent per conflict


def fixes_for(spec: Spec, p: Problem, analysis, resolve_plain: Callable[[Spec], Resolution],
              analyse_plain: Callable[[Spec], Any]) -> list[Fix]:
    """The verified fixes of `p`; `resolve_plain` and `analyse_plain` resolve and analyse a
    changed spec against the same data (without fixes)."""
    offered: list[Fix] = []
    seen: set = set()
    tries = 0
    for description, changes in _candidates(spec, p, analysis):
        key = tuple(sorted((k, str(v)) for k, v in changes.items()))
        if key in seen:
            continue
        seen.add(key)
        tries += 1
        if tries > MAX_TRIES:
            break
        verified = _verify(spec, p, description, changes, analysis, resolve_plain, analyse_plain)
        if verified is not None and all(f.changes != verified.changes for f in offered):
            offered.append(verified)
            if len(offered) == MAX_FIXES:
                break
    return offered


def _verify(spec: Spec, p: Problem, description: str, changes: dict, analysis, resolve_plain,
            analyse_plain) -> Fix | None:
    try:
        fixed = spec.with_changes(changes)
        result = _once(analysis, "resolution", fixed, resolve_plain)
    except Exception:  # noqa: BLE001 - a candidate that does not even resolve is simply not offered
        return None
    if result.usable:
        return Fix(description, changes)
    # One more step for a second, independent conflict: merge the first candidate that
    # clears the remaining conflicts.
    try:
        second = _once(analysis, "analysis", fixed, analyse_plain)
    except Exception:  # noqa: BLE001
        return None
    if not second.problems:
        return None
    if (second.problems[0].kind, second.problems[0].framework) == (p.kind, p.framework):
        return None  # the candidate did not clear this conflict; it is not a step towards a fix
    # Any of the remaining conflicts may hold the move that clears them all: a GPU that needs
    # the R575 driver and a build that needs R580 are both cleared by R580.
    for rest in second.problems[:3]:
        for more_desc, more in list(_candidates(fixed, rest, second))[:3]:
            merged = {**changes, **more}
            try:
                if _once(analysis, "resolution", spec.with_changes(merged), resolve_plain).usable:
                    # a second move that replaces every value of the first is the whole fix
                    return Fix(more_desc if set(more) >= set(changes) else f"{description}, and {more_desc}", merged)
            except Exception:  # noqa: BLE001
                continue
    return None


def _once(analysis, what: str, spec: Spec, make):
    """`make(spec)`, once per analysis: its conflicts often offer the same candidate (a
    fleet's joint request has one conflict per GPU that needs another platform)."""
    try:
        key = (what, spec)
        found = analysis.verified.get(key)
    except TypeError:  # a value that cannot be a key: resolve it every time
        return make(spec)
    if found is None:
        found = analysis.verified[key] = make(spec)
    return found


def _candidates(spec: Spec, p: Problem, a):
    """(description, changes) pairs for conflict `p`, nearest first: the moves of its own
    link (`_OWN_MOVES`), then those of the framework build."""
    own = _OWN_MOVES.get(p.kind)
    if own is not None:
        yield from own(spec, p)
    if p.kind == ConflictKind.PLATFORM_UNSUPPORTED:
        return  # nothing built for the platform runs there, whichever build or version
    yield from _framework_moves(spec, p, a)


def _platform_moves(spec: Spec, p: Problem):
    if p.hints.unbuildable_host:
        return  # no platform envbuild builds for runs on that GPU; which GPU instead is the user's choice
    if p.hints.platform:
        yield f"build for {p.hints.platform}", {"platform": p.hints.platform}
        return
    where = "under WSL2 on this Windows host" if spec.platform.startswith("win") else "on a Linux host with an NVIDIA GPU"
    yield f"build for linux-64 and run it {where}", {"platform": "linux-64"}


def _driver_moves(spec: Spec, p: Problem):
    if p.hints.driver and spec.driver:
        yield f"upgrade the host driver to >= {p.hints.driver}", {"driver": p.hints.driver}
    if spec.base_image:
        yield from _base_moves(spec, p)
    if p.hints.max_cuda and spec.cuda and not spec.frameworks:
        yield f"use CUDA {p.hints.max_cuda}, the newest this driver runs", {"cuda": str(p.hints.max_cuda)}


def _gpu_arch_moves(spec: Spec, p: Problem):
    if p.hints.driver_branch_max and spec.driver:
        yield f"use a driver of the R{p.hints.driver_branch_max} branch, {p.hints.driver}", {"driver": p.hints.driver}


def _python_versions(spec: Spec, p: Problem):
    for py in sorted(p.hints.pythons, key=parse_version, reverse=True)[:2]:
        yield f"use Python {py}", {"python": py}


def _python_moves(spec: Spec, p: Problem):
    yield from _python_versions(spec, p)
    installer = p.hints.installer
    if installer and spec.installer != installer:
        # a conda environment brings its own interpreter instead of the base image's python3;
        # pip's in-image installer runs on older python3 than conda's (installer_python)
        why = "whose environment brings its own Python" if installer == "conda" else \
            "whose in-image installer runs on that python3"
        yield f"install with {installer}, {why}", {"installer": installer}
    if p.hints.base_image and spec.base_image:
        yield "let envbuild choose a matching base image", {"base_image": None}


def _cudnn_moves(spec: Spec, p: Problem):
    if p.hints.cudnn:
        yield f"use cuDNN {p.hints.cudnn}", {"cudnn": p.hints.cudnn}
    yield "let the framework build choose cuDNN", {"cudnn": None}


def _base_moves(spec: Spec, p: Problem):
    if spec.base_image:
        yield "let envbuild choose a matching base image", {"base_image": None}
    if spec.base != "auto":
        yield "use the nvidia/cuda base family", {"base": "cuda"}


# The moves of each kind's own link, nearest first (the framework's moves follow).
_OWN_MOVES: dict[ConflictKind, Callable[[Spec, Problem], Iterator[tuple[str, dict]]]] = {
    ConflictKind.PLATFORM_UNSUPPORTED: _platform_moves,
    ConflictKind.DRIVER_TOO_OLD: _driver_moves,
    ConflictKind.GPU_ARCH_UNSUPPORTED: _gpu_arch_moves,
    ConflictKind.PYTHON_UNSUPPORTED: _python_moves,
    ConflictKind.NOT_LOCKABLE: _python_versions,
    ConflictKind.CUDNN_MISMATCH: _cudnn_moves,
    ConflictKind.BASE_IMAGE_CUDA_MISMATCH: _base_moves,
    ConflictKind.LIBRARY_ABI: _base_moves,
    ConflictKind.UNKNOWN_FACT: _base_moves,
}

# The kinds a CUDA pin can cause: dropping the pin lets envbuild choose the variant.
_PINNED_CUDA_KINDS = frozenset({ConflictKind.FRAMEWORK_CUDA_MISMATCH, ConflictKind.GPU_ARCH_UNSUPPORTED,
                                ConflictKind.DRIVER_TOO_OLD})


def _framework_moves(spec: Spec, p: Problem, a):
    """Move the framework build: its installer, its CUDA variant, its version, the CUDA pin."""
    outcome = next((o for o in a.outcomes if o.name == p.framework), None)
    if outcome is not None and spec.installer and p.hints.no_builds_for_installer:
        # The framework has no build at all for this installer: switching keeps the version.
        other = "pip" if spec.installer == "conda" else "conda"
        yield f"install with {other}", {"installer": other}
    if outcome is not None:
        yield from _variant_moves(spec, p, a, outcome, outcome.nearest)
        yield from _version_moves(spec, a, outcome, outcome.nearest)
    if spec.cuda and p.kind in _PINNED_CUDA_KINDS:
        yield "drop the CUDA pin and let envbuild choose the variant", {"cuda": None}
    if spec.installer and outcome is not None:
        other = "pip" if spec.installer == "conda" else "conda"
        yield f"install with {other}", {"installer": other}


def _local_of(spec: Spec, name: str) -> str | None:
    f = spec.framework(name)
    return parse_constraint(f.constraint).local if f and f.constraint else None


def _variant_moves(spec: Spec, p: Problem, a, outcome, nearest):
    """Keep the framework version, move its CUDA variant."""
    if nearest is None:
        return
    ix, req = a.ix, a.req
    same = [b for b in _by_version(ix, outcome.name).get(nearest.version, ())
            if spec.installer is None or b.installer == spec.installer]
    wanted = (req.cuda.version or CudaVersion(req.cuda.major, 0)) if req.cuda else nearest.cuda
    # Only variants that clear every other link of this build are worth a resolve: a
    # numerically near variant that lacks the GPU's kernels is no fix.
    passing = {b.cuda for b in same if checks.passes(b, req, ix, None)}
    # A driver limit means "not newer than": prefer the newest variant under it.
    limit = p.hints.max_cuda
    cudas = sorted(passing, key=lambda c: (abs(_num(c) - _num(wanted)), -_num(c)))
    if limit:
        cudas = [c for c in sorted(passing, reverse=True) if c <= limit]
    for cuda in cudas[:2]:  # leave room for a version move among the three fixes
        if req.cuda is not None and req.cuda.matches(cuda):
            continue
        changes: dict = {}
        local = _local_of(spec, outcome.name)
        if local is not None:
            changes[f"frameworks.{outcome.name}"] = f"{nearest.version}+{cuda_to_local(cuda)}"
        if spec.cuda or local is None:
            changes["cuda"] = str(cuda)
        label = next(b.variant for b in same if b.cuda == cuda)
        yield f"use {outcome.name} {nearest.version} for CUDA {cuda} ({label})", changes


def _by_version(ix, name: str) -> dict[str, list]:
    """The builds of framework `name` per version, best first (as in `ix.builds`)."""
    found = ix.memo.builds_by_version.get(name)
    if found is None:
        found = ix.memo.builds_by_version[name] = {}
        for b in ix.builds[name]:
            found.setdefault(b.version, []).append(b)
    return found


def _num(cuda: CudaVersion) -> float:
    return cuda.major + cuda.minor / 10


def _version_moves(spec: Spec, a, outcome, nearest):
    """Move the framework version to the nearest one that passes its own checks (newer
    releases first): first keeping every other pin, then also letting go of the CUDA pin,
    then of the installer."""
    # The moves do not depend on the conflict, and one framework may have dozens of
    # conflicts (a fleet's joint request, one per GPU): they are searched once per analysis
    # and spec (an equal one: each candidate of a fix search makes its own Spec object).
    found = a.version_moves.get(outcome.name)
    if found is None or found[1] is not nearest or found[0] != spec:
        found = a.version_moves[outcome.name] = (spec, nearest, list(_search_versions(spec, a, outcome, nearest)))
    yield from found[2]


def _search_versions(spec: Spec, a, outcome, nearest):
    ix = a.ix
    current = nearest.v if nearest is not None else None
    versions = ix.versions.get(outcome.name, [])
    if current is not None:
        newer = sorted((v for v in versions if parse_version(v) > current), key=parse_version)
        older = sorted((v for v in versions if parse_version(v) < current), key=parse_version, reverse=True)
        ordered = newer + older
    else:
        ordered = list(versions)
    local = _local_of(spec, outcome.name)
    by_version = _by_version(ix, outcome.name)
    relaxations = [(False, False, False)]
    if outcome.pin is not None:
        relaxations.append((True, False, False))
    if spec.installer:
        relaxations += [(False, True, False), (True, True, False)] if outcome.pin is not None else [(False, True, False)]
    if spec.cudnn:
        relaxations += [(True, False, True), (True, True, True)]
    for drop_cuda, drop_installer, drop_cudnn in relaxations:
        pin = None if drop_cuda else outcome.pin
        installer = None if drop_installer else spec.installer
        req = dataclasses.replace(a.req, cudnn=None) if drop_cudnn else a.req
        found = 0
        for version in ordered:
            builds = [b for b in by_version[version]
                      if (installer is None or b.installer == installer)
                      and (local is None or b.installer == "pip")]
            ok = next((b for b in builds if checks.passes(b, req, ix, pin)), None)
            if ok is None:
                continue
            changes: dict = {f"frameworks.{outcome.name}": version}
            what = f"use {outcome.name} {version}"
            if local is not None:
                changes[f"frameworks.{outcome.name}"] = f"{version}+{cuda_to_local(ok.cuda)}"
                what = f"use {outcome.name} {version}+{cuda_to_local(ok.cuda)}"
            if drop_cuda and spec.cuda:
                changes["cuda"] = str(ok.cuda)
                what += f" for CUDA {ok.cuda}"
            if drop_installer:
                changes["installer"] = ok.installer
                what += f" installed with {ok.installer}"
            if drop_cudnn:
                changes["cudnn"] = ok.cudnn
                what += f" with cuDNN {ok.cudnn}" if ok.cudnn else " with the cuDNN it brings"
            yield what, changes
            found += 1
            if found == 2:
                break
