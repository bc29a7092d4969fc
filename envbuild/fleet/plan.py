"""The fewest images that cover a fleet: which stacks to build, and which targets each serves.

A stack that works on every selected target is one image. When there is none (a V100
partition on an old driver, H100 MIG slices that need CUDA 12), the plan is a cover:

1. Candidate stacks. The joint choice (`envbuild.fleet.resolve`) when it exists, and the
   stack each target not served by it gets when resolved alone. A target whose own resolve
   conflicts (a GPU its driver cannot drive, too little memory) no stack can serve: it is
   `uncovered`, with those conflicts.
2. What each candidate serves: the spec pinned to it (framework versions, CUDA, Python,
   installer) and checked on every target with that target's driver, GPU, MIG floors and
   memory, through the same per-target resolves as `resolve --fleet` (one resolve per
   distinct driver and GPU class, shared by all candidates). Answers already known are
   not asked again: the joint stack was checked on every target, and a target whose own
   resolve chose a stack runs it; with a single candidate nothing is left to ask.
3. The cover. Candidates are ordered newest first (framework versions, then CUDA, then
   Python), and the smallest set of them that serves every coverable target is searched
   exactly, trying the sets of each size in that order, so the first cover found is the
   newest among the smallest. Past SEARCH_LIMIT sets the search stops and the cover is
   built greedily instead: each time the candidate serving the most targets still
   unserved, the newer on a tie. Targets are few and their stacks fewer, so the exact
   search is the rule.
4. Each target goes to the newest chosen image that serves it; each image's own
   resolution is the spec pinned to its stack over the GPUs of its targets with their
   oldest driver (what the image is locked and built for).

Targets on different platforms never share an image: each platform is planned alone.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

from envbuild.core.model import Resolution, Spec, to_jsonable
from envbuild.core.versions import parse_version
from envbuild.fleet import Target
from envbuild.fleet.resolve import Resolves, TargetResult, _pin, resolve_fleet, resolve_joint
from envbuild.infra.errors import UserError

SEARCH_LIMIT = 20000  # candidate sets the exact search may try before the greedy rule takes over


@dataclass
class PlannedImage:
    item: int  # 1-based, in the plan's order (newest stack first)
    resolution: Resolution  # the spec pinned to the stack, over its targets' GPUs with their oldest driver
    targets: list[TargetResult]  # each target checked with this stack (verdict ok or unverified)

    @property
    def stack(self):
        return self.resolution.resolved

    def stack_json(self) -> dict[str, Any]:
        s = self.stack
        return {"frameworks": [{"name": f.name, "version": f.version, "cuda": f.cuda} for f in s.frameworks],
                "cuda": s.cuda, "cudnn": s.cudnn, "python": s.python, "installer": s.installer,
                "platform": s.platform, "base_image": s.base_image.ref if s.base_image else None}

    def describe(self) -> str:
        s = self.stack
        parts = [f"{f.name} {f.version}" for f in s.frameworks] + ([f"CUDA {s.cuda}"] if s.cuda else [])
        base = f", base {s.base_image.ref}" if s.base_image else ""
        return f"{', '.join(parts) or 'no framework'} (Python {s.python}, {s.installer}, {s.platform}{base})"

    def slug(self) -> str:
        """A folder name for this stack's lock: the same stack, the same folder, run after run."""
        s = self.stack
        parts = [s.platform, *(f"{f.name}{f.version}" for f in s.frameworks),
                 *([f"cuda{s.cuda}"] if s.cuda else []), f"py{s.python}", s.installer]
        return "-".join("".join(c if c.isalnum() or c in "._-" else "_" for c in p) for p in parts)


@dataclass
class FleetPlan:
    images: list[PlannedImage]
    uncovered: list[TargetResult]  # no stack serves them; each with its own conflicts

    @property
    def verdict(self) -> str:
        return "conflict" if self.uncovered else "ok"

    def item(self, number: int) -> PlannedImage:
        if not 1 <= number <= len(self.images):
            raise UserError(f"the plan has no image {number}", where="--plan-item",
                            hint=f"the plan has {len(self.images)} image(s): give 1 to {len(self.images)}"
                            if self.images else "no stack serves any selected target (see `--plan`)")
        return self.images[number - 1]

    def image_of(self, target: str) -> PlannedImage | None:
        return next((i for i in self.images if any(r.target.name == target for r in i.targets)), None)


def plan_fleet(spec: Spec, targets: tuple[Target, ...], *, read_base=None) -> FleetPlan:
    resolves = Resolves(spec, read_base)
    images: list[tuple[Resolution, list[TargetResult]]] = []
    uncovered: list[TargetResult] = []
    for platform in dict.fromkeys(t.platform for t in targets):
        group = tuple(t for t in targets if t.platform == platform)
        found, lost = _plan_platform(spec, group, targets, resolves)
        images += found
        uncovered += lost
    return FleetPlan([PlannedImage(i, res, served) for i, (res, served) in enumerate(images, 1)], uncovered)


def _plan_platform(spec: Spec, group: tuple[Target, ...], fleet: tuple[Target, ...], resolves: Resolves):
    first = resolve_fleet(spec, group, joint_fixes=False, resolves=resolves, peers=fleet)
    joint = first.joint[0]
    candidates: dict[tuple, Resolution] = {}
    served: dict[tuple, dict[str, TargetResult]] = {}  # candidate -> the targets known to run it, with their check
    known: dict[tuple, set[str]] = {}  # candidate -> the targets whose answer for it is known
    uncovered = []
    if joint.ok:  # every target was checked with the joint stack pinned
        key = _key(joint)
        candidates[key] = joint
        served[key] = {r.target.name: r for r in first.targets if r.verdict != "conflict"}
        known[key] = {t.name for t in group}
    for r in first.targets:
        if joint.ok and r.verdict != "conflict":
            continue
        # its own stack: already resolved alone when there was no joint one
        alone = r if not joint.ok else \
            resolve_fleet(spec, (r.target,), joint_fixes=False, resolves=resolves, peers=fleet).targets[0]
        if alone.verdict == "conflict":
            uncovered.append(alone)
            continue
        key = _key(alone.resolution)
        candidates.setdefault(key, alone.resolution)
        served.setdefault(key, {})[r.target.name] = alone
        known.setdefault(key, set()).add(r.target.name)
    coverable = [t for t in group if any(t.name in s for s in served.values())]
    if not coverable:
        return [], uncovered
    order = sorted(candidates, key=lambda k: _newness(candidates[k]), reverse=True)
    if len(order) > 1:  # each stack checked on the targets whose answer for it is not known yet
        for key in order:
            rest = tuple(t for t in coverable if t.name not in known[key])
            if rest:
                checked = resolve_fleet(_pin(spec, candidates[key]), rest, joint_fixes=False, resolves=resolves,
                                        peers=fleet)
                served[key].update({r.target.name: r for r in checked.targets if r.verdict != "conflict"})
    serves = [set(served[key]) for key in order]
    chosen = _cover(serves, {t.name for t in coverable})
    images, left = [], list(coverable)
    for index in chosen:  # newest first: a target served by several chosen stacks takes the newest
        mine = tuple(t for t in left if t.name in serves[index])
        left = [t for t in left if t.name not in serves[index]]
        if mine:
            stack = candidates[order[index]]
            own = resolve_joint(_pin(spec, stack), mine, resolves)  # what the image is locked and built for
            images.append((own if own.ok else stack, [served[order[index]][t.name] for t in mine]))
    return images, uncovered


def _key(res: Resolution) -> tuple:
    """What pinning a stack pins (envbuild.fleet.resolve._pin), and its platform."""
    s = res.resolved
    return (s.platform, tuple((f.name, f.version, f.cuda) for f in s.frameworks), s.cuda, s.python, s.installer)


def _newness(res: Resolution) -> tuple:
    s = res.resolved
    return (tuple(parse_version(f.version) for f in s.frameworks), parse_version(s.cuda or "0"),
            parse_version(s.python or "0"), repr(_key(res)))


def _cover(serves: list[set[str]], need: set[str], limit: int = SEARCH_LIMIT) -> list[int]:
    """Indexes into `serves` (newest first) of the fewest sets whose union is `need`: the
    first such combination in order, else (past `limit` tries) the greedy cover."""
    tries = 0
    useful = [i for i, s in enumerate(serves) if s & need]
    for size in range(1, len(useful) + 1):
        for combo in itertools.combinations(useful, size):
            tries += 1
            if tries > limit:
                return _greedy(serves, need)
            if set().union(*(serves[i] for i in combo)) >= need:
                return list(combo)
    return _greedy(serves, need)


def _greedy(serves: list[set[str]], need: set[str]) -> list[int]:
    """Each time the set serving the most of what is left, the newer (lower index) on a tie."""
    left, chosen = set(need), []
    while left:
        best = max(range(len(serves)), key=lambda i: (len(serves[i] & left), -i))
        if not serves[best] & left:
            break
        chosen.append(best)
        left -= serves[best]
    return sorted(chosen)


# --- output ---------------------------------------------------------------------------------

def to_json(plan: FleetPlan, tags: dict[int, str | None] | None = None) -> dict[str, Any]:
    """`image --fleet --plan --json` (schema/image.schema.json): each image with its tag
    (repository:content-tag) when known, its stack and its targets' verdicts."""
    tags = tags or {}
    return {
        "verdict": plan.verdict,
        "plan": True,
        "images": [{"item": i.item, "tag": tags.get(i.item), "stack": i.stack_json(),
                    "targets": [{"name": r.target.name, "verdict": r.verdict} for r in i.targets]}
                   for i in plan.images],
        "uncovered": [{"name": r.target.name, "verdict": "conflict", "conflicts": to_jsonable(r.conflicts)}
                      for r in plan.uncovered],
    }


def render_text(plan: FleetPlan, tags: dict[int, str | None] | None = None) -> str:
    tags = tags or {}
    served = sum(len(i.targets) for i in plan.images)
    lines = [f"plan: {len(plan.images)} image(s) for {served} of {served + len(plan.uncovered)} target(s)"]
    for i in plan.images:
        lines.append(f"image {i.item}  {tags.get(i.item) or '(tag not computed)'}")
        lines.append(f"  stack:   {i.describe()}")
        lines.append("  targets: " + ", ".join(f"{r.target.name} ({r.verdict})" for r in i.targets))
    for r in plan.uncovered:
        first = r.conflicts[0] if r.conflicts else None
        reason = f"[{first.kind}] {first.message}" if first else "no stack serves it"
        lines.append(f"uncovered {r.target.name}: {reason}")
    return "\n".join(lines)
