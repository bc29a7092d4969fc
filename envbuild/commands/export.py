"""`envbuild export KIND`: the job definition that runs an image on a target's GPUs,
for Kubernetes, Slurm, AWS Batch, Metaflow, Coiled or Flyte (envbuild/targets/<kind>.py)."""
from __future__ import annotations

HELP = "write the job definition (k8s, slurm, batch, metaflow, coiled, flyte) that runs an image on a target's GPUs"


def configure(parser) -> None:
    from envbuild.commands._build_inputs import add_build_arguments
    from envbuild.spec.cli_args import add_spec_arguments
    from envbuild.targets import KINDS

    from envbuild.ci import CI_KINDS

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
    import json
    import sys

    from envbuild import atomic, fields, say
    from envbuild.ci import CI_KINDS
    from envbuild.commands._build_inputs import check_build_inputs
    from envbuild.errors import UserError
    from envbuild.targets import module
    from envbuild.targets.job import Job

    if args.kind in CI_KINDS:
        from envbuild.commands._export_ci import run_ci

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
        from envbuild.spec.cli_args import discover_spec

        args.spec = discover_spec()
    if args.spec or args.framework or args.cuda:
        from envbuild.commands._spec import spec_from_args

        spec = spec_from_args(args, for_image=True)  # the job runs an image
    if args.fleet:
        from envbuild.fleet import load_fleet

        fleet = load_fleet(args.fleet)
        targets = fleet.select(args.target)
        if len(targets) > 1 or args.manifest:  # one job definition per target, each with its own image
            from envbuild.commands._export_fleet import run_per_target

            settings = dict(gpus=gpus, time_limit_s=time_limit_s, memory_mib=memory_mib, command=command)
            return run_per_target(args, mod, fleet, targets, spec, settings)
        target = _for_kind(targets[0], args.kind)
    judged = None  # the stack on the target: (verdict, what was not checked or does not run there)
    if target is not None and spec is not None and not args.image:
        judged = _judge_target(spec, target, args)  # before building the image reference (a lock, a context)
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
        judged = _judge_target(spec, target, args)  # the job is valid: is the stack it runs ok on the target?
    if args.output:
        atomic.write_text(args.output, text)
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


def _for_kind(target, kind: str):
    """The target with its scheduler settings as a `kind` job takes them (the GPU always
    comes from the target; another kind's keys do not apply, unless `kind` adopts them)."""
    from dataclasses import replace

    from envbuild.targets import scheduler_for

    return target if target.kind == kind else replace(target, scheduler=scheduler_for(target.scheduler, kind))


def _judge_target(spec, target, args, image: str | None = None) -> tuple[str, list, list]:
    """The stack's verdict on the target (the spec, else the labels of an image envbuild
    built: `image`, else --image), with its unchecked links and conflicts as `resolve --json` gives them. A
    conflict, or under --strict a link not checked or a stack not judged, writes nothing
    (exit 1) unless --force. A stack that could not be judged is unverified: every link of
    it is unchecked there, and a warning says why."""
    from envbuild import say
    from envbuild.errors import Refused, Unresolved
    from envbuild.fleet.judge import image_spec, judge
    from envbuild.image_facts import read
    from envbuild.model import LINKS, to_jsonable

    why = "no spec and no image to read one from"
    image = image or args.image  # `image`: the target's own, from a fleet manifest
    if spec is None and image:
        spec, why = image_spec(image, target.platform)
    if spec is None:
        if args.strict and not args.force:
            raise Refused(f"target {target.name}: the stack was not judged: {why}; nothing was written "
                          f"(pass the SPEC, or --force)")
        say.warning(f"the stack was not judged on target {target.name}: {why}")
        return "unverified", [{"links": list(LINKS), "message": f"the stack was not judged on target "
                                                               f"{target.name}: {why}"}], []
    judged = judge(spec, (target,), read_base=read)[target.name]
    if judged.refused(spec.strict or bool(args.strict)):
        if not args.force:
            raise Unresolved(judged.resolution, note=f"the stack does not run on target {target.name} as asked; "
                             f"nothing was written (--force writes the job anyway)")
        say.warning(f"writing the job for target {target.name} although the stack is {judged.verdict} there: "
                    f"{judged.reason}")
    elif judged.verdict == "unverified":
        say.warning(f"target {target.name}: unverified: {judged.reason}")
    return (judged.verdict, to_jsonable(judged.resolution.unchecked), to_jsonable(judged.resolution.conflicts))


def _default_image(spec, args) -> str:
    """The image a job runs when none is named: the one `envbuild image` makes of the spec
    (the same resolution, lock and build context), pinned by digest when the registry has it."""
    import tempfile
    from pathlib import Path

    from envbuild import pipeline
    from envbuild.errors import Unresolved, UserError

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
