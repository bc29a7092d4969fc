"""Turn a solver failure into a conflict in resolve's format (kind, one-sentence message,
fixes). The solver's tree is accurate but long; instead of parsing its text, the failing
request is re-solved with one constraint relaxed at a time, and the first relaxation that
solves names the cause. Every fix offered was itself solved."""
from __future__ import annotations

import dataclasses
import re

from envbuild import frameworks
from envbuild.core.model import Conflict, Fix
from envbuild.core.package_sets import package_frozenset
from envbuild.core.values import ConflictKind
from envbuild.lock.gpu import dependency_name, framework_packages, is_gpu_build
from envbuild.lock.request import SolveRequest, spec_name

UNLIMITED_CUDA = "999"  # a driver that runs every CUDA: isolates the driver's limit


def _major_minor(version: str) -> str:
    return ".".join(version.split(".")[:2])


def _framework_spec(request: SolveRequest) -> tuple[str, str] | None:
    """(framework, its main MatchSpec) for the first GPU framework of the request."""
    for framework in request.gpu_frameworks:
        names = framework_packages(framework)
        for spec in request.specs:
            if spec_name(spec) in names:
                return framework, spec
    return None


def _cuda_selectors() -> tuple[str, ...]:
    """The records whose version is the CUDA a solution selected, in the order to trust them:
    the virtual-package pin, a framework's own selector (the plugins' `lock.cuda_selectors`),
    then the toolkit packages."""
    return ("cuda-version", *(n for p in frameworks.all() for n in p.lock.cuda_selectors), "cudatoolkit", "cuda-cudart")


def _cuda_variant(packages) -> str | None:
    """major.minor of the CUDA a solution selected, from its variant packages."""
    by_name = {p.name.normalized: p for p in packages}
    for name in _cuda_selectors():
        if name in by_name:
            return _major_minor(str(by_name[name].version))
    return None


def _cuda_requirements(packages) -> list[str]:
    """`pkg version needs __cuda SPEC` for the solution's records that limit __cuda."""
    found = []
    for p in packages:
        for text in list(p.depends) + list(p.constrains):
            if dependency_name(text) == "__cuda":
                spec = text.split(" ", 1)[1] if " " in text else "*"
                found.append(f"{p.name.normalized} {p.version} needs __cuda {spec}")
    return found


async def _try(solver, request: SolveRequest, **changes):
    from rattler.exceptions import SolverError

    try:
        return await solver.solve(request, **changes)
    except SolverError:
        return None  # the caller's first SolverError already asked loop.settle_at_exit


async def diagnose(solver, request: SolveRequest, solver_text: str) -> Conflict:
    platform = request.platform
    without_cuda_pins = tuple(s for s in request.specs if spec_name(s) not in package_frozenset("cuda_pin"))
    virtual = {p.name: p for p in request.virtual_packages}
    target_cuda = virtual["__cuda"].version if "__cuda" in virtual else None
    found = _framework_spec(request)

    # 1. The target driver's CUDA is too old for what was asked.
    if target_cuda:
        raised = tuple(dataclasses.replace(p, version=UNLIMITED_CUDA) if p.name == "__cuda" else p
                       for p in request.virtual_packages)
        solution = await _try(solver, request, virtual_packages=raised)
        if solution is not None:
            needs = _cuda_requirements(solution)
            fixes = [Fix("upgrade the target driver to one that supports the locked CUDA "
                         f"({'; '.join(needs) or 'see --verbose'})")]
            older = await _try(solver, request, specs=without_cuda_pins, constraints=())
            if older is not None and _cuda_variant(older):
                fixes.append(Fix(f"use CUDA {_cuda_variant(older)}, which the target driver runs",
                                 {"cuda": _cuda_variant(older)}))
            return Conflict(
                kind=ConflictKind.DRIVER_TOO_OLD,
                message=f"the target driver supports CUDA up to {target_cuda} (__cuda={target_cuda}) but on {platform} "
                        f"{', '.join(needs) or 'the solution needs a newer __cuda'}; the driver or the CUDA version must move",
                fixes=tuple(fixes),
            )

    # 2. The framework has no GPU build for the pinned CUDA variant.
    if found and (len(without_cuda_pins) < len(request.specs) or request.constraints):
        solution = await _try(solver, request, specs=without_cuda_pins, constraints=())
        if solution is not None and found:
            framework, fspec = found
            variants = await _variants(solver, request, fspec, framework)
            cuda = _cuda_variant(solution)
            asked = ", ".join(s for s in request.specs if spec_name(s) in package_frozenset("cuda_pin")) or \
                ", ".join(request.constraints)
            fixes = (Fix(f"use CUDA {cuda}", {"cuda": cuda}),) if cuda else ()
            gap = _missing_candidates(solver_text)
            if gap and gap[0] not in framework_packages(framework):
                # the gap is further down (e.g. libcusparse -> cuda-version): name it, not the framework
                who, version, needs = gap
                return Conflict(
                    kind=ConflictKind.LIBRARY_ABI,
                    message=f"{who} {version} needs {needs}, for which the channels hold no candidates on {platform} "
                            f"next to the requested {asked}; the CUDA version or the channels must move",
                    fixes=fixes,
                )
            return Conflict(
                kind=ConflictKind.FRAMEWORK_CUDA_MISMATCH,
                message=f"{fspec} has GPU builds on {platform} only for {variants or 'other CUDA variants'}, "
                        f"not for the requested {asked}; the CUDA version or the {framework} version must move",
                fixes=fixes,
            )

    # 3. Python.
    python_specs = [s for s in request.specs if spec_name(s) == "python"]
    if python_specs:
        solution = await _try(solver, request, specs=tuple(s for s in request.specs if spec_name(s) != "python"))
        if solution is not None:
            chosen = next((_major_minor(str(p.version)) for p in solution if p.name.normalized == "python"), None)
            what = found[1] if found else "the requested packages"
            return Conflict(
                kind=ConflictKind.PYTHON_UNSUPPORTED,
                message=f"{what} has no build on {platform} for {python_specs[0]} in the channels; "
                        f"the Python version must move" + (f" (it solves with Python {chosen})" if chosen else ""),
                fixes=(Fix(f"use Python {chosen}", {"python": chosen}),) if chosen else (),
            )

    # 4. Only CPU builds of the framework exist: the GPU pin is what fails.
    if found:
        framework, fspec = found
        version_records = await solver.query(request, _without_build(fspec))
        gpu = [r for r in version_records if is_gpu_build(framework, str(r.build), tuple(r.depends))]
        if not gpu:
            cpu_only = f"only CPU builds of {spec_name(fspec)}" if version_records else f"no {spec_name(fspec)} build matching {fspec}"
            return Conflict(
                kind=ConflictKind.FRAMEWORK_CUDA_MISMATCH,
                message=f"the channels hold {cpu_only} for {platform}; envbuild does not fall back to a CPU build, "
                        f"so the channels, the platform or the {framework} version must move",
                fixes=(Fix("add a channel that publishes CUDA builds for this platform (e.g. conda-forge)"),),
            )

    # 5. The target's C library.
    if "__glibc" in virtual and "__glibc" in solver_text:
        return Conflict(
            kind=ConflictKind.PLATFORM_UNSUPPORTED,
            message=f"a package needs a newer glibc than the target's {virtual['__glibc'].version} on {platform}; "
                    f"the base image OS or the package version must move",
        )

    gap = _missing_candidates(solver_text)
    if gap:
        who, version, needs = gap
        return Conflict(
            kind=ConflictKind.LIBRARY_ABI,
            message=f"{who} {version} needs {needs}, for which the channels hold no candidates on {platform} "
                    f"with the requested pins (run with --verbose for the solver's explanation)",
        )
    first = next((line.strip() for line in solver_text.splitlines() if line.strip()), "the solver found no solution")
    return Conflict(
        kind=ConflictKind.LIBRARY_ABI,
        message=f"the packages' own requirements conflict on {platform}: {first} (run with --verbose for the solver's explanation)",
    )


_REQUIRES = re.compile(r"([\w.-]+) (\S+) would require\s+")
_NO_CANDIDATES = ", for which no candidates were found"


def _missing_candidates(solver_text: str) -> "tuple[str, str, str] | None":
    """(package, version, requirement) of the deepest 'X V would require R, for which no
    candidates were found' in the solver's explanation."""
    text = " ".join(re.sub(r"[└├│─]", " ", solver_text).split())
    end = text.rfind(_NO_CANDIDATES)
    if end < 0:
        return None
    requires = list(_REQUIRES.finditer(text, 0, end))
    if not requires:
        return None
    last = requires[-1]
    return last.group(1), last.group(2), text[last.end():end]


def _without_build(fspec: str) -> str:
    """fspec's name and version, without its build pin."""
    from rattler import MatchSpec

    version = MatchSpec(fspec).version
    return f"{spec_name(fspec)} {version}" if version else spec_name(fspec)


async def _variants(solver, request: SolveRequest, fspec: str, framework: str) -> str:
    """The CUDA dependencies of the framework's GPU builds at the requested version."""
    records = await solver.query(request, fspec)
    seen: list[str] = []
    for record in records:
        for dep in record.depends:
            name = dependency_name(dep)
            if name in package_frozenset("cuda_dependency") and name != "__cuda" and dep not in seen:
                seen.append(dep)
    return ", ".join(seen)
