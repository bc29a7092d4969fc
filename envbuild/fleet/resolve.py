"""Resolve one spec against every target of a fleet.

1. A joint resolution chooses the open fields once for all selected targets: the spec
   over the union of their GPUs with the oldest driver (every constraint a target adds
   is "CUDA no newer than its driver allows" or "kernels for its GPU", so the union with
   the oldest driver is exactly what all of them together demand). Targets on different
   platforms get one joint resolution per platform.
2. That choice is pinned, and each target is checked alone with its own driver, GPU,
   MIG floors and memory. Resolutions are memoised per (driver, GPU, platform), so a
   fleet of many targets on few GPU types costs a few resolves.
3. When no joint choice exists, each target is resolved alone and the answer says which
   targets force which choice.
"""
from __future__ import annotations

import dataclasses
import functools
import gc
import re
from dataclasses import dataclass, field
from typing import Any

from envbuild import matrix
from envbuild.core.check_lines import checks_json
from envbuild.core.memory_size import fmt_gib
from envbuild.core.model import Conflict, Fact, Fix, Resolution, Spec, Warning, to_jsonable
from envbuild.core.values import ConflictKind, DriverVersion
from envbuild.core.versions import parse_version
from envbuild.fleet.model import Target
from envbuild.fleet.validate import mig_profile
from envbuild.matrix.lookup import find_gpu, mig_parent
from envbuild.output.report import format_fix
from envbuild.resolver import resolve
from envbuild.resolver.named_base import with_named_base


@dataclass
class TargetResult:
    target: Target
    resolution: Resolution
    conflicts: list[Conflict] = field(default_factory=list)
    warnings: list[Warning] = field(default_factory=list)
    alone_choice: str | None = None  # when no joint stack exists: what this target alone would get

    @property
    def verdict(self) -> str:
        """conflict, unverified (a link the matrices cannot check on this target) or ok."""
        if self.conflicts:
            return "conflict"
        return "unverified" if self.resolution.unchecked else "ok"

    def to_json(self) -> dict[str, Any]:
        t = self.target
        return {"name": t.name, "verdict": self.verdict, "gpu": t.gpu, "mig": t.mig, "driver": t.driver,
                "platform": t.platform, "gpu_memory_gib": t.gpu_memory_gib, "scheduler": t.kind,
                "conflicts": to_jsonable(self.conflicts), "unchecked": to_jsonable(self.resolution.unchecked),
                "checks": self.checks(), "warnings": to_jsonable(self.warnings), "alone_choice": self.alone_choice}

    def checks(self) -> list[dict[str, str]]:
        """The resolver's check lines judged by this target's conflicts (its MIG floors
        too), and its GPU memory when the spec asks for an amount."""
        out = checks_json(self.resolution, self.conflicts)
        need = self.resolution.spec.gpu_memory_gib
        if need:
            have = self.target.gpu_memory_gib
            if any(c.kind == ConflictKind.GPU_MEMORY_INSUFFICIENT for c in self.conflicts):
                status, detail = "conflict", f"{fmt_gib(have)} < {fmt_gib(need)}"
            elif have is None:
                status, detail = "skipped", "not checked: GPU memory unknown (add gpu_memory to the target)"
            else:
                status, detail = "ok", f"{fmt_gib(have)} >= {fmt_gib(need)}"
            out.append({"link": "gpu_memory", "label": "GPU memory", "status": status, "detail": detail})
        return out


@dataclass
class FleetResolution:
    joint: list[Resolution]  # one per platform
    targets: list[TargetResult]
    strict: bool = False

    @property
    def verdict(self) -> str:
        """conflict when a joint resolution or a target conflicts; else unverified when a
        target has a link the matrices cannot check; else ok."""
        verdicts = {j.verdict for j in self.joint} | {r.verdict for r in self.targets}
        for verdict in ("conflict", "unverified"):
            if verdict in verdicts:
                return verdict
        return "ok"

    @property
    def ok(self) -> bool:
        """No conflict, and (under strict) no unchecked link: exit 0."""
        return self.verdict == "ok" or (self.verdict == "unverified" and not self.strict)


def resolve_fleet(spec: Spec, targets: tuple[Target, ...], *, joint_fixes: bool = True,
                  read_base=None, resolves: "Resolves | None" = None,
                  peers: tuple[Target, ...] | None = None) -> FleetResolution:
    """`joint_fixes=False` leaves the joint conflicts without fixes (the text report shows
    none: it shows each target's own conflicts with theirs). `read_base` reads a base image
    outside the catalog, as for `envbuild.resolver.resolve`. `resolves` shares the memo of
    earlier calls for the same spec (a plan asks about one fleet with several stacks);
    `peers` are the targets a memory conflict's fix may name (default: `targets`)."""
    # The resolves of a large fleet make a few hundred thousand small objects that live
    # until the answer is written; the cyclic collector's passes over them and over the
    # loaded matrices took about a third of the time and freed nothing, so it waits.
    enabled = gc.isenabled()
    gc.disable()
    try:
        resolves = resolves or Resolves(spec, read_base)
        return _resolve_fleet(spec, targets, joint_fixes, resolves, peers or targets)
    finally:
        if enabled:
            gc.enable()


class Resolves:
    """The resolver's answers for one spec's fleet, one per distinct (pins, driver, GPU
    class, platform): targets that differ only in the GPU's name (L4 and L40S are both
    8.9) get the same answer."""

    def __init__(self, spec: Spec, read_base=None):
        self.m = with_named_base(matrix.load(), spec, read=read_base)  # the spec's own base image, read once
        self.memo: dict[Any, Resolution] = {}
        self.classes: dict[str, tuple] = {}
        self.names: dict[str, str] = {}  # the name the resolver writes for a GPU: its matrix row's
        self.resolved_for: dict[Any, str | None] = {}  # memo key -> the one GPU its resolution was made for

    def gpu_class(self, gpu: str) -> tuple:
        # what the resolver's verdicts and sentences read from a GPU: its compute capability
        # and the platforms it can be in, with what it is part of (a GH200 is an H100 that
        # only an Arm host carries; the sentence on Tegra K1's host does not fit Jetson
        # TK1's); once per name, as the joint request and every target ask. Whether it is
        # a data-center GPU is only in the resolved stack's GPU record, which the fleet's
        # report does not show, so a T4 and an RTX 2080 share one resolve.
        found = self.classes.get(gpu)
        if found is None:
            row = find_gpu(self.m, gpu)
            self.names[gpu] = row.name if row else gpu
            found = self.classes[gpu] = (row.compute_capability, row.host_platforms, row.host) if row else (gpu, None)
        return found

    def cached(self, rest: Spec, driver: str | None, gpus: tuple[str, ...], make, fixes: bool = True,
               joint: bool = False) -> Resolution:
        """`rest` is the spec without its GPUs and driver, the same for every target of a
        platform; `make()` writes the whole spec, only when it is resolved."""
        key = (rest, driver, tuple(self.gpu_class(g) for g in gpus), fixes, joint)
        found = self.memo.get(key)
        if found is None:
            found = self.memo[key] = resolve(make(), self.m, fixes=fixes, joint=joint)
            self.resolved_for[key] = gpus[0] if len(gpus) == 1 else None
        elif self.resolved_for[key] is not None and self.names[self.resolved_for[key]] != self.names[gpus[0]]:
            # the class's answer speaks of the GPU it was resolved for: name this target's
            found = _renamed(found, self.names[self.resolved_for[key]], self.names[gpus[0]])
        return found


def resolve_joint(spec: Spec, group: tuple[Target, ...], resolves: Resolves) -> Resolution:
    """The joint resolution of `group` alone (one platform): `spec` over the union of their
    GPUs with their oldest driver, without fixes, from the shared memo."""
    joint_spec = _joint_spec(spec, list(group))
    return resolves.cached(_without_target(joint_spec), joint_spec.driver, joint_spec.gpus, lambda: joint_spec,
                           False, joint=True)


def _resolve_fleet(spec: Spec, targets: tuple[Target, ...], joint_fixes: bool, resolves: Resolves,
                   peers: tuple[Target, ...]) -> FleetResolution:
    m, cached = resolves.m, resolves.cached
    joints, results = [], []
    for platform in dict.fromkeys(t.platform for t in targets):
        group = [t for t in targets if t.platform == platform]
        joint_spec = _joint_spec(spec, group)
        joint = cached(_without_target(joint_spec), joint_spec.driver, joint_spec.gpus, lambda: joint_spec, joint_fixes,
                       joint=True)
        joints.append(joint)
        pinned = _pin(spec, joint) if not joint.conflicts else spec
        rest = _without_target(_target_spec(pinned, group[0]))
        for t in group:
            res = cached(rest, t.driver, (t.gpu,), lambda: _target_spec(pinned, t))  # noqa: B023 - called at once
            r = TargetResult(t, res, list(res.conflicts), list(res.warnings))
            if joint.conflicts and not res.conflicts:
                r.alone_choice = _choice(res)
            r.conflicts += _mig_conflicts(m, t, res)
            r.conflicts += _memory_conflicts(m, spec, t, peers)
            if t.gpu_memory_gib is None and spec.gpu_memory_gib:
                r.warnings.append(Warning(ConflictKind.GPU_MEMORY_UNKNOWN, f"{t.name}: GPU memory unknown (add gpu_memory to the target); "
                                          f"{fmt_gib(spec.gpu_memory_gib)} not checked"))
            if spec.gpu_count and spec.gpu_count > t.gpus_per_node:
                r.warnings.append(Warning("gpu_count", f"{t.name}: the job needs {spec.gpu_count} GPUs; a node has {t.gpus_per_node}"))
            results.append(r)
    return FleetResolution(joints, results, strict=spec.strict)


def _renamed(res: Resolution, was: str, now: str) -> Resolution:
    """`res` with GPU `was` written as `now` in its conflict and warning sentences and its
    fixes: a target shares the answer of another GPU of its class (Jetson Orin Nano and
    Jetson AGX Orin), and its report must name its own GPU. The facts keep their text, as
    their sources are those of the GPU they were read for."""
    name = _name_pattern(was)

    def text(s: str) -> str:
        return name.sub(lambda _m: now, s) if was in s else s

    def fix(f):
        described = text(f.description)
        return f if described is f.description else dataclasses.replace(f, description=described)

    def conflict(c):
        message, fixes = text(c.message), tuple(fix(f) for f in c.fixes)
        if message is c.message and all(a is b for a, b in zip(fixes, c.fixes)):
            return c
        return dataclasses.replace(c, message=message, fixes=fixes)

    def warning(w):
        message = text(w.message)
        return w if message is w.message else dataclasses.replace(w, message=message)

    return dataclasses.replace(res, conflicts=tuple(conflict(c) for c in res.conflicts),
                               warnings=tuple(warning(w) for w in res.warnings))


@functools.lru_cache(maxsize=256)
def _name_pattern(name: str):
    """`name` as a whole word (not inside "RTX 3090 Ti" for "RTX 3090"): once per GPU name."""
    return re.compile(rf"(?<![\w-]){re.escape(name)}(?![\w-])")


def _joint_spec(spec: Spec, group: list[Target]) -> Spec:
    drivers = [t.driver for t in group if t.driver]
    gpus = list(dict.fromkeys(t.gpu for t in group))
    changes: dict[str, Any] = {"gpus": gpus, "platform": group[0].platform}
    if drivers:
        changes["driver"] = min(drivers, key=DriverVersion.parse)
    return spec.with_changes(changes)


def _target_spec(spec: Spec, t: Target) -> Spec:
    return spec.with_changes({"gpus": [t.gpu], "driver": t.driver, "platform": t.platform})


def _without_target(s: Spec) -> Spec:
    """`s` without its GPUs and driver: what the targets of a platform share. A Spec is a
    frozen dataclass, so it is its own memo key (hashing its JSON for each of 100 targets
    took about 6 ms, and loads OpenSSL)."""
    return s.with_changes({"gpus": [], "driver": None})


def _pin(spec: Spec, joint: Resolution) -> Spec:
    """The spec with the joint choice written in, so every target is checked with it."""
    stack = joint.resolved
    changes: dict[str, Any] = {f"frameworks.{f.name}": f"=={f.version}" for f in stack.frameworks}
    changes.update({"cuda": stack.cuda or spec.cuda, "python": stack.python, "installer": stack.installer})
    return spec.with_changes(changes)


def _choice(res: Resolution) -> str:
    s = res.resolved
    parts = [f"{f.name} {f.version}" for f in s.frameworks] + ([f"CUDA {s.cuda}"] if s.cuda else [])
    return ", ".join(parts)


def _mig_conflicts(m, t: Target, res: Resolution) -> list[Conflict]:
    if not t.mig:
        return []
    parent = mig_parent(m, find_gpu(m, t.gpu))
    floor = next((f for f in m.mig_floors if parent and f.parent == parent.name), None)
    if floor is None:
        return []
    fact = Fact(f"MIG on {floor.parent} needs driver >= {floor.min_driver} and CUDA >= {floor.min_cuda}", floor.source)
    out = []
    if t.driver and DriverVersion.parse(t.driver) < DriverVersion.parse(floor.min_driver):
        out.append(Conflict(ConflictKind.DRIVER_TOO_OLD, f"{t.name}: MIG {t.mig} on {floor.parent} needs driver {floor.min_driver} "
                            f"or newer; the target has {t.driver}", (fact,),
                            (Fix(f"upgrade {t.name}'s driver to {floor.min_driver} or newer", {"driver": floor.min_driver}),)))
    cuda = res.resolved.cuda if res.resolved else None
    if cuda and parse_version(cuda) < parse_version(floor.min_cuda):
        out.append(Conflict(ConflictKind.FRAMEWORK_CUDA_MISMATCH, f"{t.name}: MIG on {floor.parent} needs CUDA {floor.min_cuda} or newer; "
                            f"the environment uses CUDA {cuda}", (fact,),
                            (Fix(f"use CUDA {floor.min_cuda} or newer", {"cuda": floor.min_cuda}),)))
    return out


def _memory_conflicts(m, spec: Spec, t: Target, fleet: tuple[Target, ...]) -> list[Conflict]:
    need = spec.gpu_memory_gib
    if not need or t.gpu_memory_gib is None or t.gpu_memory_gib >= need:
        return []
    where = f"MIG slice {t.mig} of {t.gpu}" if t.mig else t.gpu
    fixes = []
    fitting = [o.name for o in fleet if o.gpu_memory_gib is not None and o.gpu_memory_gib >= need]
    if fitting:
        fixes.append(Fix(f"run on a target with enough memory: {', '.join(fitting)}"))
    if t.mig:
        row = find_gpu(m, t.gpu)
        current = mig_profile(m, row, t.mig)
        bigger = [p.name for p in m.mig_profiles if p.parent == current.parent
                  and p.parent_memory_gb == current.parent_memory_gb and p.memory_gb >= need]
        if bigger:
            fixes.append(Fix(f"use a larger MIG profile on {t.name}: {', '.join(dict.fromkeys(bigger))}"))
    message = (f"{t.name}: the job needs {fmt_gib(need)} of GPU memory; the {where} has {fmt_gib(t.gpu_memory_gib)} "
               f"(from {t.memory_from})")
    facts = ()
    if t.mig:
        prof = next(p for p in m.mig_profiles if p.name == t.mig)
        facts = (Fact(f"MIG profile {t.mig} has {prof.memory_gb:g} GB", prof.source),)
    return [Conflict(ConflictKind.GPU_MEMORY_INSUFFICIENT, message, facts, tuple(fixes))]


def render_text(fr: FleetResolution) -> str:
    rows = [("TARGET", "GPU", "DRIVER", "VERDICT", "REASON")]
    for r in fr.targets:
        reason = r.conflicts[0].message if r.conflicts else (f"alone: {r.alone_choice}" if r.alone_choice else "")
        gpu = r.target.describe_gpu() + (f" ({fmt_gib(r.target.gpu_memory_gib)})" if r.target.gpu_memory_gib else "")
        rows.append((r.target.name, gpu, r.target.driver or "-", r.verdict, reason[:100]))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row[:4], widths)) + "  " + row[4] for row in rows]
    lines.append("")
    for joint in fr.joint:
        if not joint.conflicts and joint.resolved:
            lines.append(f"stack for all targets: {_choice(joint)} (Python {joint.resolved.python}, {joint.resolved.installer})")
        else:
            lines.append("no single stack works on all selected targets:")
            for c in joint.conflicts:
                lines.append(f"  [{c.kind}] {c.message}")
            forced = [r for r in fr.targets if r.alone_choice]
            for r in forced:
                lines.append(f"  {r.target.name} alone: {r.alone_choice}")
    for r in fr.targets:
        for c in r.conflicts:
            lines.append(f"CONFLICT {r.target.name} [{c.kind}] {c.message}")
            for i, fix in enumerate(c.fixes[:3], 1):
                lines.append(f"  fix {i}: {format_fix(fix)}")
        for u in r.resolution.unchecked:
            lines.append(f"unknown {r.target.name}: {u.message}")
        for w in r.warnings:
            lines.append(f"warn {r.target.name} {w.kind}: {w.message}")
    lines.append("")
    counts = f"{sum(r.verdict == 'ok' for r in fr.targets)}/{len(fr.targets)} targets ok"
    unverified = sum(r.verdict == "unverified" for r in fr.targets)
    if unverified:
        counts += f", {unverified} unverified"
    lines.append(f"verdict: {fr.verdict} ({counts})")
    return "\n".join(lines)


def to_json(fr: FleetResolution) -> dict[str, Any]:
    first = fr.joint[0].to_json()
    first["verdict"] = fr.verdict
    first["joint"] = [{"verdict": j.verdict, "conflicts": to_jsonable(j.conflicts)} for j in fr.joint]
    first["targets"] = [r.to_json() for r in fr.targets]
    return first
