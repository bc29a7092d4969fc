"""The platform link: is the build published for the platform asked for?"""
from __future__ import annotations

from envbuild import frameworks
from envbuild.core.values import ConflictKind
from envbuild.frameworks.build import Build
from envbuild.resolver import families
from envbuild.resolver.context import Index, fact
from envbuild.resolver.problem import Problem, unknown
from envbuild.resolver.request import Request


def platform(b: Build, req: Request, ix: Index) -> list[Problem]:
    plat = req.platform
    # per-platform facts of the release's family (matrices/family_rules.yaml): no GPU build
    # there at all, or a narrower Python range than the release row's
    ruled = families.platform_problems(ix, b.framework, b.v, f"{b.framework} {b.version}", plat, req.python)
    if any(p.kind == ConflictKind.PLATFORM_UNSUPPORTED for p in ruled):
        return ruled
    plugin = frameworks.get(b.framework)
    if plat == "win-64":
        windows = plugin.windows_problem(b)
        if windows is not None:
            why, fact_text = windows
            return [Problem(ConflictKind.PLATFORM_UNSUPPORTED, why, (fact(fact_text, b.row),), framework=b.framework)]
        if plugin.shape.lists_platforms and plat not in b.platforms:
            return ruled + [unknown(f"the matrix does not list a win-64 build of {b.label}", ("platform",),
                                    framework=b.framework)]
        return ruled
    if unpublished(b, plat):
        return [Problem(ConflictKind.PLATFORM_UNSUPPORTED,
                        f"{b.label} is published only for {', '.join(b.platforms)}; you asked for {plat}",
                        (fact(f"platforms: {list(b.platforms)}", b.row),), framework=b.framework)]
    if plat not in b.platforms:
        return [unknown(f"the matrix does not say whether {b.label} exists for {plat}", ("platform",),
                        framework=b.framework)]
    return ruled


def unpublished(b: Build, plat: str) -> bool:
    """The rows list where `b` is published, and `plat` (not Windows, which has rules of
    its own) is not among them: a hard platform problem whatever else is found."""
    return plat != "win-64" and plat not in b.platforms and frameworks.get(b.framework).shape.lists_platforms


def wheel_platform(b: Build, req: Request) -> list[Problem]:
    """A pip build whose artefacts have no wheel at all for the platform cannot be installed
    there. (PyPI's torch is one CUDA build; the other variants live on PyTorch's own index,
    so only the PyPI one is judged by PyPI's files.)"""
    if b.wheels is None or b.wheels.inferred or req.platform.startswith("osx"):
        return []  # macOS: platform() already says NVIDIA ships no CUDA there
    if b.wheels.pythons(req.platform) is not None:
        return []
    have = ", ".join(p for p in b.wheels.by_platform) or "no platform"
    return [Problem(ConflictKind.PLATFORM_UNSUPPORTED,
                    f"{b.framework} {b.version} has no {req.platform} wheel ({b.wheels.label} has wheels for {have}), "
                    f"so the platform or the {b.framework} version must move",
                    b.wheels.facts(req.platform), framework=b.framework)]
