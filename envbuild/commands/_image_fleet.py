"""`envbuild image --fleet FLEET`: plan the fewest images that serve every selected target,
then (without `--plan`) build and push them, at most `--jobs N` at once, and write the
manifest of which image each target runs (envbuild/fleet/manifest.py).

Exit 0 when every selected target has an image, 1 when a target has none (no stack serves
it, or its image failed), 2 for bad input, 3 when the engine or the registry is not there.
"""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from envbuild.commands._build_inputs import check_build_flags
from envbuild.commands._fleet_build import build_all, lock_all, tag_all
from envbuild.commands._spec import spec_from_args
from envbuild.fleet import load_fleet, manifest
from envbuild.fleet.plan import FleetPlan, plan_fleet, render_text, to_json
from envbuild.image import engine
from envbuild.image.credentials import check_push_access
from envbuild.image.facts import read
from envbuild.image.make import ImageOptions, check_repository
from envbuild.infra.errors import UserError
from envbuild.output.jsonout import emit
from envbuild.output.progress_lanes import SharedProgress
from envbuild.output.terminal import for_stream

DEFAULT_MANIFEST = "fleet-images.json"


def run_fleet(args) -> int:
    _check_flags(args)
    check_build_flags(args)
    spec = spec_from_args(args, for_image=True)  # the plan is of images
    repository = args.repository or spec.image_repository
    if not repository:
        raise UserError("no image repository", where=spec.source or "command line",
                        hint="set image.repository in the spec or pass --repository REGISTRY/NAME")

    check_repository(repository)
    fleet = load_fleet(args.fleet)
    targets = fleet.select(args.target)
    plan = plan_fleet(spec, targets, read_base=read)
    if args.plan_item is not None:
        plan = FleetPlan([plan.item(args.plan_item)], plan.uncovered)
    if args.plan:
        return _show_plan(args, plan, repository)
    return _build(args, plan, repository, fleet)


def _check_flags(args) -> None:
    if not args.fleet:
        used = next(flag for flag, on in (("--target", args.target), ("--plan", args.plan),
                                          ("--plan-item", args.plan_item is not None),
                                          ("--jobs", args.jobs is not None), ("--manifest", args.manifest)) if on)
        raise UserError(f"{used} needs --fleet", where=used, hint="pass --fleet FLEET.yaml")
    if args.jobs is not None and not 1 <= args.jobs <= 64:
        raise UserError(f"--jobs must be a whole number from 1 to 64, not {args.jobs}", where="--jobs")
    if args.plan_item is None:  # several images: one extra tag or one context folder cannot serve them all
        for flag, on in (("--tag", args.tag), ("--context", args.context is not None)):
            if on:
                raise UserError(f"{flag} names one image, and a fleet plan may have several", where=flag,
                                hint="build one image of the plan with --plan-item N")
    if args.plan and args.manifest:
        raise UserError("--plan builds nothing and writes no manifest", where="--manifest", hint="drop --plan to build")


def _locks(args, plan, scratch: Path):
    return lock_all(plan, lock_root=args.lock_dir, scratch=scratch, quiet=args.quiet)


def _show_plan(args, plan, repository: str) -> int:
    with tempfile.TemporaryDirectory(prefix="envbuild-plan-") as scratch:
        outcomes = _locks(args, plan, Path(scratch))
        tag_all(outcomes, repository, mirror=args.registry_mirror, pin_digests=args.pin_digests,
                wheelhouse=args.wheelhouse)
    tags = {o.image.item: o.tag for o in outcomes}
    failed = [o for o in outcomes if o.error]
    if args.json:
        data = to_json(plan, tags)
        for entry, o in zip(data["images"], outcomes):
            entry["error"] = o.error
        if failed and data["verdict"] == "ok":
            data["verdict"] = "failed"
        emit(data)
    else:
        print(render_text(plan, tags))
        for o in failed:
            print(f"image {o.image.item}: no tag: {o.error}")
    return 1 if plan.uncovered or failed else 0


def _build(args, plan, repository: str, fleet) -> int:
    manifest_path = Path(args.manifest or DEFAULT_MANIFEST)
    kept = manifest.check_existing(manifest_path)  # a foreign file there fails now, not after the builds
    engine.ping()
    if args.push:
        check_push_access(repository)
    progress = SharedProgress(sys.stderr, terminal={"auto": None, "tty": True, "plain": False}[args.progress],
                              quiet=args.quiet)
    options = ImageOptions(repository=repository, extra_tags=tuple(args.tag), push=args.push, platform=args.platform,
                           mirror=args.registry_mirror, pin_digests=args.pin_digests, wheelhouse=args.wheelhouse,
                           verify=args.verify, keep_context=args.context, force_context=args.force)
    with tempfile.TemporaryDirectory(prefix="envbuild-fleet-") as scratch:
        outcomes = _locks(args, plan, Path(scratch))
        build_all(outcomes, options, jobs=args.jobs or 1, progress=progress)
    by_name = {t.name: t for t in fleet.targets}
    entries, lost = [], set()
    for o in outcomes:
        if o.error:
            lost.update(o.targets)
            continue
        digest = o.result.pushed_digest
        for r in o.image.targets:
            entries.append(manifest.entry(by_name[r.target.name], o.result.ref, digest, o.image.item, r.verdict))
    lost.update(r.target.name for r in plan.uncovered)
    manifest.write(manifest_path, kept, entries, fleet=args.fleet, dropped=lost)
    if args.json:
        emit(_build_json(plan, outcomes, str(manifest_path)))
    else:
        _print_build(plan, outcomes, manifest_path, len(entries))
    return 1 if lost else 0


def _print_build(plan, outcomes, manifest_path: Path, written: int) -> None:
    for o in outcomes:
        targets = ", ".join(o.targets)
        if o.error:
            if o.evidence:
                sys.stderr.write(for_stream(o.evidence, sys.stderr).rstrip("\n") + "\n")
            print(f"FAILED  image {o.image.item}  {o.tag or '-'}: {o.error}")
            print(f"        targets without an image: {targets}")
            continue
        r = o.result
        how = "built" if not r.cached else f"up to date ({r.cached})"
        pushed = f", pushed {r.ref.rsplit(':', 1)[0]}@{r.pushed_digest}" if r.pushed_digest else ""
        print(f"{'OK':7} image {o.image.item}  {r.ref}  {how}{pushed}")
        print(f"        targets: {targets}")
    for u in plan.uncovered:
        first = u.conflicts[0] if u.conflicts else None
        print(f"UNCOVERED {u.target.name}: " + (f"[{first.kind}] {first.message}" if first else "no stack serves it"))
    print(f"wrote {manifest_path} ({written} target(s))")


def _build_json(plan, outcomes, manifest_path: str) -> dict:
    data = to_json(plan, {o.image.item: o.tag for o in outcomes})
    data["plan"] = False
    for entry, o in zip(data["images"], outcomes):
        r = o.result
        entry.update({"digest": r.pushed_digest if r else None, "cache_hit": bool(r and r.cached),
                      "cached": r.cached if r else None, "pushed": bool(r and r.pushed_digest), "error": o.error})
    if any(o.error for o in outcomes):
        data["verdict"] = "failed"
    data["manifest"] = manifest_path
    return data
