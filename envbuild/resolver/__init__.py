"""`resolve(spec) -> Resolution`: check every link of the requested GPU stack against the
matrices, complete what the spec left open, and explain each conflict with fixes.

Steps: read the spec into comparable values (request.py), evaluate every build of
each framework against the checks (checks.py), choose the newest joint combination
(complete.py), choose or check the base image (base.py), then word conflicts and offer
fixes that were themselves resolved and pass (fixes.py).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from envbuild.model import Conflict, Resolution, ResolvedFramework, ResolvedStack, Spec, Warning
from envbuild.resolver import base as base_image
from envbuild.matrix import lookup
from envbuild.resolver.builds import Build
from envbuild.resolver.checks import Problem, runs_on
from envbuild.resolver.complete import Choice, Outcome, combine, evaluate
from envbuild.resolver.context import Index, fact, index, mm
from envbuild.resolver.request import Request, read_request
from envbuild.versions import cuda_to_local, parse_driver, parse_version

__all__ = ["resolve"]

DEFAULT_PYTHON = "3.12"  # only when nothing in the request constrains Python
# Conflicts that make every other answer moot come first.
_KIND_ORDER = ("platform_unsupported", "driver_too_old", "framework_cuda_mismatch", "gpu_arch_unsupported",
               "python_unsupported", "cudnn_mismatch", "base_image_cuda_mismatch", "library_abi", "unknown_fact")


@dataclass
class Analysis:
    req: Request
    ix: Index
    outcomes: list[Outcome]
    problems: list[Problem] = field(default_factory=list)  # hard
    warnings: list[Problem] = field(default_factory=list)
    stack: ResolvedStack | None = None


def resolve(spec: Spec, matrices=None) -> Resolution:
    """Resolve `spec` against `matrices` (default: the bundled matrices)."""
    return _resolve(spec, matrices, with_fixes=True)


def _resolve(spec: Spec, matrices, with_fixes: bool) -> Resolution:
    if matrices is None:
        from envbuild import matrix

        matrices = matrix.load()
    ix = index(matrices)
    a = analyse(spec, ix)
    conflicts = []
    for p in a.problems:
        fixes = ()
        if with_fixes:
            from envbuild.resolver.fixes import fixes_for

            fixes = tuple(fixes_for(spec, p, a, lambda s: _resolve(s, matrices, with_fixes=False)))
        conflicts.append(Conflict(p.kind, p.message, tuple(dict.fromkeys(p.facts)), fixes))
    warnings = tuple(Warning(p.kind, p.message, tuple(dict.fromkeys(p.facts))) for p in _dedupe(a.warnings))
    return Resolution(spec=spec, verdict="conflict" if conflicts else "ok", resolved=a.stack,
                      conflicts=tuple(conflicts), warnings=warnings, matrix_version=matrices.version)


def _dedupe(problems: list[Problem]) -> list[Problem]:
    seen, out = set(), []
    for p in problems:
        if (p.kind, p.message) not in seen:
            seen.add((p.kind, p.message))
            out.append(p)
    return out


def analyse(spec: Spec, ix: Index) -> Analysis:
    a = _analyse(spec, ix)
    # A pip venv runs the base image's python3. When the newest builds need a Python that
    # no fitting image has, the newest builds for a Python an image does have win.
    retry = next((p for p in a.problems if p.hints.get("base_pythons")), None)
    if retry is not None and not spec.python:
        for py in retry.hints["base_pythons"]:
            again = _analyse(spec.with_changes({"python": py}), ix)
            if not again.problems:
                return again
    return a


def _analyse(spec: Spec, ix: Index) -> Analysis:
    req = read_request(spec, ix)
    family_check = base_image.family_filter(req, ix)
    outcomes = [evaluate(name, c, local, req, ix, family_check) for name, c, local in req.frameworks]
    a = Analysis(req, ix, outcomes)
    for o in outcomes:
        a.problems += o.problems
        if o.unknown is not None:
            (a.problems if spec.strict else a.warnings).append(o.unknown)
    if not outcomes:
        a.problems += _bare_cuda(req, ix)
    choice = None
    if not a.problems:
        choice, apart = combine(outcomes, req)
        a.problems += apart
    if choice is not None and not a.problems:
        _complete(a, choice)
    a.problems = sorted(_dedupe(a.problems), key=lambda p: _KIND_ORDER.index(p.kind) if p.kind in _KIND_ORDER else 99)
    return a


def _bare_cuda(req: Request, ix: Index) -> list[Problem]:
    """A CUDA-only request (no framework): the toolkit against platform, driver and GPUs."""
    out: list[Problem] = []
    if req.platform.startswith("osx"):
        return [Problem("platform_unsupported", f"NVIDIA ships no CUDA for macOS ({req.platform}), so the platform "
                        f"must move to linux-64")]
    if req.cuda is None:
        return out
    cuda = req.cuda.short if req.cuda.minor is not None else _newest_minor(ix, req.cuda.major)
    if cuda is None:
        return out
    if req.driver:
        have = ix.driver_cuda(req.driver, req.platform)
        need = ix.native_need(cuda)
        if need and parse_driver(req.driver) < parse_driver(need):
            out.append(Problem(
                "driver_too_old",
                f"a CUDA {cuda} image declares cuda>={cuda}, which the NVIDIA container toolkit checks against the host "
                f"driver; driver {req.driver} supports CUDA up to {have.native_cuda or 'none in the matrix'}, so upgrade "
                f"the driver to >= {need} or use CUDA <= {have.native_cuda}",
                (fact(have.rule, None),), hints={"driver": need, "max_cuda": have.native_cuda}))
    found = ix.toolkit_sms(cuda)
    for g in req.gpus:
        if found is not None and not runs_on(found[0], g.cc):
            out.append(Problem("gpu_arch_unsupported",
                               f"CUDA {cuda} cannot generate code for your {g.label}, so the CUDA version must move",
                               (fact(f"CUDA {cuda} architectures", found[1]),), hints={"sm": g.sm}))
    return out


def _newest_minor(ix: Index, major: int) -> str | None:
    minors = [m for m in ix.minors if parse_version(m).release[0] == major]
    return minors[-1] if minors else None


def _complete(a: Analysis, choice: Choice) -> None:
    req, ix = a.req, a.ix
    builds = list(choice.builds.values())
    for o in a.outcomes:
        b = choice.builds.get(o.name)
        if b is not None:
            a.warnings += o.soft.get(id(b), [])
    python = choice.python or req.python or DEFAULT_PYTHON
    cuda = _env_cuda(req, builds, ix)
    a.warnings += _minor_compat_notes(req, ix, builds)
    image, problems = base_image.choose(req, ix, builds, cuda, python, choice.installer)
    if image is not None and not req.python and base_image.binds_python(image, choice.installer):
        if image.python:
            # The environment runs the image's own Python (a framework image's, or the python3
            # a pip venv is made over), so that is the Python to lock for.
            python = mm(parse_version(image.python))
        else:
            # The environment is built on the image's own Python, which the catalog does not
            # record: the lock would assume a Python the image may not have.
            problems.append(Problem(
                "unknown_fact",
                f"the matrix does not record the Python of {image.ref}; envbuild assumed Python {python}, "
                f"so pin `python:` to the image's Python (or choose base: cuda)",
                soft=True))
    for p in problems:
        hard = not p.soft or (req.spec.strict and p.kind == "unknown_fact")
        (a.problems if hard else a.warnings).append(p)
    frameworks = []
    for name, _c, _l in req.frameworks:
        b = choice.builds.get(name)
        if b is not None:
            frameworks.append(_resolved(b))
    have = ix.driver_cuda(req.driver, req.platform) if req.driver else None
    a.stack = ResolvedStack(
        frameworks=tuple(frameworks), cuda=cuda,
        cudnn=req.spec.cudnn or next((b.cudnn for b in builds if b.cudnn), None),
        python=python, driver=req.driver, max_driver_cuda=have.cuda if have else None,
        driver_cuda=have.native_cuda if have else None,
        gpus=tuple(g.resolved for g in req.gpus), platform=req.platform, installer=choice.installer,
        channels=_channels(req, builds, choice.installer), base_image=image)


def _env_cuda(req: Request, builds: list[Build], ix: Index) -> str | None:
    """The environment's CUDA: what a build that loads the system CUDA needs, else the
    spec's pin, else the first framework's variant."""
    system = next((b for b in builds if not b.bundles_runtime), None)
    if req.cuda is not None and req.cuda.minor is not None:
        return req.cuda.short
    if system is not None:
        return system.cuda
    if builds:
        return builds[0].cuda
    if req.cuda is not None:
        return _newest_minor(ix, req.cuda.major)
    return None


def _minor_compat_notes(req: Request, ix: Index, builds: list[Build]) -> list[Problem]:
    if not req.driver:
        return []
    out = []
    have = ix.driver_cuda(req.driver, req.platform)
    for b in builds:
        if have.native_cuda and parse_version(b.cuda) > parse_version(have.native_cuda):
            out.append(Problem("minor_version_compat",
                               f"driver {req.driver} runs {b.framework}'s CUDA {b.cuda} through minor-version "
                               f"compatibility only (natively up to {have.native_cuda}); PTX JIT of code newer than "
                               f"CUDA {have.native_cuda} will fail on it", (fact(have.rule, None),)))
    return out


def _channels(req: Request, builds: list[Build], installer: str) -> tuple[str, ...]:
    if req.spec.channels:
        return req.spec.channels
    if installer != "conda":
        return ()
    out: list[str] = []
    for b in builds:
        out += [c for c in b.channels if c not in out]
    return tuple(out or ("conda-forge",))


def _resolved(b: Build) -> ResolvedFramework:
    conda: tuple[str, ...] = ()
    pip: tuple[str, ...] = ()
    index_url = None
    local = f"+{cuda_to_local(b.cuda)}" if b.package.startswith("+") else ""
    if b.framework == "pytorch":
        if b.installer == "conda":
            name, _, ver = b.package.partition("=")
            if not ver:
                pin = name  # a feature package of the 1.0.0 era, e.g. `cuda80`
            else:
                pin = f"{name}=={ver}" if name == "pytorch-cuda" else f"{name}=={b.cuda}.*"
            conda = (f"pytorch=={b.version}=*cuda*", pin) + tuple(f"{n}=={v}" for n, v in b.companions)
        else:
            pip = (f"torch=={b.version}{local}",) + tuple(f"{n}=={v}{local}" for n, v in b.companions)
            index_url = b.index_url
    elif b.framework == "tensorflow":
        pip = (f"tensorflow[{b.pip_extra}]=={b.version}" if b.pip_extra else f"tensorflow=={b.version}",)
    elif b.framework == "jax":
        pip = (f"jax[{b.pip_extra}]=={b.version}",)
    elif b.framework == "rapids":
        if b.installer == "conda":
            conda = (f"rapids=={b.version}.*", f"cuda-version=={b.cuda}")
        else:
            pip = tuple(f"{n}-cu{b.cuda_major}=={b.version}.*" for n in ("cudf", "cuml"))
            index_url = "https://pypi.nvidia.com"
    elif b.framework == "cupy":
        # a bare major ("13") is a CuPy series: any release of it
        release = f"{b.package}=={b.version}.*" if "." not in b.version else f"{b.package}=={b.version}"
        if b.installer == "conda":
            # conda-forge's cupy has no CPU build; the pin selects its CUDA variant
            cuda = f"cudatoolkit=={b.cuda}.*" if b.cuda_major < 12 else f"cuda-version=={b.cuda}"
            conda = (release, cuda)
        else:
            pip = (release,)
    return ResolvedFramework(name=b.framework, version=b.version, installer=b.installer, cuda=b.cuda,
                             conda_specs=conda, pip_requirements=pip, pip_index_url=index_url,
                             archs=lookup.spelled_out_archs(b.framework, b.archs), cudnn=b.cudnn)
