"""Fill in what the spec left open with the newest combination that passes every check.

Per framework: the builds matching its version constraint, each run through the checks.
Across frameworks: one installer, one Python, and one CUDA major (pip wheels bundle
their runtime, so majors must agree) or one exact CUDA (a conda environment has a
single cudatoolkit / cuda-version). Ranking is newest framework versions first (in the
order the spec lists them), then newest CUDA, then newest Python.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from envbuild import frameworks
from envbuild.core.values import ConflictKind, CudaVersion, major_minor
from envbuild.core.versions import Constraint, parse_version
from envbuild.frameworks.build import Build, known_pythons
from envbuild.resolver import checks, families
from envbuild.resolver.context import Index, fact
from envbuild.resolver.problem import Hints, Problem
from envbuild.resolver.request import CudaPin, Request


@dataclass
class Outcome:
    """What one requested framework can be."""

    name: str
    constraint: Constraint
    pin: CudaPin | None
    viable: list[Build] = field(default_factory=list)
    extra_soft: dict[Build, list[Problem]] = field(default_factory=dict)  # build -> the extra check's warnings
    problems: list[Problem] = field(default_factory=list)  # hard problems when nothing is viable
    nearest: Build | None = None
    unknown: Problem | None = None  # the matrix has no row for the requested version
    stand_in: Problem | None = None  # the rows of another release of the series judged it (a warning)

    def warnings(self, b: Build, req: Request, ix: Index) -> list[Problem]:
        """The warnings of viable build `b`, written when asked (only the chosen build's are read)."""
        return checks.check_build(b, req, ix, self.pin) + self.extra_soft.get(b, [])


def evaluate(name: str, constraint: Constraint, local: CudaPin | None, req: Request, ix: Index,
             extra_check=None, *, judge: bool = True, strict: bool | None = None) -> Outcome:
    """The builds of framework `name` that `constraint` selects, judged against the request.
    `judge=False` only selects them (the request has a conflict that makes their verdicts
    moot): the outcome then holds the selection's warnings alone. Under `strict` (default:
    the spec's) a build with a link the matrices cannot check is viable only when no build
    has every link checked: the choice then is as without it, and the verdict unverified."""
    pin = local or req.cuda
    out = Outcome(name, constraint, pin)
    selected = _selected(name, constraint, pin, ix)
    candidates, out.stand_in = selected.builds, selected.stand_in
    if not candidates:
        out.unknown = _unknown_version(name, constraint, ix, pin)
        return out
    if not judge:
        return out
    if req.installer:
        mine = [b for b in candidates if b.installer == req.installer]
        if not mine:
            others = sorted({b.installer for b in candidates})
            out.problems = [Problem(
                ConflictKind.FRAMEWORK_CUDA_MISMATCH,
                f"{name} {_versions(candidates)} has no {req.installer} GPU build (only {', '.join(others)}: "
                f"{_variants(candidates)}), so the installer or the {name} version must move",
                tuple(dict.fromkeys(_row_fact(b) for b in candidates))[:3], framework=name,
                hints=Hints(no_builds_for_installer=True))]
            out.nearest = candidates[0]
            return out
        candidates = mine
    candidates = _on_platform(candidates, req.platform, ix)
    if strict is None:
        strict = req.spec.strict
    scored = []
    if extra_check is None and not strict:
        # the common case, once per target of a fleet: which builds pass decides, and the
        # summaries of the others are read only when none does
        if selected.newest_first and len(req.frameworks) == 1:
            # one framework: only the newest viable builds can be chosen (`_combine`)
            out.viable = checks.newest_viable(candidates, req, ix, pin, wanted_pythons(req))
        else:
            out.viable = checks.viable_of(candidates, req, ix, pin)
        if out.viable:
            return out
        # none passes: the problems of the nearest build are the conflict
        out.nearest = checks.nearest(candidates, req, ix, pin)
        out.problems = [_word_variant(p, out.nearest, candidates, pin)
                        for p in checks.check_build(out.nearest, req, ix, pin) if _is_hard(p, strict)]
        return out
    # the kinds of the problems decide; only the nearest build's are written below
    for rank, b in enumerate(candidates):
        verdict = checks.verdict(b, req, ix, pin)
        hard, off_pin = verdict.hard, verdict.other_variant
        if strict and checks.UNKNOWN in verdict.soft:
            hard = hard | {checks.UNKNOWN}
        extra = extra_check(b) if extra_check is not None else _NO_PROBLEMS
        if extra:
            hard = hard.union(p.kind for p in extra if _is_hard(p, strict))
            off_pin = off_pin or any(p.hints.other_variant for p in extra if _is_hard(p, strict))
        if hard:
            # A build of the variant the user pinned explains a conflict better than one of another variant.
            scored.append((off_pin, len(hard), rank, b, extra))
        else:
            out.viable.append(b)
            if extra:
                out.extra_soft[b] = extra
    if not out.viable and strict:
        return evaluate(name, constraint, local, req, ix, extra_check, judge=judge, strict=False)
    if not out.viable:
        *_key, nearest, extra = min(scored, key=lambda s: s[:3])
        out.nearest = nearest
        found = checks.check_build(nearest, req, ix, pin) + list(extra)
        out.problems = [_word_variant(p, nearest, candidates, pin) for p in found if _is_hard(p, strict)]
    return out


_NO_PROBLEMS: tuple[Problem, ...] = ()


@dataclass(frozen=True)
class Selected:
    """The builds a version constraint selects, best first."""

    builds: list[Build]
    stand_in: Problem | None  # the warning when the rows of another release of its series stand in for it
    newest_first: bool  # in the order `_combine` ranks: newest release, then newest CUDA, first


def _selected(name: str, constraint: Constraint, pin: CudaPin | None, ix: Index) -> Selected:
    """The builds `constraint` selects. Cached: the targets of a fleet ask the same."""
    key = (name, constraint, pin)
    found = ix.memo.selected.get(key)
    if found is None:
        candidates, stand_in = frameworks.get(name).candidates(constraint, _pinned(constraint), ix), None
        if candidates is None:
            wanted = {v for v in ix.versions.get(name, []) if constraint.contains(v)}
            candidates = [b for b in ix.builds.get(name, []) if b.version in wanted]
        if not candidates:
            candidates, stand_in = _series_stand_in(name, constraint, ix, pin)
        newest_first = all((a.v, a.cuda) >= (b.v, b.cuda) for a, b in zip(candidates, candidates[1:]))
        found = ix.memo.selected[key] = Selected(candidates, stand_in, newest_first)
    return found


def wanted_pythons(req: Request) -> frozenset[str]:
    """The Pythons a choice may use: the request's, else every CPython release envbuild knows."""
    return frozenset((req.python,)) if req.python else frozenset(known_pythons())


def _on_platform(candidates: list[Build], platform: str, ix: Index) -> list[Build]:
    """Rows per platform (PyTorch's Windows wheels): where some build lists the platform,
    those decide. Memoised: the targets of a fleet ask the same."""
    key = (tuple(candidates), platform)
    found = ix.memo.on_platform.get(key)
    if found is None:
        on_platform = [b for b in candidates if platform in b.platforms]
        found = ix.memo.on_platform[key] = on_platform if on_platform and len(on_platform) < len(candidates) else candidates
    return found


def _is_hard(p: Problem, strict: bool) -> bool:
    return not p.soft or (strict and p.kind == checks.UNKNOWN)


def _series_stand_in(name: str, constraint: Constraint, ix: Index, pin: CudaPin | None):
    """A pinned version without rows, judged by the rows of its release series: a pre-release,
    nightly, dev or locally labelled build by its final release (inferred), and `X.Y` (= X.Y.0)
    of a series whose rows begin at X.Y.1 by the series. Returns (builds, warning)."""
    pinned = _pinned(constraint)  # `==0.4` (pip: exactly 0.4.0) included
    if pinned is None or frameworks.get(name).shape.versions_are_series:
        return [], None
    versions = ix.versions.get(name, [])
    series = [v for v in versions if parse_version(v).release[:2] == pinned.release[:2]]
    if not series:
        return [], None
    release = parse_version(pinned.base_version)
    same = [v for v in series if parse_version(v) == release]
    marked = pinned.is_prerelease or pinned.is_postrelease or pinned.is_devrelease or constraint.local is not None
    if marked:
        chosen = same or [min(series, key=parse_version)]
        what = "a nightly/dev build" if pinned.is_devrelease else "a pre-release" if pinned.is_prerelease else \
            "a post-release" if pinned.is_postrelease else f"a +{constraint.local} build"
        note = (f"{name} {constraint.text.lstrip('=')} is {what} without rows of its own; envbuild judged it by the "
                f"{name} {chosen[0]} rows (inferred: the build's own CUDA variants and architectures may differ)")
    elif not same and release.release[2:3] in ((), (0,)):
        first = min(series, key=parse_version)
        withdrawn = [r for r in families.rules_for(ix, name, release, None) if r.released is False]
        if not withdrawn and parse_version(first).release[2:3] != (1,):
            return [], None  # the rows may simply not reach back to X.Y.0
        chosen = series
        x_y = major_minor(release)
        why = (f"was never released ({withdrawn[0].advice})" if withdrawn and withdrawn[0].advice
               else "was never released" if withdrawn else "is not in the matrix")
        asked = constraint.text.lstrip("=")
        said = f"{name} {asked} means {x_y}.0, which" if len(pinned.release) == 2 else f"{name} {asked}"
        note = f"{said} {why}: the {x_y} series begins at {first}; envbuild judged the series, so pin {name}=={x_y}.* (or {first})"
    elif not same:
        # a patch release without rows (TensorFlow's tested configurations are per X.Y):
        # the nearest release of its series below it, else the series' first
        lower = [v for v in series if parse_version(v) <= release]
        chosen = [max(lower, key=parse_version) if lower else min(series, key=parse_version)]
        note = (f"{name} {constraint.text.lstrip('=')} has no rows of its own; envbuild judged it by the {name} "
                f"{chosen[0]} rows of its series (inferred: a patch release keeps its series' build configuration)")
    else:
        return [], None
    builds = [b for b in ix.builds.get(name, []) if b.version in set(chosen)]
    if not marked and len(release.release) >= 3 and release.release[2] > 0:
        # the patch release is what gets installed; its series' row says how it was built
        key = (name, str(release))
        found = ix.memo.stand_in_builds.get(key)
        if found is None:
            found = ix.memo.stand_in_builds[key] = [dataclasses.replace(b, version=str(release)) for b in builds]
        builds = found
    if pin is not None and marked and not any(pin.matches(b.cuda) for b in builds):
        return [], None  # the pinned variant has no rows: only the CUDA-level checks can judge it
    return builds, checks.unknown(note, ("framework_build", "gpu_arch"), framework=name)


def _unknown_version(name: str, constraint: Constraint, ix: Index, pin: CudaPin | None) -> Problem:
    wanted = constraint.text.removeprefix("==") if constraint.text not in ("*", "") else "(any version)"
    known = ix.versions.get(name, [])
    near = nearest_releases(known, constraint)
    span = f"rows cover {known[-1]}..{known[0]}" if known else ""
    if near:
        span = f"the nearest releases it knows: {name} {' and '.join(near)}; {span}"
    span = f" ({span})" if span else ""
    if pin is not None:
        how = f"its CUDA {pin.short} was checked against the driver and GPUs"
    else:
        how = "state the build's CUDA (--cuda 11.8, or a +cu118 label) to check it against the driver and GPUs"
    links = ("framework_build", "gpu_arch", "python") + (() if pin is not None else ("driver",))
    return checks.unknown(f"the matrix has no row for {name} {wanted}{span}, so only the checks that do not "
                          f"need it ran: {how}", links, framework=name, nearest=near)


def nearest_releases(known: list[str], constraint: Constraint) -> tuple[str, ...]:
    """The releases in `known` next to the one `constraint` names (its first clause's
    version): the newest older one and the oldest newer one, where they exist."""
    if not known or not constraint.clauses:
        return ()
    asked = parse_version(constraint.clauses[0][1].removesuffix(".*"))
    versions = sorted(known, key=parse_version)
    older = [v for v in versions if parse_version(v) < asked]
    newer = [v for v in versions if parse_version(v) > asked]
    return tuple(older[-1:] + newer[:1])


def _pinned(constraint: Constraint):
    if constraint.exact is not None:
        return constraint.exact
    if len(constraint.clauses) == 1:
        op, version = constraint.clauses[0]
        if op == "==" and version.endswith(".*"):
            v = parse_version(version[:-2])
            return v if len(v.release) >= 3 else None
    return None


def _word_variant(p: Problem, b: Build, candidates: list[Build], pin: CudaPin | None) -> Problem:
    if not p.hints.other_variant:
        return p
    same = [c for c in candidates if c.version == b.version and c.installer == b.installer]
    return Problem(
        p.kind,
        f"{b.framework} {b.version} on {b.installer} is built only for {_variants(same)}; you asked for "
        f"{_asked(pin, b)}, so the CUDA version or the {b.framework} version must move",
        tuple(_row_fact(c) for c in same[:4]), framework=b.framework)


def _asked(pin: CudaPin | None, b: Build) -> str:
    if pin is None:
        return "another CUDA"
    if pin.text.startswith("+"):
        return pin.text
    if b.installer == "conda" and b.variant.startswith("cudatoolkit"):
        return f"cudatoolkit {pin.text}"
    return f"CUDA {pin.text}"


def _variants(builds: list[Build]) -> str:
    """`cudatoolkit 9.2, 10.1, 10.2` / `CUDA 11.8, 12.1 (+cu118, +cu121)`."""
    cudas = [str(c) for c in sorted({b.cuda for b in builds})]
    heads = {b.variant.split("=")[0] for b in builds if b.installer == "conda" and "=" in b.variant}
    if len(heads) == 1:
        return f"{heads.pop()} {', '.join(cudas)}"
    return f"CUDA {', '.join(cudas)}"


def _versions(builds: list[Build]) -> str:
    vs = list(dict.fromkeys(b.version for b in builds))
    return vs[0] if len(vs) == 1 else f"{vs[-1]}..{vs[0]}"


def _row_fact(b: Build):
    return fact(f"{b.label}", b.row)


@dataclass
class Choice:
    """The builds chosen for every framework, with the Python and installer they share."""

    builds: dict[str, Build]
    python: str | None
    installer: str


def combine(outcomes: list[Outcome], req: Request, ix: Index | None = None) -> tuple[Choice | None, list[Problem]]:
    """The best joint choice of one viable build per framework, or the problems that
    keep the frameworks apart. With `ix`, memoised on what it reads (the targets of a
    fleet mostly have the same viable builds)."""
    if ix is None:
        return _combine(outcomes, req)
    key = (tuple((o.name, tuple(o.viable)) for o in outcomes), req.installer, req.python, req.platform)
    found = ix.memo.combined.get(key)
    if found is None:
        found = ix.memo.combined[key] = _combine(outcomes, req)
    choice, apart = found
    return (None if choice is None else Choice(dict(choice.builds), choice.python, choice.installer)), list(apart)


def _combine(outcomes: list[Outcome], req: Request) -> tuple[Choice | None, list[Problem]]:
    usable = [o for o in outcomes if o.viable]
    if not usable:
        return Choice({}, req.python, req.installer or "pip"), []
    installers = [req.installer] if req.installer else _installer_order(usable)
    pythons = (req.python,) if req.python else tuple(reversed(known_pythons()))
    best, best_score = None, None
    for installer in installers:
        pools = [[b for b in o.viable if b.installer == installer] for o in usable]
        if not all(pools):
            continue
        for keyed in _by_shared_key(pools, installer):
            firsts = [_first_with_python(pool, pythons, req.platform) for pool in keyed]
            newest: dict = {}  # the builds picked -> the newest Python scored with them
            for py in pythons:
                picks = [first.get(py) for first in firsts]
                if None in picks:
                    continue
                py_v = parse_version(py) if py else parse_version("0")
                same = tuple(map(id, picks))
                if same in newest and newest[same] > py_v:
                    continue  # the same builds with a newer Python scored higher
                newest[same] = py_v
                score = (tuple(b.v for b in picks), tuple(b.cuda for b in picks), py_v, -installers.index(installer))
                if best_score is None or score > best_score:
                    best_score = score
                    best = Choice({o.name: b for o, b in zip(usable, picks)}, py, installer)
                # no early stop: the newest release may lack a wheel for the newest Python that an
                # older release has, and releases rank before Pythons
    if best is not None:
        return best, []
    return None, [_why_apart(usable, req)]


def _first_with_python(pool: list[Build], pythons: tuple[str, ...], platform: str) -> dict[str, Build]:
    """Python -> the first build of `pool` with a build for it, for each of `pythons` that
    has one (one pass over the pool instead of one per Python)."""
    missing = set(pythons)
    out: dict[str, Build] = {}
    for b in pool:
        have = b.pythons_on(platform)
        new = missing if have is None else missing & have
        if new:
            for py in new:
                out[py] = b
            missing = missing - new
            if not missing:
                break
    return out


def _installer_order(outcomes: list[Outcome]) -> list[str]:
    # RAPIDS documents conda first; every other framework's primary channel today is pip.
    return ["conda", "pip"] if any(frameworks.get(o.name).install.conda_first for o in outcomes) else ["pip", "conda"]


def _key(b: Build, installer: str) -> CudaVersion | int:
    return b.cuda if installer == "conda" else b.cuda_major


def _by_shared_key(pools: list[list[Build]], installer: str) -> list[list[list[Build]]]:
    """For each `_key` every pool has, newest first: each pool's builds with that key (in order)."""
    grouped = []
    for pool in pools:
        by_key: dict = {}
        for b in pool:
            by_key.setdefault(_key(b, installer), []).append(b)
        grouped.append(by_key)
    common = set(grouped[0]).intersection(*grouped[1:])
    return [[by_key[k] for by_key in grouped]
            for k in sorted(common, reverse=True)]


def _why_apart(outcomes: list[Outcome], req: Request) -> Problem:
    names = " and ".join(f"{o.name} {o.viable[0].version}" for o in outcomes)
    majors = [{b.cuda_major for b in o.viable} for o in outcomes]
    if not set.intersection(*majors):
        parts = "; ".join(f"{o.name} {_versions(o.viable)} for CUDA {', '.join(f'{m}.x' for m in sorted(ms))}"
                          for o, ms in zip(outcomes, majors))
        return Problem(ConflictKind.FRAMEWORK_CUDA_MISMATCH,
                       f"one environment has one CUDA major, but {parts}, so one framework version must move",
                       framework=outcomes[-1].name)
    inst = [{b.installer for b in o.viable} for o in outcomes]
    if not set.intersection(*inst) or (req.installer and not all(req.installer in i for i in inst)):
        parts = "; ".join(f"{o.name} only with {', '.join(sorted(i))}" for o, i in zip(outcomes, inst))
        return Problem(ConflictKind.FRAMEWORK_CUDA_MISMATCH, f"{names} share no installer ({parts}), so one must move",
                       framework=outcomes[-1].name)
    pys = [set().union(*(b.pythons_on(req.platform) or set(known_pythons()) for b in o.viable)) for o in outcomes]
    if req.python or not set.intersection(*pys):
        return Problem(ConflictKind.PYTHON_UNSUPPORTED, f"{names} support no common Python, so one framework version must move",
                       framework=outcomes[-1].name)
    return Problem(ConflictKind.FRAMEWORK_CUDA_MISMATCH,
                   f"{names} have no build for one shared CUDA version, so one framework version must move",
                   framework=outcomes[-1].name)
