"""`envbuild export KIND --fleet FLEET` for several targets (or with `--manifest`): one job
definition per target, each running its own image, written to the folder `-o DIR` as
`<job name><suffix>` (envbuild-v100.sh, envbuild-a100-mig.py, ...).

Each target's image comes from `--manifest` (by digest, the manifest checked against the
fleet as it is now), else `--image` (the same for all), else the fleet plan of the SPEC
(envbuild/fleet/plan.py): each target gets the content tag of the image that serves it,
by digest when the registry has it. A target no stack serves gets no job (exit 1, the
others are written).
"""
from __future__ import annotations

import json
import tempfile
from pathlib import Path

from envbuild import pipeline
from envbuild.commands._build_inputs import check_build_flags
from envbuild.commands._export_target import for_kind, judge_target
from envbuild.commands._fleet_build import lock_all
from envbuild.core import fields
from envbuild.fleet.manifest import images_for
from envbuild.fleet.plan import plan_fleet
from envbuild.image.facts import read
from envbuild.infra import atomic
from envbuild.infra.errors import UserError
from envbuild.output import say
from envbuild.targets.job import Job


def run_per_target(args, mod, fleet, targets, spec, settings: dict) -> int:
    if not args.output:
        raise UserError(f"{len(targets)} targets get one job definition each", where="export",
                        hint="name a folder for them with -o DIR (or one target with --target NAME)")
    folder = Path(args.output)
    if folder.exists() and not folder.is_dir():
        raise UserError("exists and is not a folder", where=f"-o {folder}",
                        hint="with several targets (or --manifest), -o names the folder of the job definitions")
    if not folder.parent.is_dir():
        raise UserError("its parent folder does not exist", where=f"-o {folder}", hint="create it first")
    images, uncovered = _images(args, fleet, targets, spec)
    gpus = settings["gpus"] or (spec.gpu_count if spec and spec.gpu_count else None) or 1
    jobs, judged = [], {}
    for t in targets:
        if t.name not in images:
            continue
        # the stack on the target, as a one-target export judges it (the spec, else the
        # labels of the target's image); a conflict writes nothing unless --force
        judged[t.name] = judge_target(spec, t, args, image=images[t.name])
        name = fields.dns_label(f"{args.name or 'envbuild'}-{t.name}"[:63].rstrip("-"), "--name", "job name")
        jobs.append(Job(name=name, image=images[t.name], target=for_kind(t, args.kind), gpus=gpus,
                        time_limit_s=settings["time_limit_s"], memory_mib=settings["memory_mib"],
                        command=settings["command"], static_probe=args.static))
    texts = [(job, mod.render(job)) for job in jobs]  # every definition renders before any is written
    folder.mkdir(exist_ok=True)
    written = []
    for job, text in texts:
        path = folder / f"{job.name}{mod.SUFFIX}"
        atomic.write_text(path, text)
        verdict, unchecked, conflicts = judged[job.target.name]
        written.append({"verdict": verdict, "kind": args.kind, "image": job.image, "target": job.target.name,
                        "file": str(path), "definition": text, "unchecked": unchecked, "conflicts": conflicts})
    if args.json:
        verdicts = {e["verdict"] for e in written}
        verdict = "conflict" if uncovered or "conflict" in verdicts else "unverified" if "unverified" in verdicts else "ok"
        print(json.dumps({"verdict": verdict, "jobs": written,
                          "uncovered": [{"name": r.target.name, "conflicts": [c.message for c in r.conflicts]}
                                        for r in uncovered]}, indent=2))
    else:
        for entry in written:
            say.note(f"wrote {args.kind} job definition for {entry['target']} to {entry['file']}")
    for r in uncovered:
        reason = r.conflicts[0].message if r.conflicts else "no stack serves it"
        say.warning(f"no job for target {r.target.name}: no stack of the spec serves it: {reason}")
    return 1 if uncovered else 0


def _images(args, fleet, targets, spec):
    """(target name -> image, the targets no stack serves)."""
    if args.manifest:
        entries = images_for(args.manifest, targets, fleet.targets)
        unpushed = [name for name, e in entries.items() if not e.digest]
        if unpushed:
            raise UserError(f"the image of target {unpushed[0]} was not pushed (the manifest has no digest)",
                            where=args.manifest, hint="build with `envbuild image SPEC --fleet FLEET --push`, "
                                                      "so each job pulls its image by digest")
        return {name: e.image for name, e in entries.items()}, []
    if args.image:
        return {t.name: args.image for t in targets}, []
    if spec is None:
        raise UserError("no image to run", where="export",
                        hint="pass --manifest fleet-images.json, --image REF, or a SPEC whose images the plan names")
    return _planned_images(args, spec, targets)


def _planned_images(args, spec, targets):
    """Each target's image from the plan of `spec`: its image's content tag (its lock and
    build context, as `envbuild image --fleet` makes them), by digest when pushed."""
    check_build_flags(args)
    repository = args.repository or spec.image_repository
    if not repository:
        raise UserError("no image to run and no repository to name it", where=spec.source or "command line",
                        hint="pass --manifest or --image, or set image.repository in the spec (or --repository)")
    plan = plan_fleet(spec, targets, read_base=read)
    images = {}
    with tempfile.TemporaryDirectory(prefix="envbuild-export-") as scratch:
        for o in lock_all(plan, lock_root=args.lock_dir, scratch=Path(scratch)):
            if o.error:
                raise UserError(f"the image for {', '.join(o.targets)} could not be locked: {o.error}",
                                where=spec.source or "command line")
            ref = pipeline.image_ref(o.image.resolution, repository, o.lock_dir, mirror=args.registry_mirror,
                                     pin_digests=args.pin_digests, wheelhouse=args.wheelhouse)
            images.update(dict.fromkeys(o.targets, ref))
    return images, plan.uncovered
