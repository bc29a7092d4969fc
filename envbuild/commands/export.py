"""`envbuild export KIND`: the job definition that runs an image on a target's GPUs,
for Kubernetes, Slurm, AWS Batch, Metaflow, Coiled or Flyte (envbuild/targets/<kind>.py)."""
from __future__ import annotations

HELP = "write the job definition (k8s, slurm, batch, metaflow, coiled, flyte) that runs an image on a target's GPUs"


def configure(parser) -> None:
    from envbuild.commands._build_inputs import add_build_arguments
    from envbuild.spec.cli_args import add_spec_arguments
    from envbuild.targets import KINDS

    parser.add_argument("kind", metavar="KIND", help=f"one of: {', '.join(KINDS)}")
    add_spec_arguments(parser)
    group = parser.add_argument_group("job")
    group.add_argument("--image", metavar="REF", help="image to run (default: the content tag `envbuild image` "
                       "gives the spec, pinned by digest when the registry has it)")
    group.add_argument("--repository", metavar="REGISTRY/NAME", help="with no --image: where `envbuild image` pushes (default: image.repository in the spec)")
    group.add_argument("--fleet", metavar="FLEET.yaml", help="fleet file the --target is read from")
    group.add_argument("--target", metavar="NAME", help="target in the fleet: its GPU, MIG profile and scheduler settings")
    group.add_argument("--name", metavar="NAME", help="job name (default: envbuild-<target> or envbuild-job)")
    group.add_argument("--command", metavar="CMD", help="the workload, run after the probe (default: the probe alone)")
    group.add_argument("--gpus", metavar="N", help="GPUs per job (default: resources.gpus in the spec, else 1)")
    group.add_argument("--time", default="01:00:00", metavar="TIME",
                       help="time limit as sbatch takes it: 90 (minutes), 30:00, 02:00:00, 1-00:00:00 (default 01:00:00)")
    group.add_argument("--mem", default="16G", metavar="SIZE", help="host memory: 16G, 512M, or a number of GiB (default 16G)")
    group.add_argument("--static", action="store_true", help="the probe runs only its checks that need no GPU (dry runs on GPU-less nodes)")
    group.add_argument("-o", "--output", metavar="FILE", help="write the definition to FILE (default: stdout)")
    group.add_argument("--json", action="store_true", help="print {kind, image, target, file, definition} as JSON")
    add_build_arguments(parser)


def run(args) -> int:
    import json
    import sys

    from envbuild import atomic, fields, say
    from envbuild.commands._build_inputs import check_build_inputs
    from envbuild.errors import UserError
    from envbuild.targets import module
    from envbuild.targets.job import Job

    mod = module(args.kind, "KIND")
    check_build_inputs(args)
    if args.target and not args.fleet:
        raise UserError("--target needs --fleet", where="--target", hint="pass --fleet FLEET.yaml")
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
    if args.fleet:
        from envbuild.fleet import load_fleet

        fleet = load_fleet(args.fleet)
        if not args.target and len(fleet.targets) > 1:
            raise UserError("the fleet has several targets", where="--fleet", hint=f"name one with --target: {', '.join(fleet.names())}")
        target = fleet.select([args.target] if args.target else None)[0]
        if target.kind != args.kind:  # the GPU still comes from the target; its scheduler keys do not apply
            from dataclasses import replace

            target = replace(target, scheduler={"kind": args.kind})
    spec = None
    if args.spec is None:
        from envbuild.spec.cli_args import discover_spec

        args.spec = discover_spec()
    if args.spec or args.framework or args.cuda:
        from envbuild.commands._spec import spec_from_args

        spec = spec_from_args(args)
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
    if args.output:
        atomic.write_text(args.output, text)
    if args.json:
        print(json.dumps({"verdict": "ok", "kind": args.kind, "image": image, "target": target.name if target else None,
                          "file": args.output, "definition": text}, indent=2))
    elif not args.output:
        sys.stdout.write(text)
    else:
        say.note(f"wrote {args.kind} job definition to {args.output}")
    return 0


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
