"""One function per link between a framework build and the rest of the request.

Each check returns `Problem`s: a conflict kind, one sentence that names who sets the
constraint and which side must move, and the facts (with sources) behind it. Checks
that cannot decide because the matrix lacks a row return `unknown(...)`, a soft problem
naming the links left unchecked (the resolution is then `unverified`); PTX-only support
is a soft `ptx_jit` problem, which becomes a warning.
"""
from __future__ import annotations

from collections.abc import Iterable

from envbuild import frameworks
from envbuild.core.model import Fact
from envbuild.resolver import families
from envbuild.frameworks.build import Build
from envbuild.resolver.context import Index, Lazy, fact
from envbuild.resolver.lockable import locking_releases
from envbuild.resolver.problem import Problem
from envbuild.resolver.request import Gpu, Request
from envbuild.core.values import major_minor
from envbuild.core.versions import ordered_versions, parse_version

UNKNOWN = "unknown_fact"


def unknown(message: str, links: tuple[str, ...], *, framework: str | None = None,
            nearest: tuple[str, ...] = ()) -> Problem:
    """A fact a check needs is unknown (the matrices lack it, or a base image outside the
    catalog neither states nor shows it): `links` (of model.LINKS) stay unchecked, and
    `message` says what is unknown and how to state it. `nearest`: for a release the
    matrices do not know, the nearest ones they do."""
    return Problem(UNKNOWN, message, soft=True, framework=framework, hints={"links": links, "nearest": nearest})


class _Deferred(Problem):
    """A `Problem` whose sentence is written when it is first read. A fleet's joint request
    judges every build on each of its GPUs (thousands of problems), and only the nearest
    build's are reported."""

    def __init__(self, kind: str, write, facts: tuple[Fact, ...] = (), soft: bool = False,
                 framework: str | None = None, hints: dict | None = None):
        set_ = object.__setattr__
        set_(self, "kind", kind)
        set_(self, "facts", facts)
        set_(self, "soft", soft)
        set_(self, "framework", framework)
        set_(self, "hints", {} if hints is None else hints)
        set_(self, "_write", write)

    def __getattr__(self, name: str):
        if name != "message":
            raise AttributeError(name)
        text = self._write()
        object.__setattr__(self, "message", text)
        return text


def check_build_cached(b: Build, req: Request, ix: Index, cuda_pin) -> list[Problem]:
    """`check_build`, memoised on the request values the checks read."""
    return list(_cached(b, req, ix, cuda_pin))


def passes(b: Build, req: Request, ix: Index, cuda_pin) -> bool:
    """No hard problem between build `b` and the request. A fix search asks this of every
    build on another platform (a Jetson's Arm): a build not published there fails on its
    platform link, and its other links are not checked (nor its problems written)."""
    if _unpublished(b, req.platform):
        return False
    placed, rest = _platform_cached(b, req, ix)
    if any(not p.soft for p in placed) or any(not p.soft for p in rest):
        return False
    return not summaries(req, ix, cuda_pin)[b][0]


def _cached(b: Build, req: Request, ix: Index, cuda_pin) -> list[Problem]:
    key = (id(b), cuda_pin, req.checks_key)
    found = ix.memo.get(key)
    if found is None:
        if len(ix.memo) > 200_000:
            ix.memo.clear()
        found = ix.memo[key] = check_build(b, req, ix, cuda_pin)
    return found


def check_build(b: Build, req: Request, ix: Index, cuda_pin) -> list[Problem]:
    """Every link between build `b` and the request; `cuda_pin` is the CUDA the request
    fixes for this framework (the spec's `cuda` or the framework's +cuXYZ label)."""
    before, after = _host_cached(b, req, ix, cuda_pin)
    return before + gpu_arch(b, req, ix) + after


def _host_cached(b: Build, req: Request, ix: Index, cuda_pin) -> tuple[list[Problem], list[Problem]]:
    # The links other than the GPUs' are memoised apart: the targets of a fleet differ
    # only in their GPUs, so they share them.
    key = ("host", id(b), cuda_pin, req.host_key)
    found = ix.memo.get(key)
    if found is None:
        found = ix.memo[key] = _host_links(b, req, ix, cuda_pin)
    return found


def _host_links(b: Build, req: Request, ix: Index, cuda_pin) -> tuple[list[Problem], list[Problem]]:
    """(the links checked before the GPUs', those checked after), in report order. The
    platform and Python links and the driver link are memoised apart, each on what it
    reads: a fix's request differs from the one it fixes in one value (the driver, or a
    retry's Python), and only the links that read it are checked again."""
    placed, rest = _platform_cached(b, req, ix)
    key = ("driver link", id(b), req.platform, req.driver)
    driven = ix.memo.get(key)
    if driven is None:
        driven = ix.memo[key] = driver(b, req, ix)
    out = placed + cuda_variant(b, req, cuda_pin) + cuda_floor(b) + rest + driven
    return out, cudnn(b, req) + label_cudnn(b.framework, req, cuda_pin)


def _platform_cached(b: Build, req: Request, ix: Index) -> tuple[list[Problem], list[Problem]]:
    key = ("platform links", id(b), req.platform, req.python)
    found = ix.memo.get(key)
    if found is None:
        found = ix.memo[key] = _platform_links(b, req, ix)
    return found


def _platform_links(b: Build, req: Request, ix: Index) -> tuple[list[Problem], list[Problem]]:
    """(the platform link, the Python and wheel links), which read the platform and Python."""
    placed = platform(b, req, ix)
    proof = lock_proof(b, req, ix)
    rest = proof or python(b, req)  # a Python that does not lock is not also reported as missing
    if not any(p.kind == "platform_unsupported" for p in placed + rest):
        rest += wheel_platform(b, req)
    return placed, rest


def label_cudnn(framework: str, req: Request, pin) -> list[Problem]:
    """jaxlib's `+cuda11.cudnn86` names the cuDNN the wheel was compiled with: the runtime
    cuDNN must be that major with a minor at least as new."""
    if pin is None or req.cudnn is None or not pin.text.startswith("+"):
        return []
    built = frameworks.read_label(pin.text[1:]).cudnn
    if built is None:
        return []
    b = parse_version(built).release
    want = tuple(req.cudnn)
    if want[0] == b[0] and want[1:2] >= b[1:2]:
        return []
    return [Problem("cudnn_mismatch",
                    f"the {framework} {pin.text} wheel was compiled with cuDNN {built} and loads only cuDNN {b[0]}.x with a minor "
                    f">= {b[1] if len(b) > 1 else 0}; you asked for cuDNN {'.'.join(map(str, want))}, so cuDNN or the "
                    f"wheel's cuDNN variant must move", (Fact(f"the +{pin.text[1:]} label names cuDNN {built}",
                                                              "the wheel's local version label"),),
                    framework=framework, hints={"cudnn": built})]


def platform(b: Build, req: Request, ix: Index) -> list[Problem]:
    plat = req.platform
    # per-platform facts of the release's family (matrices/family_rules.yaml): no GPU build
    # there at all, or a narrower Python range than the release row's
    ruled = families.platform_problems(ix, b.framework, b.v, f"{b.framework} {b.version}", plat, req.python)
    if any(p.kind == "platform_unsupported" for p in ruled):
        return ruled
    plugin = frameworks.get(b.framework)
    if plat == "win-64":
        windows = plugin.windows_problem(b)
        if windows is not None:
            why, fact_text = windows
            return [Problem("platform_unsupported", why, (fact(fact_text, b.row),), framework=b.framework)]
        if plugin.lists_platforms and plat not in b.platforms:
            return ruled + [unknown(f"the matrix does not list a win-64 build of {b.label}", ("platform",),
                                    framework=b.framework)]
        return ruled
    if _unpublished(b, plat):
        return [Problem("platform_unsupported",
                        f"{b.label} is published only for {', '.join(b.platforms)}; you asked for {plat}",
                        (fact(f"platforms: {list(b.platforms)}", b.row),), framework=b.framework)]
    if plat not in b.platforms:
        return [unknown(f"the matrix does not say whether {b.label} exists for {plat}", ("platform",),
                        framework=b.framework)]
    return ruled


def _unpublished(b: Build, plat: str) -> bool:
    """The rows list where `b` is published, and `plat` (not Windows, which has rules of
    its own) is not among them: a hard platform problem whatever else is found."""
    return plat != "win-64" and plat not in b.platforms and frameworks.get(b.framework).lists_platforms


def cuda_variant(b: Build, req: Request, pin) -> list[Problem]:
    if pin is None or pin.matches(b.cuda):
        return []
    if not (b.bundles_runtime or b.ranged) and pin.minor is not None and b.cuda_major >= 11 and pin.major == b.cuda_major:
        # The build loads the system CUDA, built for one minor: from 11.0 on every minor of
        # that major shares its sonames (TensorFlow 2.13, built for 11.8, runs on 11.7).
        return []
    return [Problem("framework_cuda_mismatch", "", framework=b.framework)]  # worded per framework by the caller


def cuda_floor(b: Build) -> list[Problem]:
    """The CUDA libraries of the environment must be at least as new as the minor the
    build states as its floor (JAX checks cuSOLVER, cuFFT, cuBLAS, ... at start-up)."""
    if b.cuda_min is None or b.cuda_v >= parse_version(b.cuda_min):
        return []
    return [Problem("library_abi",
                    f"{b.framework} {b.version} ({b.variant}) needs the CUDA {b.cuda_major} libraries (cuSOLVER, "
                    f"cuSPARSE, cuFFT, ...) of {b.cuda_min} or newer (its stated floor; JAX checks the library "
                    f"versions when it starts); CUDA {b.cuda} is older, so CUDA must move to >= {b.cuda_min} (and no "
                    f"older CUDA on LD_LIBRARY_PATH may shadow the libraries pip installs)",
                    (fact(f"{b.framework} {b.version}: CUDA {b.cuda_major} floor {b.cuda_min}", b.row),),
                    framework=b.framework, hints={"cuda": b.cuda_min})]


def python(b: Build, req: Request) -> list[Problem]:
    if req.python is None:
        return []
    pythons = b.pythons_on(req.platform)
    if pythons is None:
        return [unknown(f"the matrix has no Python range for {b.label}", ("python",), framework=b.framework)]
    if req.python in pythons:
        return []
    # named: the Pythons published there (those the lock proof found to fail too, when no other is left)
    pythons = pythons or b.published_pythons(req.platform)
    if b.wheels is not None and b.wheels.pythons(req.platform):
        # the artefacts decide: name the newest Python that has a wheel
        newest = ordered_versions(pythons)[-1]
        return [Problem("python_unsupported",
                        f"{b.framework} {b.version} has {req.platform} wheels ({b.wheels.label}) for Python "
                        f"{_py_range(pythons)}, the newest {newest}; you asked for Python {req.python}, so Python "
                        f"or the {b.framework} version must move",
                        b.wheels.facts(req.platform), framework=b.framework,
                        hints={"pythons": pythons, "newest_python": newest})]
    return [Problem("python_unsupported",
                    f"{b.framework} {b.version} is published for Python {_py_range(pythons)}; you asked for "
                    f"Python {req.python}, so Python or the {b.framework} version must move",
                    (fact(f"{b.framework} {b.version}: python {b.python_text}", b.row),), framework=b.framework,
                    hints={"pythons": pythons})]


def lock_proof(b: Build, req: Request, ix: Index) -> list[Problem]:
    """The lock proof found that the build's pip requirement does not lock on the platform:
    for any Python, or for the one the request pins (matrices/lockable.yaml)."""
    refused = b.unlockable.get(req.platform)
    if not refused:
        return []
    if req.python is not None and req.python not in refused:
        return []
    remaining = b.pythons_on(req.platform)
    if req.python is None and remaining:
        return []  # completion chooses among the Pythons not found to fail
    rows = [r for r in b.lock_proof if r.platform == req.platform and not r.lockable]
    row = next(r for r in rows if req.python is None or req.python in r.pythons.split())
    locks = frozenset(remaining or ())
    what = f"Python {req.python}" if req.python else f"Python {_py_range(refused)}"
    others = [v for v in locking_releases(ix.m, b.framework, req.platform, b.version) if v != b.version]
    moves = f"Python ({_py_range(locks)} has wheels and is not found to fail) or " if locks else ""
    return [Problem("not_lockable",
                    f"{row.requirement} does not lock on {req.platform} for {what}: {row.why}; so {moves}the "
                    f"{b.framework} version must move" + (f" ({b.framework} {', '.join(others)} lock there)" if others else ""),
                    (fact(f"lock proof {row.read}: {row.requirement} on {row.platform}, Python {row.pythons}: does not lock",
                          row),), framework=b.framework, hints={"pythons": locks} if locks else {})]


def wheel_platform(b: Build, req: Request) -> list[Problem]:
    """A pip build whose artefacts have no wheel at all for the platform cannot be installed
    there. (PyPI's torch is one CUDA build; the other variants live on PyTorch's own index,
    so only the PyPI one is judged by PyPI's files.)"""
    if b.wheels is None or b.wheels.inferred or req.platform.startswith("osx"):
        return []  # macOS: platform() already says NVIDIA ships no CUDA there
    if b.wheels.pythons(req.platform) is not None:
        return []
    have = ", ".join(p for p in b.wheels.by_platform) or "no platform"
    return [Problem("platform_unsupported",
                    f"{b.framework} {b.version} has no {req.platform} wheel ({b.wheels.label} has wheels for {have}), "
                    f"so the platform or the {b.framework} version must move",
                    b.wheels.facts(req.platform), framework=b.framework)]


def _py_range(pythons: frozenset[str]) -> str:
    ordered = ordered_versions(pythons)
    return ordered[0] if len(ordered) == 1 else f"{ordered[0]}-{ordered[-1]}"


def driver(b: Build, req: Request, ix: Index) -> list[Problem]:
    if req.driver is None or req.platform.startswith("osx"):
        return []
    rule = ix.driver_rule(b.cuda, req.platform)
    need, source_fact = rule.driver, None
    if need is not None:
        source_fact = Fact(rule.rule, rule.source or "envbuild rule", rule.inferred, rule.secondary)
    drivers = ix.drivers
    if b.driver_min and (need is None or drivers[b.driver_min] > drivers[need]):
        need, source_fact = b.driver_min, fact(f"{b.framework} {b.version} asks for driver >= {b.driver_min}", b.row)
    native = next((r for r in families.rules_for(ix, b.framework, b.v, None) if r.native_driver), None)
    native_need = ix.native_need(b.cuda) if native is not None else None
    if native_need and (need is None or drivers[native_need] > drivers[need]):
        # the build JIT-compiles with the CUDA toolkit's ptxas, whose output needs that toolkit's own driver
        need = native_need
        source_fact = fact(f"{b.framework} {native.releases}: the driver must be at least the one released with the "
                           f"installed CUDA toolkit (no minor-version compatibility)", native)
    if need is None:
        return [unknown(f"the matrix has no minimum driver for CUDA {b.cuda}", ("driver",), framework=b.framework)]
    if req.driver >= drivers[need]:
        return []
    have = ix.driver_cuda(req.driver, req.platform)
    top = have.native_cuda if native is not None else have.cuda
    reach = f"{'natively ' if native is not None else ''}supports CUDA up to {top}" if top else \
        "is older than every CUDA release in the matrix"
    return [Problem("driver_too_old",
                    f"{b.framework} {b.version} is built for CUDA {b.cuda}, which needs driver >= {need}; "
                    f"your driver {req.driver} {reach}, so upgrade the driver or use a build for CUDA "
                    f"{top or 'older'}",
                    (source_fact, Fact(have.rule, have.source or "envbuild rule", have.inferred, have.secondary)),
                    framework=b.framework, hints={"driver": need, "max_cuda": top})]


def gpu_arch(b: Build, req: Request, ix: Index) -> list[Problem]:
    out: list[Problem] = []
    hard = False
    toolkit, build = _answers(b, ix)
    for g in req.known_gpus:  # an unknown model has its own unknown_fact warning
        found = toolkit.get(g.label)
        if found is None:
            found = toolkit[g.label] = _toolkit_knows(b, g, ix)
        if found[0]:
            out += found[0]
            hard = hard or found[1]
        if hard:
            continue
        found = build.get(g.label)
        if found is None:
            found = build[g.label] = _build_knows(b, g, ix)
        out += found[0]
        hard = found[1]
    if b.min_cc is None and req.known_gpus and not hard:
        # the row states no lowest GPU: the family's rule for the era decides (JAX dropped Kepler in 0.4.4)
        out += families.era_problems(ix, b.framework, b.v, f"{b.framework} {b.version}", req, None, gpus_only=True)
    return out


# --- The kinds of the problems, without their sentences ----------------------------
# Choosing among builds needs only the kinds of their problems: a fleet's joint request
# judges every build on each of its GPUs, and only the nearest build's problems and the
# chosen build's warnings are read (written by `check_build`).

def summaries(req: Request, ix: Index, cuda_pin) -> dict[Build, tuple[frozenset[str], frozenset[str], bool]]:
    """build -> what `check_build` finds for it: the kinds of its hard problems, the kinds
    of its soft ones, and whether one is the unworded `framework_cuda_mismatch` (a build of
    another variant than the pinned one). One table per what these depend on: the CUDA
    pin, the host links and the request's distinct compute capabilities."""
    key = ("summaries", cuda_pin, req.host_key, req.cc_key)
    found = ix.memo.get(key)
    if found is None:
        found = ix.memo[key] = _Summaries(req, ix, cuda_pin)
    return found


def summaries_of(builds: list[Build], req: Request, ix: Index, cuda_pin) -> list:
    """`summaries(req, ix, cuda_pin)[b]` for each of `builds`, in order, worked out once per
    class of builds with the same host summary and GPU signature (the 258 PyTorch builds
    on one host fall into a few dozen): the targets of a fleet are resolved one by one."""
    table = summaries(req, ix, cuda_pin)
    classes, members = table.classes(builds)
    per_class = [table.joined_with_gpu(host, signature, b) for host, signature, b in classes]
    return [per_class[i] for i in members]


def viable_of(builds: list[Build], req: Request, ix: Index, cuda_pin) -> list[Build]:
    """The builds of `builds` with no hard problem, in order: what `summaries_of` would
    leave, when only that is asked. The GPU links are judged first (once per signature),
    and the host links only of builds the GPUs leave: a request that differs from an
    earlier one in its Python or driver (a fix, a retry) checks again only those."""
    table = summaries(req, ix, cuda_pin)
    return [b for b in builds if not table.gpu_of(b)[0] and not table.host[b][0]]


def newest_viable(builds: list[Build], req: Request, ix: Index, cuda_pin, pythons: frozenset[str]) -> list[Build]:
    """`viable_of(builds, ...)` up to the first (release, CUDA) that has a viable build
    for one of `pythons`, for `builds` sorted newest first: with one framework the choice
    ranks release, then CUDA, before all else, so no later build can be chosen, and
    their links are not checked (a fleet's targets, a fix's request)."""
    table = summaries(req, ix, cuda_pin)
    out: list[Build] = []
    top = None
    for b in builds:
        if top is not None and (b.v != top[0] or b.cuda_v != top[1]):
            break
        if table.gpu_of(b)[0] or table.host[b][0]:
            continue
        out.append(b)
        if top is None:
            have = b.pythons_on(req.platform)
            if have is None or not pythons.isdisjoint(have):
                top = (b.v, b.cuda_v)
    return out


def nearest(builds: list[Build], req: Request, ix: Index, cuda_pin) -> Build:
    """When none of `builds` passes, the one whose problems explain it best: a build of
    the pinned CUDA variant before one of another, then the fewest hard kinds, then the
    first (what `evaluate`'s ranking of every build's summary picks). A build's
    GPU kinds alone (once per signature) bound its count from below, so the host links
    of a build that cannot come before the best so far are not checked (a fleet's joint
    request, on which nearly every build fails for some GPU)."""
    table = summaries(req, ix, cuda_pin)
    best, best_key = builds[0], None
    for rank, b in enumerate(builds):
        gpu_hard = table.gpu_of(b)[0]
        if best_key is not None and not best_key[0] and len(gpu_hard) >= best_key[1]:
            continue  # at best as many kinds, and later
        host = table.host[b]
        key = (host[2], len(host[0] | gpu_hard), rank)
        if best_key is None or key < best_key:
            best, best_key = b, key
    return best


class _Summaries(dict):
    """A build's summary joins that of its host links (the same whatever the GPUs) with
    that of its GPU links (the same for every build of one `_gpu_signature`: the 258
    PyTorch builds have 47), so each part is worked out once and joined by lookups."""

    def __init__(self, req: Request, ix: Index, cuda_pin):
        super().__init__()
        self.req, self.ix, self.cuda_pin = req, ix, cuda_pin
        self.host = _table(ix, ("host kinds", cuda_pin, req.host_key), lambda b: _host_kinds(b, req, ix, cuda_pin))
        self.signatures = _table(ix, ("gpu signatures",), lambda b: _gpu_signature(b, ix))
        self.gpu = _table(ix, ("gpu kinds", req.cc_key), None)  # signature -> kinds
        self.joined = _table(ix, ("joined kinds",), None)

    def __missing__(self, b: Build):
        found = self[b] = self.joined_with_gpu(self.host[b], self.signatures[b], b)
        return found

    def gpu_of(self, b: Build, signature: tuple | None = None) -> tuple[frozenset[str], frozenset[str]]:
        """The kinds of `b`'s GPU links, the same for every build of its signature."""
        if signature is None:
            signature = self.signatures[b]
        gpu = self.gpu.get(signature)
        if gpu is None:
            gpu = self.gpu[signature] = _gpu_kinds(b, signature, self.req, self.ix)
        return gpu

    def joined_with_gpu(self, host: tuple, signature: tuple, b: Build) -> tuple:
        """`host` (a host summary) joined with the GPU kinds of `signature`, the signature of `b`."""
        gpu = self.gpu_of(b, signature)
        found = self.joined.get((host, gpu))
        if found is None:
            found = self.joined[host, gpu] = (host[0] | gpu[0], host[1] | gpu[1], host[2])
        return found

    def classes(self, builds: list[Build]) -> tuple[list[tuple], list[int]]:
        """([(host summary, GPU signature, first build)] per class, each build's class), memoised
        on the builds and the host: every target of a fleet shares them."""
        key = ("classes", tuple(builds), self.cuda_pin, self.req.host_key)
        found = self.ix.memo.get(key)
        if found is None:
            index: dict = {}
            members = [index.setdefault((self.host[b], self.signatures[b]), (len(index), b))[0] for b in builds]
            found = self.ix.memo[key] = ([(host, signature, b) for (host, signature), (_i, b) in index.items()],
                                         members)
        return found


def _table(ix: Index, key: tuple, make) -> dict:
    found = ix.memo.get(key)
    if found is None:
        found = ix.memo[key] = {} if make is None else Lazy(make)
    return found


def _host_kinds(b: Build, req: Request, ix: Index, cuda_pin) -> tuple[frozenset[str], frozenset[str], bool]:
    before, after = _host_cached(b, req, ix, cuda_pin)
    host = before + after
    hard, soft = _split_kinds(host)
    return hard, soft, any(p.kind == "framework_cuda_mismatch" and not p.message for p in host)


def _gpu_signature(b: Build, ix: Index) -> tuple:
    """What `gpu_arch`'s verdicts read of a build (its sentences read more): the CUDA, the
    compiled architectures and lowest GPU, and, where the row states no lowest GPU, the
    lowest GPUs of its era's rules."""
    era = families.era_gpu_floors(ix, b.framework, b.v) if b.min_cc is None else None
    return b.framework, b.cuda, b.archs, b.min_cc, era, _local_ptxas(b, ix)


def _gpu_kinds(b: Build, signature: tuple, req: Request, ix: Index) -> tuple[frozenset[str], frozenset[str]]:
    """The kinds of `gpu_arch(b, req, ix)`'s (hard problems, soft problems).

    Its loop run over the first GPU of each compute capability finds the same kinds as
    over all GPUs: a capability seen again before the first hard problem found nothing
    hard the first time and adds nothing now; after it, only the toolkit's answers are
    taken, and those have the same kinds for every GPU of a capability."""
    gpus = req.first_of_each_cc
    if len(gpus) == 1:
        return _one_gpu_kinds(b, signature, gpus[0], req, ix)
    hard_kinds: set[str] = set()
    soft_kinds: set[str] = set()
    hard = False
    for i, g in enumerate(gpus):
        key = ("cc kinds", signature, g.cc)
        found = ix.memo.get(key)
        if found is None:
            found = ix.memo[key] = _cc_kinds(b, g, ix)
        (toolkit_hard, toolkit_soft), (build_hard, build_soft) = found
        hard_kinds |= toolkit_hard
        soft_kinds |= toolkit_soft
        if not toolkit_hard:
            hard_kinds |= build_hard
            soft_kinds |= build_soft
        if toolkit_hard or build_hard:
            hard = True
            later_hard, later_soft = _toolkit_kinds_from(b, req, i + 1, ix)
            hard_kinds |= later_hard
            soft_kinds |= later_soft
            break
    if b.min_cc is None and gpus and not hard:
        era_hard, era_soft = _era_kinds(b, signature[4], req, ix)
        hard_kinds |= era_hard
        soft_kinds |= era_soft
    return frozenset(hard_kinds), frozenset(soft_kinds)


def _one_gpu_kinds(b: Build, signature: tuple, g: Gpu, req: Request, ix: Index) -> tuple[frozenset[str], frozenset[str]]:
    """`_gpu_kinds` for a request with one GPU (each target of a fleet, alone), which
    asks it once per signature: the verdicts' kinds without the loop's memo and sets."""
    (toolkit_hard, toolkit_soft), (build_hard, build_soft) = _cc_kinds(b, g, ix)
    if toolkit_hard:
        return toolkit_hard, toolkit_soft
    soft = toolkit_soft | build_soft
    if build_hard or b.min_cc is not None:
        return build_hard, soft
    era_hard, era_soft = _era_kinds(b, signature[4], req, ix)
    return era_hard, soft | era_soft


def _toolkit_kinds_from(b: Build, req: Request, start: int, ix: Index) -> tuple[frozenset[str], frozenset[str]]:
    """The kinds of the toolkit's answers for the GPUs of `first_of_each_cc` from `start`
    on: once a build has a hard problem, only these are added (a fleet's joint request has
    a GPU of every capability, and most builds fail on its oldest). The same for every
    build of `b`'s CUDA."""
    key = ("toolkit kinds from", b.cuda, req.cc_key, start)
    found = ix.memo.get(key)
    if found is None:
        hard: set[str] = set()
        soft: set[str] = set()
        for g in req.first_of_each_cc[start:]:
            verdict = _toolkit_verdict(b.cuda, g.cc, ix)
            if verdict is not None:
                # the kinds follow from the verdict alone (the sentences are not written here)
                kinds = ix.memo.get(("toolkit verdict kinds", verdict))
                if kinds is None:
                    kinds = ix.memo["toolkit verdict kinds", verdict] = _split_kinds(_toolkit_problems(b, g, ix, verdict))
                hard |= kinds[0]
                soft |= kinds[1]
        found = ix.memo[key] = (frozenset(hard), frozenset(soft))
    return found


def _era_kinds(b: Build, floors: tuple[str, ...], req: Request, ix: Index) -> tuple[frozenset[str], frozenset[str]]:
    """The kinds of `gpu_arch`'s era problems, which depend on the era's lowest GPUs and
    the request's capabilities alone."""
    key = ("era kinds", floors, req.cc_key)
    found = ix.memo.get(key)
    if found is None:
        found = ix.memo[key] = _split_kinds(families.era_problems(
            ix, b.framework, b.v, f"{b.framework} {b.version}", req, None, gpus_only=True, gpus=req.first_of_each_cc))
    return found


def _cc_kinds(b: Build, g: Gpu, ix: Index) -> tuple[tuple[frozenset, frozenset], tuple[frozenset, frozenset]]:
    """((hard, soft) kinds of the toolkit's answer, those of the build's) for GPU `g`: taken
    from the problems the answers write, once per combination of the verdicts they follow."""
    key = ("verdict kinds", _toolkit_verdict(b.cuda, g.cc, ix), _archs_verdict(b, g.cc, ix), _below_min_cc(b, g.cc),
           _ptxas_verdict(b, g, ix))
    found = ix.memo.get(key)
    if found is None:
        found = ix.memo[key] = (_split_kinds(_toolkit_knows(b, g, ix)[0]), _split_kinds(_build_knows(b, g, ix)[0]))
    return found


def _ptxas_verdict(b: Build, g: Gpu, ix: Index) -> str | None:
    """None when the local toolkit's ptxas is not used or knows the GPU; else the rule's mode."""
    rule = _local_ptxas(b, ix)
    if rule is None:
        return None
    known = ix.toolkit_sms(b.cuda)
    if known is None or g.sm in known[0] or not ix.toolkit_runs_on(b.cuda, g.cc):
        return None
    return rule.local_ptxas


def _split_kinds(problems: list[Problem]) -> tuple[frozenset[str], frozenset[str]]:
    return frozenset(p.kind for p in problems if not p.soft), frozenset(p.kind for p in problems if p.soft)


# The answers for one build on one GPU depend on nothing else, and a fleet asks them for
# every build on each of its GPUs in every resolve: they are memoised per (build, GPU),
# each as (problems, whether one is hard), in two dictionaries per build keyed by the
# GPU's label (one lookup per GPU in the loop above).
def _answers(b: Build, ix: Index) -> tuple[dict, dict]:
    key = ("gpu answers", id(b))
    found = ix.memo.get(key)
    if found is None:
        found = ix.memo[key] = ({}, {})
    return found


def _toolkit_knows(b: Build, g: Gpu, ix: Index) -> tuple[list[Problem], bool]:
    verdict = _toolkit_verdict(b.cuda, g.cc, ix)
    if verdict is None:
        return _NONE
    found = _toolkit_problems(b, g, ix, verdict)
    return found, any(not p.soft for p in found)


def _toolkit_verdict(cuda: str, cc, ix: Index) -> str | None:
    """None when code of the CUDA `cuda` toolkit runs on a GPU of compute capability `cc`
    (the same for every build of that CUDA); else "unlisted" (the matrix has no
    architecture list for that CUDA) or "cannot"."""
    if ix.toolkit_runs_on(cuda, cc):
        return None
    return "unlisted" if ix.toolkit_sms(cuda) is None else "cannot"


_NONE: tuple[list[Problem], bool] = ([], False)  # read only


def _build_knows(b: Build, g: Gpu, ix: Index) -> tuple[list[Problem], bool]:
    found = _build_archs(b, g, ix)
    rule = _local_ptxas(b, ix)
    if rule is not None:
        found += families.ptxas_problems(ix, rule, b.label, b.cuda, (g,))
    if _below_min_cc(b, g.cc):
        found.append(_Deferred("gpu_arch_unsupported",
                               lambda: f"{b.framework} {b.version} needs compute capability >= {b.min_cc}; "
                                       f"your {g.label} is older, so the GPU must move",
                               (fact(f"{b.framework} {b.version}: min compute capability", b.row),),
                               framework=b.framework))
    return found, any(not p.soft for p in found)


def _local_ptxas(b: Build, ix: Index):
    """The family rule saying build `b` JIT-compiles with the ptxas of the CUDA toolkit it
    loads from the system, or None (a build that brings its CUDA brings its ptxas)."""
    return None if b.bundles_runtime else families.local_ptxas_rule(ix, b.framework, b.v)


def _below_min_cc(b: Build, cc) -> bool:
    return b.min_cc is not None and cc < b.min_cc


def _toolkit_problems(b: Build, g: Gpu, ix: Index, verdict: str) -> list[Problem]:
    if verdict == "unlisted":
        return [unknown(f"the matrix has no architecture list for CUDA {b.cuda}", ("gpu_arch",), framework=b.framework)]
    return [_Deferred("gpu_arch_unsupported",
                      lambda: f"{b.label} is built with CUDA {b.cuda}, which cannot generate code for your {g.label}; "
                              f"{_toolkit_why(b, g, ix)}, so the CUDA variant (or the {b.framework} version) must move",
                      _toolkit_facts(b.cuda, ix), framework=b.framework, hints={"sm": g.sm})]


def _toolkit_facts(cuda: str, ix: Index) -> tuple[Fact, ...]:
    """The fact behind every "CUDA `cuda` cannot generate code for" problem."""
    key = ("toolkit_facts", cuda)
    found = ix.memo.get(key)
    if found is None:
        sms, row = ix.toolkit_sms(cuda)
        found = ix.memo[key] = (fact(f"CUDA {cuda} compiles for sm_{', sm_'.join(str(s) for s in sorted(sms))}", row),)
    return found


def _toolkit_why(b: Build, g: Gpu, ix: Index) -> str:
    """Why the CUDA `b.cuda` toolkit cannot serve GPU `g` (the same for every build of that CUDA)."""
    key = ("toolkit_why", b.cuda, g.label)
    found = ix.memo.get(key)
    if found is not None:
        return found
    first, last, compat = ix.sm_span(g.cc)
    # The oldest toolkit whose code runs on the GPU: native sm_XY, or an older minor of the
    # same major (an sm_80 binary runs on sm_86), which is why a fix may name CUDA < `first`.
    if first is not None and first > b.cuda_v:
        why = f"{g.label} needs CUDA >= {first} for native sm_{g.sm} code"
        if compat is not None and compat < first:
            why += (f", or CUDA >= {major_minor(compat)} for code of an older sm_{g.cc.major}x architecture, "
                    f"which it runs through binary compatibility")
    elif last is not None and last < b.cuda_v:
        why = f"CUDA {last} was the last toolkit for {g.label}"
    else:
        why = f"no CUDA toolkit in the matrix compiles for {g.label}"
    found = ix.memo[key] = why
    return found


def _build_archs(b: Build, g: Gpu, ix: Index) -> list[Problem]:
    verdict = _archs_verdict(b, g.cc, ix)
    if verdict is None:
        return []
    if verdict == "unlisted":
        return [unknown(f"the matrix has no compiled-architecture list for {b.label}", ("gpu_arch",),
                        framework=b.framework)]
    facts = (fact(f"{b.label} carries {' '.join(b.archs)}", b.row),)
    if verdict == "ptx":
        return [_Deferred("ptx_jit",
                          lambda: f"{b.label} has no sm_{g.sm} binary for your {g.label}; the driver will JIT-compile "
                                  f"its PTX at start-up (slow first run)", facts, soft=True, framework=b.framework)]
    return [_Deferred("gpu_arch_unsupported",
                      lambda: f"{b.label} is compiled for {', '.join(b.archs)}, which cannot run on your {g.label}, "
                              f"so the {b.framework} build must move", facts, framework=b.framework, hints={"sm": g.sm})]


def _archs_verdict(b: Build, cc, ix: Index) -> str | None:
    """None when build `b`'s compiled code runs on a GPU of compute capability `cc` (or the
    framework's rows need not list architectures); else "unlisted" (its row lists none),
    "ptx" (only PTX the driver can JIT-compile) or "cannot"."""
    if b.archs is None:
        return "unlisted" if frameworks.get(b.framework).lists_archs else None
    return how_gpu_runs(_compiled(b, ix), cc)


def gpu_runs_build(spelled: Iterable[str] | None, cuda: str, cc, ix: Index) -> str:
    """How a GPU of compute capability `cc` runs a build of CUDA `cuda` that carries the
    archs `spelled` (None: not read), as the GPU -> kernels link judges it: "cannot" when
    the CUDA toolkit cannot generate code for the GPU, "unlisted" when the matrices lack
    the toolkit's or the build's architectures, "ptx" for PTX JIT, "sass" for a binary."""
    toolkit = _toolkit_verdict(cuda, cc, ix)
    if toolkit is not None:
        return toolkit
    if spelled is None:
        return "unlisted"
    return how_gpu_runs(carried_archs(spelled), cc) or "sass"


def how_gpu_runs(carried: tuple[dict[int, int], tuple[int, int] | None], cc) -> str | None:
    """How a GPU of compute capability `cc` runs what an arch list carries (`carried_archs`):
    None from a binary (of its major, at most its minor: sm_80 code runs on sm_86), "ptx"
    from PTX the driver JIT-compiles (of an arch at most its own), else "cannot"."""
    lowest_minor, lowest_ptx = carried
    minor = lowest_minor.get(cc.major)
    if minor is not None and minor <= cc.minor:
        return None
    if lowest_ptx is not None and lowest_ptx <= (cc.major, cc.minor):
        return "ptx"
    return "cannot"


def carried_archs(spelled: Iterable[str]) -> tuple[dict[int, int], tuple[int, int] | None]:
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


def _compiled(b: Build, ix: Index) -> tuple[dict[int, int], tuple[int, int] | None]:
    """`carried_archs` of build `b`'s archs, once per build, as every GPU of a fleet is asked about."""
    key = ("archs", id(b))
    found = ix.memo.get(key)
    if found is None:
        found = ix.memo[key] = carried_archs(frameworks.get(b.framework).spelled_out_archs(b.archs))
    return found


def cudnn(b: Build, req: Request) -> list[Problem]:
    if req.cudnn is None:
        return []
    want = req.cudnn
    if b.cudnn_min:
        low = parse_version(b.cudnn_min).release
        if tuple(want[:2]) < tuple(low[:2]):
            return [Problem("cudnn_mismatch",
                            f"{b.framework} {b.version} needs cuDNN >= {b.cudnn_min}; you asked for cuDNN "
                            f"{'.'.join(map(str, want))}, so cuDNN must move up or {b.framework} down",
                            (fact(f"{b.framework} {b.version}: cudnn_min {b.cudnn_min}", b.row),),
                            framework=b.framework, hints={"cudnn": b.cudnn_min})]
        return []
    if b.cudnn:
        built = parse_version(b.cudnn).release
        same_major = want[0] == built[0]
        minor_ok = len(want) < 2 or len(built) < 2 or want[1] >= built[1]
        if not (same_major and minor_ok):
            return [Problem("cudnn_mismatch",
                            f"{b.label} was compiled with cuDNN {b.cudnn} and loads only cuDNN {built[0]}.x with "
                            f"a minor >= {built[1] if len(built) > 1 else 0}; you asked for cuDNN "
                            f"{'.'.join(map(str, want))}, so cuDNN or the {b.framework} build must move",
                            (fact(f"{b.label}: cudnn {b.cudnn}", b.row),), framework=b.framework,
                            hints={"cudnn": b.cudnn})]
    return []
