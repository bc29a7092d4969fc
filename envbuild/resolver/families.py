"""Family rules (matrices/family_rules.yaml): facts about a range of a framework's releases.

They decide what can be decided without a release row: a platform with no GPU build, the
Pythons published on a platform, and for eras older than the rows the oldest GPU, the CUDA
range and the cuDNN floor. The per-platform rules also apply to builds that have rows.
"""
from __future__ import annotations

from packaging.version import Version

from envbuild.core import specifiers
from envbuild.core.values import ComputeCapability, ConflictKind, CudaVersion
from envbuild.core.versions import parse_version
from envbuild.frameworks.build import known_pythons
from envbuild.matrix import tables as t
from envbuild.resolver.context import Index, fact
from envbuild.resolver.problem import Hints, Problem

_NO_GPU = {
    "osx": "NVIDIA ships no CUDA for macOS, so the platform must move to linux-64 (or linux-aarch64)",
    "win": "use WSL2 (platform linux-64)",
}


def rules_for(ix: Index, framework: str, version: Version | None, platform: str | None) -> list[t.FamilyRule]:
    """The rules that cover `framework` `version` on `platform` (None: rules for every
    platform only). A rule with a release range needs a known version."""
    key = (framework, version, platform)
    found = ix.memo.family_rules.get(key)
    if found is None:
        found = ix.memo.family_rules[key] = [r for r in ix.m.family_rules if _covers(r, framework, version, platform)]
    return found


def _covers(r: t.FamilyRule, framework: str, version: Version | None, platform: str | None) -> bool:
    if r.framework not in ("*", framework):
        return False
    if r.platform and r.platform != platform:
        return False
    if not r.releases:
        return True
    return version is not None and specifiers.admits(r.releases, str(version), True)


def platform_problems(ix: Index, framework: str, version: Version | None, label: str, platform: str,
                      python: str | None):
    """No GPU build on `platform`, or no wheel for `python` there."""
    out = []
    rules = rules_for(ix, framework, version, platform)
    # a framework's own rule outranks the rule for every framework (TensorFlow 1.0/1.1 on macOS)
    has_gpu = any(r.gpu is True and r.framework == framework and r.platform == platform for r in rules)
    for r in rules:
        if r.platform != platform:
            continue
        if r.gpu is False and not (has_gpu and r.framework == "*"):
            why = r.advice or _NO_GPU.get(platform[:3], "use platform linux-64")
            if platform.startswith("osx"):
                message = f"{label} has no CUDA build for macOS ({platform}): {why}"
            else:
                message = f"{label} has no GPU build for {platform}; {why}"
            out.append(Problem(ConflictKind.PLATFORM_UNSUPPORTED, message, (fact(f"{framework} {r.releases or 'every release'}: "
                               f"no GPU build for {platform}", r),), framework=framework))
            return out
        if r.python and python and not specifiers.admits(r.python, f"{python}.0", True):
            pythons = _pythons(r.python)
            out.append(Problem(
                ConflictKind.PYTHON_UNSUPPORTED,
                f"{label} is published on {platform} for Python {_span(pythons) or r.python}; you asked for Python "
                f"{python}, so Python or the {framework} version must move",
                (fact(f"{framework} {r.releases} on {platform}: python {r.python}", r),), framework=framework,
                hints=Hints(pythons=frozenset(pythons))))
    return out


def era_gpu_floors(ix: Index, framework: str, version: Version | None) -> tuple[str, ...]:
    """The lowest compute capabilities the era rules for `framework` `version` state: all
    that `era_problems(..., gpus_only=True)` reads of the release."""
    return tuple(r.min_compute_capability for r in rules_for(ix, framework, version, None)
                 if not r.platform and r.min_compute_capability)


def era_problems(ix: Index, framework: str, version: Version | None, label: str, req, pin,
                 gpus_only: bool = False, gpus=None):
    """Rules of an era: the oldest GPU, the CUDA range (against `pin`, the CUDA the request
    pins: a CudaPin, maybe a major alone) and the cuDNN floor of its GPU builds.
    With `gpus_only`, just the oldest GPU (for release rows that do not state one). `gpus`
    are the GPUs judged, by default the request's known ones."""
    out = []
    for r in rules_for(ix, framework, version, None):
        if r.platform:
            continue
        if gpus_only and not r.min_compute_capability:
            continue
        if r.min_compute_capability:
            low = ComputeCapability.parse(r.min_compute_capability)
            for g in req.known_gpus if gpus is None else gpus:
                if g.cc < low:
                    out.append(Problem(
                        ConflictKind.GPU_ARCH_UNSUPPORTED,
                        f"{label} needs compute capability >= {r.min_compute_capability}; your {g.label} is older, "
                        f"so the GPU must move", (fact(f"{framework} {r.releases}: min compute capability "
                                                      f"{r.min_compute_capability}", r),), framework=framework))
        if gpus_only:
            continue
        if pin is not None and (r.cuda_min or r.cuda_max):
            low_ok = not r.cuda_min or _at_least(pin, CudaVersion.parse(r.cuda_min))
            high_ok = not r.cuda_max or _at_most(pin, CudaVersion.parse(r.cuda_max))
            if not (low_ok and high_ok):
                span = f"CUDA {r.cuda_min or '?'}..{r.cuda_max or 'newer'}"
                out.append(Problem(
                    ConflictKind.FRAMEWORK_CUDA_MISMATCH,
                    f"{label}: GPU builds of {framework} {r.releases} cover {span}; you asked for CUDA {pin.short}, so the "
                    f"CUDA version or the {framework} version must move",
                    (fact(f"{framework} {r.releases}: {span}", r),), framework=framework))
        if r.local_ptxas and pin is not None and pin.version is not None:
            out += ptxas_problems(ix, r, label, pin.version, req.known_gpus if gpus is None else gpus)
        if r.cudnn_min and req.cudnn is not None:
            if tuple(req.cudnn) < parse_version(r.cudnn_min).release[:len(req.cudnn)]:
                out.append(Problem(
                    ConflictKind.CUDNN_MISMATCH,
                    f"{label} needs cuDNN >= {r.cudnn_min}; you asked for cuDNN {'.'.join(map(str, req.cudnn))}, so "
                    f"cuDNN must move up or {framework} down",
                    (fact(f"{framework} {r.releases}: cudnn_min {r.cudnn_min}", r),), framework=framework,
                    hints=Hints(cudnn=r.cudnn_min)))
    return out


def local_ptxas_rule(ix: Index, framework: str, version: Version | None) -> t.FamilyRule | None:
    """The rule saying that `framework` `version` JIT-compiles with the local CUDA toolkit's
    ptxas (the caller knows whether the build loads that toolkit)."""
    return next((r for r in rules_for(ix, framework, version, None) if r.local_ptxas and not r.platform), None)


def ptxas_problems(ix: Index, rule: t.FamilyRule, label: str, cuda: CudaVersion, gpus) -> list:
    """The GPUs whose exact architecture the ptxas of the local CUDA `cuda` toolkit does not
    know. Binary compatibility does not help here: XLA asks ptxas for the GPU's own sm_XY
    (Ada's sm_89 and Hopper's sm_90 need the ptxas of CUDA 11.8)."""
    known = ix.toolkit_sms(cuda)
    if known is None:
        return []  # no architecture list for that CUDA: the toolkit link already says so
    sms, row = known
    out = []
    for g in gpus:
        if g.sm in sms or not ix.toolkit_runs_on(cuda, g.cc):
            continue  # known to its ptxas, or no code of that toolkit runs on it (the toolkit link says so)
        first = ix.min_cuda_for_sm(g.sm)
        need = f"the ptxas of CUDA >= {first}" if first else "a ptxas that knows it"
        facts = (fact(f"CUDA {cuda.major_minor} compiles for sm_{', sm_'.join(str(s) for s in sorted(sms))}", row),
                 fact(f"{rule.framework} {rule.releases or '(every release)'} JIT-compiles with the local toolkit's "
                      f"ptxas", rule))
        if rule.local_ptxas == "slow":
            out.append(Problem(
                ConflictKind.PTX_JIT,
                f"{label} JIT-compiles XLA kernels with the ptxas of the local CUDA {cuda}, which does not know "
                f"sm_{g.sm} of your {g.label}; XLA falls back to the driver's PTX JIT (slow), so install {need}",
                facts, soft=True, framework=rule.framework))
        else:
            out.append(Problem(
                ConflictKind.GPU_ARCH_UNSUPPORTED,
                f"{label} JIT-compiles its kernels with the ptxas of the local CUDA {cuda}, which does not know "
                f"sm_{g.sm} of your {g.label} (the driver fallback fails with CUDA_ERROR_NOT_FOUND), so the local "
                f"CUDA toolkit must move to {need}",
                facts, framework=rule.framework))
    return out


def _at_least(pin, floor: CudaVersion) -> bool:
    """Is the pinned CUDA at or above `floor`? A major alone ("11") covers every 11.x."""
    return pin.major >= floor.major if pin.version is None else pin.version >= floor


def _at_most(pin, ceiling: CudaVersion) -> bool:
    """Is the pinned CUDA at or below `ceiling`? A major alone ("11") covers every 11.x."""
    return pin.major <= ceiling.major if pin.version is None else pin.version <= ceiling


def _pythons(spec: str) -> list[str]:
    return [p for p in known_pythons() if specifiers.admits(spec, f"{p}.0", True)]


def _span(pythons: list[str]) -> str:
    if not pythons:
        return ""
    return pythons[0] if len(pythons) == 1 else f"{pythons[0]}-{pythons[-1]}"
