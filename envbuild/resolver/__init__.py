"""`resolve(spec) -> Resolution`: check every link of the requested GPU stack against the
matrices, complete what the spec left open, and explain each conflict with fixes.

Steps: read the spec into comparable values (request.py), evaluate every build of
each framework against the checks (checks/, one module per link), choose the newest joint combination
(complete.py), choose or check the base image (base.py), then word conflicts and offer
fixes that were themselves resolved and pass (fixes.py).

The verdict: `conflict` when a link fails; else `unverified` when a link could not be
checked because a fact is unknown (problem.unknown: a release, GPU, label, arch list or
base Python the matrices do not know, or a fact of a base image outside the catalog that
nothing states and the image did not show); else `ok`.

Host or image (`Spec.image_build`): a request that names no image is judged as the stack
runs on a host, with the Python of the frameworks' own builds. The constraints of building
an image (the base's python3, the in-image installer's Python floor) apply only to an
image request; for a host request that an image build could not make as asked, the image
build's conflict is a warning (`image_build`) with its fixes.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from envbuild import frameworks, matrix
from envbuild.core.model import (BUILD_PLATFORMS, Conflict, Fact, Resolution, ResolvedFramework, ResolvedStack, Spec,
                            Unchecked, Warning)
from envbuild.core.values import ConflictKind, CudaVersion, major_minor
from envbuild.core.versions import parse_version
from envbuild.frameworks.build import Build
from envbuild.resolver import base as base_image
from envbuild.resolver import checks, families, request
from envbuild.resolver.complete import Choice, Outcome, combine, evaluate
from envbuild.resolver.context import Index, fact, index, runs_on
from envbuild.resolver.fixes import fixes_for
from envbuild.resolver.gpu_driver import driver_gpu_problems
from envbuild.resolver.named_base import with_named_base
from envbuild.resolver.problem import Hints, Problem
from envbuild.resolver.request import Request, read_request

__all__ = ["resolve", "other_platforms"]

DEFAULT_PYTHON = "3.12"  # only when nothing in the request constrains Python


@dataclass
class Analysis:
    """Everything one pass over a request found: outcomes per framework, problems, the stack."""

    req: Request
    ix: Index
    outcomes: list[Outcome]
    problems: list[Problem] = field(default_factory=list)  # hard
    warnings: list[Problem] = field(default_factory=list)  # soft: unknown facts (unchecked links) among them
    stack: ResolvedStack | None = None
    joint: bool = False  # a fleet's joint request: see `resolve`
    image: bool = True  # False: the environment is installed on a host, not built on a base image
    image_problems: bool = False  # a host request whose image build would meet problems
    version_moves: dict = field(default_factory=dict, repr=False)  # fixes.py: framework -> its version moves
    verified: dict = field(default_factory=dict, repr=False)  # fixes.py: a candidate's resolution and analysis


def resolve(spec: Spec, matrices=None, *, fixes: bool = True, joint: bool = False, read_base=None,
            image: bool = True) -> Resolution:
    """Resolve `spec` against `matrices` (default: the bundled matrices). `fixes=False`
    skips the search for verified fixes, for a caller that shows none. `joint=True`: the
    spec is a fleet's joint request, the union of GPUs that sit on different hosts with
    their oldest driver; whether each host's driver drives its GPU is left to the targets.
    `read_base(ref, platform)` reads what a base image outside the catalog carries
    (`envbuild.image.facts.read`); without it only the facts the spec states are known.
    `image=False`: the environment is installed on a host (`envbuild env`), so no base
    image is chosen and nothing is bound to an image's Python."""
    if matrices is None:
        matrices = matrix.load()
    return _resolve(spec, with_named_base(matrices, spec, read=read_base), with_fixes=fixes, joint=joint,
                    image=image)


def other_platforms(spec: Spec, resolution: Resolution, *, read_base=None) -> dict[str, Resolution]:
    """The resolution of each other platform the spec's lock covers (target.platforms),
    each resolved on its own: a lock of several platforms locks each from its own."""
    return {platform: resolve(spec.for_platform(platform), read_base=read_base)
            for platform in spec.lock_platforms if platform != resolution.resolved.platform}


def _resolve(spec: Spec, matrices, with_fixes: bool, joint: bool = False, image_note: bool = True,
             image: bool = True) -> Resolution:
    """`image_note=False`: without the host request's note on its image build (a fix search
    asks only whether a candidate resolves). `image=False`: see `resolve`."""
    matrices = with_named_base(matrices, spec)  # a fix that names another base image
    ix = index(matrices)
    a = analyse(spec, ix, joint, image)
    conflicts = []
    for p in a.problems:
        fixes = ()
        if with_fixes:
            fixes = tuple(fixes_for(spec, p, a, lambda s: _resolve(s, matrices, False, joint, image_note=False,
                                                                  image=image),
                                    lambda s: analyse(s, ix, joint, image)))
        conflicts.append(Conflict(p.kind, p.message, tuple(dict.fromkeys(p.facts)), fixes))
    soft = _dedupe(a.warnings)
    unchecked = tuple(Unchecked(p.hints.links, p.message, p.hints.nearest)
                      for p in soft if p.kind == checks.UNKNOWN)
    warnings = [Warning(p.kind, p.message, tuple(dict.fromkeys(p.facts))) for p in soft if p.kind != checks.UNKNOWN]
    if image_note and a.image_problems and not conflicts:
        warnings += _image_build_note(spec, matrices, with_fixes, joint)
    verdict = "conflict" if conflicts else "unverified" if unchecked else "ok"
    return Resolution(spec=spec, verdict=verdict, resolved=a.stack, conflicts=tuple(conflicts),
                      warnings=tuple(warnings), matrix_version=matrices.version, unchecked=unchecked)


def _image_build_note(spec: Spec, matrices, with_fixes: bool, joint: bool) -> list[Warning]:
    """For a host request: the image build's conflict, when an image of the stack could not
    be built as asked, as a warning with the image build's own (verified) fixes."""
    image = _resolve(dataclasses.replace(spec, for_image=True), matrices, with_fixes, joint)
    if not image.conflicts:
        return []
    first = image.conflicts[0]
    return [Warning(ConflictKind.IMAGE_BUILD, f"an image of this stack (`envbuild dockerfile`, `envbuild image`, `resolve "
                    f"--for image`) cannot be built as asked: {first.message}", first.facts, first.fixes)]


def _dedupe(problems: list[Problem]) -> list[Problem]:
    seen, out = set(), []
    for p in problems:
        if (p.kind, p.message) not in seen:
            seen.add((p.kind, p.message))
            out.append(p)
    return out


def analyse(spec: Spec, ix: Index, joint: bool = False, image: bool = True) -> Analysis:
    a = _analyse(spec, ix, joint, image)
    # In an image, a pip venv runs the base image's python3. When the newest builds need a
    # Python that no fitting image has, the newest builds for a Python an image does have win.
    retry = next((p for p in a.problems if p.hints.base_pythons), None)
    if retry is not None and not spec.python and spec.image_build:
        for py in retry.hints.base_pythons:
            again = _analyse(spec.with_changes({"python": py}), ix, joint, image)
            if not again.problems:
                return again
    return a


def _analyse(spec: Spec, ix: Index, joint: bool = False, image: bool = True) -> Analysis:
    req = read_request(spec, ix)
    # A GPU on the wrong platform makes every build's own verdict moot: it is the one
    # conflict, so the builds are only selected (for the warnings about which rows judged
    # them), not checked.
    moot = host_platform_problems(req)
    family_check = base_image.family_filter(req, ix) if spec.image_build else None
    outcomes = [evaluate(name, c, local, req, ix, family_check, judge=not moot) for name, c, local in req.frameworks]
    a = Analysis(req, ix, outcomes, joint=joint, image=image)
    for o in outcomes:
        a.problems += o.problems
        a.warnings += [p for p in (o.unknown, o.stand_in) if p is not None]
    a.warnings += unknown_facts(req, ix)
    found = _bare_cuda(req, ix) if not outcomes else []
    for o in outcomes:
        if o.unknown is not None:
            # no row for this version: every check that does not need one still runs
            found += _without_row(o, req, ix)
    for p in found:
        (a.warnings if p.soft else a.problems).append(p)
    # A driver that does not drive a GPU is a conflict besides the builds' own.
    a.problems = moot or ([] if joint else driver_gpu_problems(req, ix)) + a.problems
    choice = None
    if not a.problems:
        choice, apart = combine(outcomes, req, ix)
        a.problems += apart
    if choice is not None and not a.problems:
        _complete(a, choice)
    a.problems = sorted(_dedupe(a.problems), key=lambda p: ConflictKind.rank(p.kind))
    return a


def unknown_facts(req: Request, ix: Index) -> list[Problem]:
    """What the request names but the matrix does not know (a GPU model, a +label that names
    no CUDA build): the links they leave unchecked."""
    out = []
    for g in req.gpus:
        if g.row is None and g.cc is not None and g.resolved.compute_capability not in ix.table_capabilities:
            out.append(checks.unknown(
                f"no GPU in the matrix has compute capability {g.cc}, so it was checked by the rule of its major "
                f"alone (code for an older {g.cc.major}.x runs on it); state the GPU's model or check its compute "
                f"capability (nvidia-smi --query-gpu=name,compute_cap --format=csv)", ("gpu_arch",)))
        if g.cc is None:
            near = request.gpu_suggestion(ix, g.resolved.name)
            also = f" (or the model's name as the matrix spells it: did you mean {near!r}?)" if near else ""
            out.append(checks.unknown(
                f"the matrix does not know the GPU {g.resolved.name!r}, so no architecture check ran for it: state its "
                f"compute capability instead, e.g. --gpu 6.1 (nvidia-smi --query-gpu=compute_cap --format=csv prints "
                f"it){also}", ("gpu_arch",)))
    for name, label in req.unknown_labels:
        out.append(checks.unknown(
            f"{name}'s +{label} label names no CUDA build the matrix knows, so envbuild judged the public release; "
            f"state the build's CUDA with --cuda (e.g. --cuda 12.1)", ("framework_build",), framework=name))
    return out


def host_platform_problems(req: Request) -> list[Problem]:
    """A GPU that exists only inside one kind of system (a Jetson module, a Grace superchip)
    runs nothing built for another platform, whatever the framework build."""
    out = []
    for g in req.gpus:
        row = g.row
        if row is None or not row.host_platforms or req.platform in row.host_platforms:
            continue
        facts = (Fact(f"{row.name}: {row.host}", source=row.host_source),)
        buildable = [p for p in row.host_platforms if p in BUILD_PLATFORMS]
        if not buildable:
            # a 32-bit Arm board (Jetson TK1): no platform a spec may name would run on it,
            # so there is no platform to suggest, and no fix
            out.append(Problem(
                ConflictKind.PLATFORM_UNSUPPORTED,
                f"{row.name} is {row.host}; envbuild builds only for {', '.join(BUILD_PLATFORMS[:-1])} and "
                f"{BUILD_PLATFORMS[-1]}, so nothing it writes runs on it: choose another GPU",
                facts=facts, hints=Hints(unbuildable_host=True)))
            continue
        out.append(Problem(
            ConflictKind.PLATFORM_UNSUPPORTED,
            f"{row.name} is {row.host}, so {req.platform} builds cannot run on it; "
            f"set platform: {buildable[0]}",
            facts=facts,
            hints=Hints(platform=buildable[0])))
    return out


def _without_row(o: Outcome, req: Request, ix: Index) -> list[Problem]:
    """The checks that need no release row, for a framework version the matrix lacks: the
    family rules (platform, Python per platform, era floors) and the pinned CUDA against
    driver and GPUs."""
    version = _representative(o.constraint)
    label = f"{o.name} {o.constraint.text.lstrip('=')}" if o.constraint.text not in ("*", "") else o.name
    ruled = families.platform_problems(ix, o.name, version, label, req.platform, req.python)
    if any(p.kind == ConflictKind.PLATFORM_UNSUPPORTED for p in ruled):
        return ruled
    out = ruled + families.era_problems(ix, o.name, version, label, req, o.pin)
    out += checks.label_cudnn(o.name, req, o.pin)
    if o.pin is not None:
        out += _bare_cuda(req, ix, o.pin, framework=o.name)
    return out


def _representative(constraint):
    """The release a constraint stands for, to find its era's family rules: the pinned
    version (`2.99` = 2.99.*: 2.99.0), a lower bound (`>=2.11`), else None."""
    if len(constraint.clauses) == 1:
        op, version = constraint.clauses[0]
        if op in ("==", "===", ">=", "~="):
            return parse_version(parse_version(version.removesuffix(".*")).base_version)
    return None


def _bare_cuda(req: Request, ix: Index, pin=None, framework: str | None = None) -> list[Problem]:
    """The CUDA toolkit against platform, driver and GPUs: a CUDA-only request (an image's
    CUDA: the driver must natively support it), or the pinned CUDA of a framework version
    without rows (`framework`: a pip/conda build, which minor-version compatibility covers)."""
    out: list[Problem] = []
    if req.platform.startswith("osx") and framework is None:
        return [Problem(ConflictKind.PLATFORM_UNSUPPORTED, f"NVIDIA ships no CUDA for macOS ({req.platform}), so the platform "
                        f"must move to linux-64")]
    pin = pin or req.cuda
    if pin is None:
        return out
    cuda = pin.version if pin.minor is not None else _newest_minor(ix, pin.major)
    if cuda is None:
        return out
    if req.driver and framework is not None:
        out += _framework_driver(req, ix, cuda, framework, pin.minor is None)
    elif req.driver:
        have = ix.driver_cuda(req.driver, req.platform)
        need = ix.native_need(cuda)
        if need and req.driver < ix.drivers[need]:
            out.append(Problem(
                ConflictKind.DRIVER_TOO_OLD,
                f"a CUDA {cuda} image declares cuda>={cuda}, which the NVIDIA container toolkit checks against the host "
                f"driver; driver {req.driver} supports CUDA up to {have.native_cuda or 'none in the matrix'}, so upgrade "
                f"the driver to >= {need} or use CUDA <= {have.native_cuda}",
                (fact(have.rule, None),), hints=Hints(driver=need, max_cuda=have.native_cuda)))
    # a framework's major alone (`+cuda11.cudnn86`) does not say which minor's compiler built it
    found = ix.toolkit_sms(cuda) if pin.minor is not None or framework is None else None
    if found is None and (pin.minor is not None or framework is None) and req.known_gpus:
        out.append(checks.unknown(f"the matrix has no architecture list for CUDA {cuda}, so the GPUs were not checked "
                                  f"against it; use a CUDA release the matrix lists (`envbuild matrix cuda 12.4` shows "
                                  f"one)", ("gpu_arch",), framework=framework))
    for g in req.known_gpus:
        if found is not None and not runs_on(found[0], g.cc):
            who = f"{framework} built with CUDA {cuda}" if framework else f"CUDA {cuda}"
            out.append(Problem(ConflictKind.GPU_ARCH_UNSUPPORTED,
                               f"{who} cannot generate code for your {g.label}, so the CUDA version must move",
                               (fact(f"CUDA {cuda} architectures", found[1]),),
                               framework=framework))
    return out


def _framework_driver(req: Request, ix: Index, cuda: CudaVersion, framework: str, major_only: bool) -> list[Problem]:
    """A framework build for CUDA `cuda` against the host driver (minor-version
    compatibility included); for a major alone, its oldest minor's floor."""
    if req.platform.startswith("osx"):
        return []
    if major_only:
        minors = [m for m in ix.minors if m.major == cuda.major]
        cuda = minors[0] if minors else cuda
    rule = ix.driver_rule(cuda, req.platform)
    if rule.driver is None or req.driver >= ix.drivers[rule.driver]:
        return []
    have = ix.driver_cuda(req.driver, req.platform)
    return [Problem(
        ConflictKind.DRIVER_TOO_OLD,
        f"{framework} built for CUDA {cuda} needs driver >= {rule.driver}; your driver {req.driver} supports CUDA up to "
        f"{have.cuda or 'none in the matrix'}, so upgrade the driver or use a build for an older CUDA",
        (fact(rule.rule, None) if not rule.source else Fact(rule.rule, rule.source, rule.inferred, rule.secondary),),
        framework=framework, hints=Hints(driver=rule.driver, max_cuda=have.cuda))]


def _newest_minor(ix: Index, major: int) -> CudaVersion | None:
    minors = [m for m in ix.minors if m.major == major]
    return minors[-1] if minors else None


def _complete(a: Analysis, choice: Choice) -> None:
    req, ix = a.req, a.ix
    builds = list(choice.builds.values())
    for o in a.outcomes:
        b = choice.builds.get(o.name)
        if b is not None:
            a.warnings += o.warnings(b, req, ix)
    python = choice.python or req.python or DEFAULT_PYTHON
    cuda = _env_cuda(req, builds, ix)
    a.warnings += _minor_compat_notes(req, ix, builds)
    image, problems = base_image.choose(req, ix, builds, cuda, python, choice.installer) if a.image else (None, [])
    if a.image and not req.spec.image_build:
        # On a host the environment runs the Python of the frameworks' own builds; whether an
        # image of it could be built is asked again as an image request (`_image_build_note`).
        # The base is kept where an image build takes it for this very stack (its python3 is
        # this Python, or a conda prefix brings its own): the host's lock then serves the image.
        a.image_problems = any(not p.soft for p in problems)
        same = image is not None and not a.image_problems and (
            not base_image.binds_python(image, choice.installer)
            or (image.python is not None and major_minor(parse_version(image.python)) == python))
        image, problems = (image if same else None), []
    if image is not None and not req.python and base_image.binds_python(image, choice.installer):
        if image.python:
            # The environment runs the image's own Python (a framework image's, or the python3
            # a pip venv is made over), so that is the Python to lock for.
            python = major_minor(parse_version(image.python))
        else:
            # The environment is built on the image's own Python, which the catalog does not
            # record: the lock would assume a Python the image may not have.
            problems.append(base_image.unknown_python(ix, image, python))
    for p in problems:
        (a.warnings if p.soft else a.problems).append(p)
    frameworks = []
    for name, constraint, _l in req.frameworks:
        b = choice.builds.get(name)
        if b is not None:
            frameworks.append(_resolved(b, constraint.local))
    have = ix.driver_cuda(req.driver, req.platform) if req.driver else None
    a.stack = ResolvedStack(
        frameworks=tuple(frameworks), cuda=_text(cuda),
        cudnn=_cudnn(req, builds),
        python=python, driver=str(req.driver) if req.driver else None, max_driver_cuda=_text(have and have.cuda),
        driver_cuda=_text(have and have.native_cuda),
        gpus=tuple(g.resolved for g in req.gpus), platform=req.spec.platform, installer=str(choice.installer),
        channels=_channels(req, builds, choice.installer), base_image=image)


def _cudnn(req: Request, builds: list[Build]) -> str | None:
    """The spec's cuDNN, else the one a jaxlib label states (`+cuda11.cudnn86`), else the build's."""
    if req.spec.cudnn:
        return req.spec.cudnn
    if req.cudnn:
        return ".".join(map(str, req.cudnn))
    return next((b.cudnn for b in builds if b.cudnn), None)


def _text(cuda: CudaVersion | None) -> str | None:
    """A CUDA version as the resolution writes it."""
    return str(cuda) if cuda else None


def _env_cuda(req: Request, builds: list[Build], ix: Index) -> CudaVersion | None:
    """The environment's CUDA: what a build that loads the system CUDA needs, else the
    spec's pin, else the first framework's variant."""
    system = next((b for b in builds if not b.bundles_runtime), None)
    if req.cuda is not None and req.cuda.minor is not None:
        return req.cuda.version
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
        if have.native_cuda and b.cuda > have.native_cuda:
            out.append(Problem(ConflictKind.MINOR_VERSION_COMPAT,
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


def _resolved(b: Build, label: str | None = None) -> ResolvedFramework:
    conda, pip, index_url = frameworks.get(b.framework).pins(b, label)
    return ResolvedFramework(name=b.framework, version=b.version, installer=b.installer, cuda=str(b.cuda),
                             conda_specs=conda, pip_requirements=pip, pip_index_url=index_url,
                             pypi_default=b.pypi_default and b.installer == "pip",
                             archs=frameworks.get(b.framework).spelled_out_archs(b.archs), cudnn=b.cudnn)
