"""`envbuild dockerfile`: render the Dockerfile and its whole build context into a folder.

The folder builds as it is with `docker build DIR` (classic builder or BuildKit)."""
from __future__ import annotations

HELP = "render the Dockerfile and build context for the resolved, locked stack"


def configure(parser) -> None:
    from pathlib import Path

    from envbuild.commands._build_inputs import add_build_arguments
    from envbuild.spec.cli_args import add_spec_arguments

    add_spec_arguments(parser)
    parser.add_argument("-o", "--output", type=Path, required=True, metavar="DIR",
                        help="folder to write (replaced as a whole, only once everything was written)")
    add_build_arguments(parser)


def run(args) -> int:
    import tempfile
    from pathlib import Path

    from envbuild.commands._build_inputs import lock_dir_for, resolve_spec
    from envbuild.dockerfile.context import write_context

    spec, resolution = resolve_spec(args)
    with tempfile.TemporaryDirectory(prefix="envbuild-dockerfile-") as scratch:
        lock_dir = lock_dir_for(spec, resolution, args, Path(scratch))
        context = write_context(args.output, resolution, lock_dir, platform=args.platform,
                                mirror=args.registry_mirror, pin_digests=args.pin_digests,
                                wheelhouse=args.wheelhouse)
    print(f"wrote {context.path / 'Dockerfile'} (base {context.base_ref}, {context.installer} environment)")
    return 0
