"""One function per link between a framework build and the rest of the request.

Each link (a module here) returns `Problem`s: a `ConflictKind`, one sentence that names
who sets the constraint and which side must move, and the facts (with sources) behind it.
Checks that cannot decide because the matrix lacks a row return `unknown(...)`, a soft
problem naming the links left unchecked (the resolution is then `unverified`); PTX-only
support is a soft `ptx_jit` problem, which becomes a warning.

`check_build` joins the links in report order. The choice among builds (`viable_of`,
`newest_viable`, `nearest`) reads each build's `Verdict`: the kinds of those same
problems. It judges the first GPU of each compute capability only: the problems' kinds
depend on a GPU's capability alone (its name is only in the sentences), and a fleet's
joint request names a hundred GPUs of a dozen capabilities.
"""
from __future__ import annotations

from dataclasses import dataclass

from envbuild.core.values import ConflictKind
from envbuild.frameworks.build import Build
from envbuild.resolver.checks.cuda import cuda_floor, cuda_variant
from envbuild.resolver.checks.cudnn import cudnn, label_cudnn
from envbuild.resolver.checks.driver import driver
from envbuild.resolver.checks.gpu import gpu_arch, gpu_runs_build, signature
from envbuild.resolver.checks.platform import platform, unpublished, wheel_platform
from envbuild.resolver.checks.python import lock_proof, python
from envbuild.resolver.context import Index
from envbuild.resolver.problem import Problem, unknown
from envbuild.resolver.request import Request

__all__ = ["UNKNOWN", "Verdict", "check_build", "gpu_runs_build", "label_cudnn", "nearest", "newest_viable", "passes",
           "unknown", "verdict", "viable_of"]

UNKNOWN = ConflictKind.UNKNOWN_FACT


@dataclass(frozen=True)
class Verdict:
    """What a build's problems decide for the choice among builds: the kinds of its hard
    problems, those of its soft ones, and whether it is of another CUDA variant than the
    one pinned (such a build explains a conflict worse than one of the pinned variant)."""

    hard: frozenset[ConflictKind]
    soft: frozenset[ConflictKind]
    other_variant: bool

    @classmethod
    def of(cls, problems: list[Problem]) -> Verdict:
        return cls(frozenset(p.kind for p in problems if not p.soft), frozenset(p.kind for p in problems if p.soft),
                   any(p.hints.other_variant for p in problems))

    def joined(self, other: Verdict) -> Verdict:
        """The verdict of this one's problems and `other`'s together."""
        return Verdict(self.hard | other.hard, self.soft | other.soft, self.other_variant or other.other_variant)


@dataclass(frozen=True)
class HostLinks:
    """A build's problems on the links other than the GPUs': those reported before the
    GPUs' and those after."""

    before: list[Problem]
    after: list[Problem]


def check_build(b: Build, req: Request, ix: Index, cuda_pin) -> list[Problem]:
    """Every link between build `b` and the request, in report order; `cuda_pin` is the
    CUDA the request fixes for this framework (the spec's `cuda` or its +cuXYZ label)."""
    host = _host_links(b, req, ix, cuda_pin)
    return host.before + gpu_arch(b, req.known_gpus, req, ix) + host.after


def verdict(b: Build, req: Request, ix: Index, cuda_pin) -> Verdict:
    """The kinds of `check_build`'s problems, judged on the first GPU of each compute
    capability (see the module's note)."""
    return verdicts(req, ix, cuda_pin)[b]


def verdicts(req: Request, ix: Index, cuda_pin) -> Verdicts:
    """build -> its verdict, for the request's host and compute capabilities: one table,
    looked up once by a choice among builds and then by build."""
    key = (cuda_pin, req.host_key, req.cc_key)
    found = ix.memo.verdicts.get(key)
    if found is None:
        found = ix.memo.verdicts[key] = Verdicts(req, ix, cuda_pin)
    return found


class Verdicts(dict):
    """build -> its `Verdict`, worked out when first asked: the verdict of its host links
    joined with that of its GPU links, each kept apart. The GPU links' kinds are the same
    for every build that reads the same of itself (`gpu.signature`): the targets of a fleet
    share its builds' host verdicts, and judge the few dozen signatures of a framework's
    hundreds of builds on their GPUs."""

    def __init__(self, req: Request, ix: Index, cuda_pin):
        super().__init__()
        self.req, self.ix, self.cuda_pin = req, ix, cuda_pin
        self.host: dict[Build, Verdict] = ix.memo.host_verdicts.setdefault((cuda_pin, req.host_key), {})
        self.gpu: dict[tuple, Verdict] = ix.memo.gpu_verdicts.setdefault(req.cc_key, {})

    def __missing__(self, b: Build) -> Verdict:
        host = self.host.get(b)
        if host is None:
            links = _host_links(b, self.req, self.ix, self.cuda_pin)
            host = self.host[b] = Verdict.of(links.before + links.after)
        shape = signature(b, self.ix)
        gpu = self.gpu.get(shape)
        if gpu is None:
            gpu = self.gpu[shape] = Verdict.of(gpu_arch(b, self.req.first_of_each_cc, self.req, self.ix))
        found = self[b] = host.joined(gpu)
        return found


def passes(b: Build, req: Request, ix: Index, cuda_pin) -> bool:
    """No hard problem between build `b` and the request. A fix search asks this of every
    build for each request it tries (another platform, Python, driver): the platform and
    Python links, which most builds fail there, are asked first, and the other links only
    of a build that passes them."""
    if unpublished(b, req.platform):
        return False
    placed, rest = _platform_links(b, req, ix)
    if any(not p.soft for p in placed) or any(not p.soft for p in rest):
        return False
    return not verdict(b, req, ix, cuda_pin).hard


def viable_of(builds: list[Build], req: Request, ix: Index, cuda_pin) -> list[Build]:
    """The builds of `builds` with no hard problem, in order."""
    table = verdicts(req, ix, cuda_pin)
    return [b for b in builds if not table[b].hard]


def newest_viable(builds: list[Build], req: Request, ix: Index, cuda_pin, pythons: frozenset[str]) -> list[Build]:
    """`viable_of(builds, ...)` up to the first (release, CUDA) that has a viable build
    for one of `pythons`, for `builds` sorted newest first: with one framework the choice
    ranks release, then CUDA, before all else, so no later build can be chosen, and
    their links are not checked (a fleet's targets, a fix's request)."""
    table = verdicts(req, ix, cuda_pin)
    out: list[Build] = []
    top = None
    for b in builds:
        if top is not None and (b.v != top[0] or b.cuda != top[1]):
            break
        if table[b].hard:
            continue
        out.append(b)
        if top is None:
            have = b.pythons_on(req.platform)
            if have is None or not pythons.isdisjoint(have):
                top = (b.v, b.cuda)
    return out


def nearest(builds: list[Build], req: Request, ix: Index, cuda_pin) -> Build:
    """When none of `builds` passes, the one whose problems explain it best: a build of
    the pinned CUDA variant before one of another, then the fewest hard kinds, then the
    first."""
    table = verdicts(req, ix, cuda_pin)
    ranked = ((v.other_variant, len(v.hard), rank) for rank, v in enumerate(table[b] for b in builds))
    return builds[min(ranked)[2]]


def _host_links(b: Build, req: Request, ix: Index, cuda_pin) -> HostLinks:
    """The links other than the GPUs', cached apart: the targets of a fleet differ only in
    their GPUs, so they share them. The platform and Python links and the driver link are
    cached each on what it reads: a fix's request differs from the one it fixes in one
    value (the driver, or a retry's Python), and only the links that read it are checked
    again."""
    key = (b, cuda_pin, req.host_key)
    found = ix.memo.host_links.get(key)
    if found is None:
        placed, rest = _platform_links(b, req, ix)
        driven = _driver_link(b, req, ix)
        found = ix.memo.host_links[key] = HostLinks(
            placed + cuda_variant(b, cuda_pin) + cuda_floor(b) + rest + driven,
            cudnn(b, req) + label_cudnn(b.framework, req, cuda_pin))
    return found


def _platform_links(b: Build, req: Request, ix: Index) -> tuple[list[Problem], list[Problem]]:
    """(the platform link, the Python and wheel links), which read the platform and Python."""
    key = (b, req.platform, req.python)
    found = ix.memo.platform_links.get(key)
    if found is None:
        placed = platform(b, req, ix)
        # a Python that does not lock is not also reported as missing
        rest = lock_proof(b, req, ix) or python(b, req)
        if not any(p.kind == ConflictKind.PLATFORM_UNSUPPORTED for p in placed + rest):
            rest += wheel_platform(b, req)
        found = ix.memo.platform_links[key] = (placed, rest)
    return found


def _driver_link(b: Build, req: Request, ix: Index) -> list[Problem]:
    key = (b, req.platform, req.driver)
    found = ix.memo.driver_links.get(key)
    if found is None:
        found = ix.memo.driver_links[key] = driver(b, req, ix)
    return found
