"""`envbuild export KIND`: the job definition that runs an image on a target's GPUs,
for Kubernetes, Slurm, AWS Batch, Metaflow, Coiled or Flyte (envbuild/targets/<kind>.py)."""
from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from envbuild import pipeline
from envbuild.ci import CI_KINDS
from envbuild.commands._build_inputs import add_build_arguments, check_build_inputs
from envbuild.commands._export_ci import run_ci
from envbuild.commands._export_fleet import run_per_target
from envbuild.commands._export_target import for_kind, judge_target
from envbuild.commands._spec import spec_from_args
from envbuild.core import fields
from envbuild.fleet import load_fleet
from envbuild.infra import atomic
from envbuild.infra.errors import Unresolved, UserError
from envbuild.output import say
from envbuild.spec.cli_args import add_spec_arguments, discover_spec
from envbuild.targets import KINDS, module
from envbuild.targets.job import Job


def configure(parser) -> None:
    parser.add_argument("kind", metavar="KIND", help=f"one of: {', '.join(KINDS)}; or a CI pipeline that builds "
                        f"and verifies a fleet's images: {', '.join(CI_KINDS)}")
    add_spec_arguments(parser)
    group = parser.add_argument_group("job")
    group.add_argument("--image", metavar="REF", help="image to run (default: the content tag `envbuild image` "
                       "gives the spec, pinned by digest when the registry has it)")
    group.add_argument("--repository", metavar="REGISTRY/NAME", help="with no --image: where `envbuild image` pushes (default: image.repository in the spec)")
    group.add_argument("--fleet", metavar="FLEET.yaml", help="fleet file the --target is read from")
    group.add_argument("--target", action="append", default=[], metavar="NAME",
                       help="target in the fleet: its GPU, MIG profile and scheduler settings (repeatable; "
                            "default: every target, one job definition each)")
    group.add_argument("--manifest", metavar="FILE",
                       help="with --fleet: each target runs its own image by digest, as `envbuild image --fleet` "
                            "wrote them in FILE (fleet-images.json)")
    group.add_argument("--name", metavar="NAME", help="job name (default: envbuild-<target> or envbuild-job)")
    group.add_argument("--command", metavar="CMD", help="the workload, run after the probe (default: the probe alone)")
    group.add_argument("--gpus", metavar="N", help="GPUs per job (default: resources.gpus in the spec, else 1)")
    group.add_argument("--time", default="01:00:00", metavar="TIME",
                       help="time limit as sbatch takes it: 90 (minutes), 30:00, 02:00:00, 1-00:00:00 (default 01:00:00)")
    group.add_argument("--mem", default="16G", metavar="SIZE", help="host memory: 16G, 512M, or a number of GiB (default 16G)")
    group.add_argument("--static", action="store_true", help="the probe runs only its checks that need no GPU (dry runs on GPU-less nodes)")
    group.add_argument("--force", action="store_true", help="write the job even when the stack does not resolve on the target")
    group.add_argument("-o", "--output", metavar="FILE",
                       help="write the definition to FILE (default: stdout); for several targets, a folder "
                            "that gets one file per target")
    group.add_argument("--json", action="store_true", help="print {verdict, kind, image, target, file, definition} as JSON (schema/export.schema.json)")
    add_build_arguments(parser)


def run(args) -> int:
    if args.kind in CI_KINDS:
        return run_ci(args)
    mod = module(args.kind, "KIND")
    check_build_inputs(args)
    for flag, on in (("--target", args.target), ("--manifest", args.manifest)):
        if on and not args.fleet:
            raise UserError(f"{flag} needs --fleet", where=flag, hint="pass --fleet FLEET.yaml")
    if args.manifest and args.image:
        raise UserError("give --image or --manifest, not both", where="--manifest", hint="the manifest names each target's image")
    # every flag checked here, by the same validators as the spec's and the fleet's fields
    gpus = fields.gpu_count(args.gpus, "--gpus") if args.gpus is not None else None
    time_limit_s = fields.slurm_time(args.time, "--time")
    memory_mib = fields.memory_mib(args.mem, "--mem", "memory", bare_unit="G")
    command = fields.command_argv(args.command, "--command") if args.command is not None else ()
    if args.name is not None:
        fields.dns_label(args.name, "--name", "job name")
    if args.image is not None:
        fields.image_ref(args.image, "--image")
    if args.repository is not None:
        fields.image_ref(args.repository, "--repository", tag=False, what="repository")
    target = None
    spec = None
    if args.spec is None:
        args.spec = discover_spec()
    if args.spec or args.framework or args.cuda:
        spec = spec_from_args(args, for_image=True)  # the job runs an image
    if args.fleet:
        fleet = load_fleet(args.fleet)
        targets = fleet.select(args.target)
        if len(targets) > 1 or args.manifest:  # one job definition per target, each with its own image

            settings = dict(gpus=gpus, time_limit_s=time_limit_s, memory_mib=memory_mib, command=command)
            return run_per_target(args, mod, fleet, targets, spec, settings)
        target = for_kind(targets[0], args.kind)
    judged = None  # the stack on the target: (verdict, what was not checked or does not run there)
    if target is not None and spec is not None and not args.image:
        judged = judge_target(spec, target, args)  # before building the image reference (a lock, a context)
    image = args.image
    if not image:
        if spec is None:
            raise UserError("no image to run", where="export", hint="pass --image REF, or a SPEC whose image `envbuild image` builds")
        image = _default_image(spec, args)
    gpus = gpus or (spec.gpu_count if spec and spec.gpu_count else None) or 1
    name = args.name or (f"envbuild-{target.name}"[:63].rstrip("-") if target else "envbuild-job")
    job = Job(name=name, image=image, target=target, gpus=gpus, time_limit_s=time_limit_s, memory_mib=memory_mib,
              command=command, static_probe=args.static)
    text = mod.render(job)
    if target is not None and args.image:
        judged = judge_target(spec, target, args)  # the job is valid: is the stack it runs ok on the target?
    if args.output:
        atomic.write_output(args.output, text)
    if args.json:
        verdict, unchecked, conflicts = judged or ("ok", [], [])
        print(json.dumps({"verdict": verdict, "kind": args.kind, "image": image, "target": target.name if target else None,
                          "file": args.output, "definition": text, "unchecked": unchecked, "conflicts": conflicts},
                         indent=2))
    elif not args.output:
        sys.stdout.write(text)
    else:
        say.note(f"wrote {args.kind} job definition to {args.output}")
    return 0


def _default_image(spec, args) -> str:
    """The image a job runs when none is named: the one `envbuild image` makes of the spec
    (the same resolution, lock and build context), pinned by digest when the registry has it."""
    repository = args.repository or spec.image_repository
    if not repository:
        raise UserError("no image to run and no repository to name it", where=spec.source or "command line",
                        hint="pass --image REF, or set image.repository in the spec (or --repository)")
    try:
        resolution = pipeline.resolve(spec)
    except Unresolved as exc:
        raise UserError(exc.args[0], where=spec.source or "command line",
                        hint="run `envbuild resolve` on it and apply a fix") from None
    with tempfile.TemporaryDirectory(prefix="envbuild-export-") as scratch:
        lock_dir = pipeline.lock(spec, resolution, lock_dir=args.lock_dir, scratch=Path(scratch))
        return pipeline.image_ref(resolution, repository, lock_dir, mirror=args.registry_mirror,
                                  pin_digests=args.pin_digests, wheelhouse=args.wheelhouse)
