"""The GPU links: can the build's code run on each GPU asked for?

Two answers per GPU: the CUDA toolkit's (can CUDA X generate code for the GPU at all?)
and the build's own (which architectures it carries, its lowest GPU, the ptxas of a local
toolkit it JIT-compiles with). Both depend on the build and the GPU alone, so a fleet,
which asks them for every build on each of its GPUs in every resolve, has them cached per
(build, GPU). Their sentences are written only when read (see `Problem`).
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from envbuild import frameworks
from envbuild.core.model import Fact
from envbuild.core.values import ConflictKind, CudaVersion
from envbuild.frameworks.build import Build
from envbuild.resolver import families
from envbuild.resolver.context import Index, fact
from envbuild.resolver.problem import Problem, unknown
from envbuild.resolver.request import Gpu, Request

# How a GPU runs a build's code: None from a binary, else one of these.
CANNOT, UNLISTED, PTX = "cannot", "unlisted", "ptx"

# An arch list as `how_gpu_runs` compares it (`carried_archs`).
CarriedArchs = tuple[dict[int, int], tuple[int, int] | None]


@dataclass(frozen=True)
class Answer:
    """What one link found for one build on one GPU, and whether a problem is hard."""

    problems: tuple[Problem, ...]
    hard: bool

    @classmethod
    def of(cls, problems: list[Problem]) -> Answer:
        return cls(tuple(problems), any(not p.soft for p in problems))


_NOTHING = Answer((), False)


def gpu_arch(b: Build, gpus: tuple[Gpu, ...], req: Request, ix: Index) -> list[Problem]:
    """The problems of build `b` on `gpus` (known models). Once one is hard, only the
    toolkit's answers for the later GPUs are added: the build must move anyway, and the
    toolkit's answers say which CUDA it must move to."""
    out: list[Problem] = []
    hard = False
    for g in gpus:
        found = _toolkit_answer(b, g, ix)
        out += found.problems
        hard = hard or found.hard
        if hard:
            continue
        found = _build_answer(b, g, ix)
        out += found.problems
        hard = found.hard
    if b.min_cc is None and gpus and not hard:
        # the row states no lowest GPU: the family's rule for the era decides (JAX dropped Kepler in 0.4.4)
        out += families.era_problems(ix, b.framework, b.v, f"{b.framework} {b.version}", req, None,
                                     gpus_only=True, gpus=gpus)
    return out


def signature(b: Build, ix: Index) -> tuple:
    """What `gpu_arch` reads of build `b` to decide the kinds of its problems (its sentences
    read more): the CUDA, the compiled architectures and the lowest GPU, the ptxas rule,
    and, where the row states no lowest GPU, the lowest GPUs of its era's rules."""
    found = ix.memo.gpu_signatures.get(b)
    if found is None:
        era = families.era_gpu_floors(ix, b.framework, b.v) if b.min_cc is None else None
        found = ix.memo.gpu_signatures[b] = (b.framework, b.cuda, b.archs, b.min_cc, era, _local_ptxas(b, ix))
    return found


def _toolkit_answer(b: Build, g: Gpu, ix: Index) -> Answer:
    key = (b, g.label)
    found = ix.memo.toolkit_answers.get(key)
    if found is None:
        verdict = toolkit_verdict(b.cuda, g.cc, ix)
        found = _NOTHING if verdict is None else Answer.of(_toolkit_problems(b, g, ix, verdict))
        ix.memo.toolkit_answers[key] = found
    return found


def _build_answer(b: Build, g: Gpu, ix: Index) -> Answer:
    key = (b, g.label)
    found = ix.memo.build_answers.get(key)
    if found is None:
        found = ix.memo.build_answers[key] = Answer.of(_build_problems(b, g, ix))
    return found


def toolkit_verdict(cuda: CudaVersion, cc, ix: Index) -> str | None:
    """None when code of the CUDA `cuda` toolkit runs on a GPU of compute capability `cc`
    (the same for every build of that CUDA); else UNLISTED (the matrix has no architecture
    list for that CUDA) or CANNOT."""
    if ix.toolkit_runs_on(cuda, cc):
        return None
    return UNLISTED if ix.toolkit_sms(cuda) is None else CANNOT


def _toolkit_problems(b: Build, g: Gpu, ix: Index, verdict: str) -> list[Problem]:
    if verdict == UNLISTED:
        return [unknown(f"the matrix has no architecture list for CUDA {b.cuda}", ("gpu_arch",), framework=b.framework)]
    return [Problem(ConflictKind.GPU_ARCH_UNSUPPORTED,
                    lambda: f"{b.label} is built with CUDA {b.cuda}, which cannot generate code for your {g.label}; "
                            f"{_toolkit_why(b, g, ix)}, so the CUDA variant (or the {b.framework} version) must move",
                    _toolkit_facts(b.cuda, ix), framework=b.framework)]


def _toolkit_facts(cuda: CudaVersion, ix: Index) -> tuple[Fact, ...]:
    """The fact behind every "CUDA `cuda` cannot generate code for" problem."""
    found = ix.memo.toolkit_facts.get(cuda)
    if found is None:
        sms, row = ix.toolkit_sms(cuda)
        found = ix.memo.toolkit_facts[cuda] = (
            fact(f"CUDA {cuda} compiles for sm_{', sm_'.join(str(s) for s in sorted(sms))}", row),)
    return found


def _toolkit_why(b: Build, g: Gpu, ix: Index) -> str:
    """Why the CUDA `b.cuda` toolkit cannot serve GPU `g`."""
    first, last, compat = ix.sm_span(g.cc)
    # The oldest toolkit whose code runs on the GPU: native sm_XY, or an older minor of the
    # same major (an sm_80 binary runs on sm_86), which is why a fix may name CUDA < `first`.
    if first is not None and first > b.cuda:
        why = f"{g.label} needs CUDA >= {first} for native sm_{g.sm} code"
        if compat is not None and compat < first:
            why += (f", or CUDA >= {compat.major_minor} for code of an older sm_{g.cc.major}x architecture, "
                    f"which it runs through binary compatibility")
        return why
    if last is not None and last < b.cuda:
        return f"CUDA {last} was the last toolkit for {g.label}"
    return f"no CUDA toolkit in the matrix compiles for {g.label}"


def _build_problems(b: Build, g: Gpu, ix: Index) -> list[Problem]:
    found = _build_archs(b, g, ix)
    rule = _local_ptxas(b, ix)
    if rule is not None:
        found += families.ptxas_problems(ix, rule, b.label, b.cuda, (g,))
    if b.min_cc is not None and g.cc < b.min_cc:
        found.append(Problem(ConflictKind.GPU_ARCH_UNSUPPORTED,
                             lambda: f"{b.framework} {b.version} needs compute capability >= {b.min_cc}; "
                                     f"your {g.label} is older, so the GPU must move",
                             (fact(f"{b.framework} {b.version}: min compute capability", b.row),),
                             framework=b.framework))
    return found


def _local_ptxas(b: Build, ix: Index):
    """The family rule saying build `b` JIT-compiles with the ptxas of the CUDA toolkit it
    loads from the system, or None (a build that brings its CUDA brings its ptxas)."""
    return None if b.bundles_runtime else families.local_ptxas_rule(ix, b.framework, b.v)


def _build_archs(b: Build, g: Gpu, ix: Index) -> list[Problem]:
    if b.archs is None:
        if not frameworks.get(b.framework).shape.lists_archs:
            return []
        return [unknown(f"the matrix has no compiled-architecture list for {b.label}", ("gpu_arch",),
                        framework=b.framework)]
    verdict = how_gpu_runs(_compiled(b, ix), g.cc)
    if verdict is None:
        return []
    facts = (fact(f"{b.label} carries {' '.join(b.archs)}", b.row),)
    if verdict == PTX:
        return [Problem(ConflictKind.PTX_JIT,
                        lambda: f"{b.label} has no sm_{g.sm} binary for your {g.label}; the driver will JIT-compile "
                                f"its PTX at start-up (slow first run)", facts, soft=True, framework=b.framework)]
    return [Problem(ConflictKind.GPU_ARCH_UNSUPPORTED,
                    lambda: f"{b.label} is compiled for {', '.join(b.archs)}, which cannot run on your {g.label}, "
                            f"so the {b.framework} build must move", facts, framework=b.framework)]


def _compiled(b: Build, ix: Index) -> CarriedArchs:
    """`carried_archs` of build `b`'s archs, once per build, as every GPU of a fleet is asked about."""
    found = ix.memo.compiled_archs.get(b)
    if found is None:
        found = ix.memo.compiled_archs[b] = carried_archs(frameworks.get(b.framework).spelled_out_archs(b.archs))
    return found


def gpu_runs_build(spelled: Iterable[str] | None, cuda: CudaVersion, cc, ix: Index) -> str:
    """How a GPU of compute capability `cc` runs a build of CUDA `cuda` that carries the
    archs `spelled` (None: not read), as the GPU -> kernels link judges it: "cannot" when
    the CUDA toolkit cannot generate code for the GPU, "unlisted" when the matrices lack
    the toolkit's or the build's architectures, "ptx" for PTX JIT, "sass" for a binary."""
    toolkit = toolkit_verdict(cuda, cc, ix)
    if toolkit is not None:
        return toolkit
    if spelled is None:
        return UNLISTED
    return how_gpu_runs(carried_archs(spelled), cc) or "sass"


def how_gpu_runs(carried: CarriedArchs, cc) -> str | None:
    """How a GPU of compute capability `cc` runs what an arch list carries (`carried_archs`):
    None from a binary (of its major, at most its minor: sm_80 code runs on sm_86), PTX
    from PTX the driver JIT-compiles (of an arch at most its own), else CANNOT."""
    lowest_minor, lowest_ptx = carried
    minor = lowest_minor.get(cc.major)
    if minor is not None and minor <= cc.minor:
        return None
    if lowest_ptx is not None and lowest_ptx <= (cc.major, cc.minor):
        return PTX
    return CANNOT


def carried_archs(spelled: Iterable[str]) -> CarriedArchs:
    """An arch list spelled out (`sm_XY` SASS, `compute_XY` PTX) as `how_gpu_runs` compares it:
    the lowest minor of its real archs per major ({8: 0, 9: 0} for sm_80 sm_86 sm_90), and
    its lowest PTX arch as (major, minor) or None."""
    lowest: dict[int, int] = {}
    ptx: list[tuple[int, int]] = []
    for a in spelled:
        kind, _, num = a.partition("_")
        digits = "".join(ch for ch in num if ch.isdigit())
        if not digits:
            continue
        major, minor = divmod(int(digits), 10)
        if kind == "sm":
            lowest[major] = min(minor, lowest.get(major, minor))
        else:
            ptx.append((major, minor))
    return lowest, min(ptx) if ptx else None
