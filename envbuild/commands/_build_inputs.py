"""The build-input flags of `dockerfile`, `image`, `wheelhouse` and `export`, and their
adapter onto the pipeline's resolve and lock stages (envbuild/pipeline.py)."""
from __future__ import annotations

from pathlib import Path


def add_build_arguments(parser) -> None:
    group = parser.add_argument_group("build inputs")
    group.add_argument("--lock-dir", type=Path, metavar="DIR",
                       help="lockfiles from `envbuild lock`; used as they are when they match the spec, "
                            "(re)written there otherwise (default: a fresh lock in a temporary folder)")
    group.add_argument("--registry-mirror", metavar="HOST[/PREFIX]",
                       help="pull the base through this mirror (air-gapped clusters, pull-through caches)")
    group.add_argument("--pin-digests", action="store_true",
                       help="pin the base image by the digest its tag has now (recorded in labels and the lock folder)")
    group.add_argument("--wheelhouse", type=Path, metavar="DIR",
                       help="wheels to install from instead of an index (offline builds): py-rattler and pip "
                            "for conda environments, the locked wheels for pip ones")


def resolve_spec(args):
    """The spec and its resolution (pipeline.resolve: a conflict raises Unresolved, which
    the CLI prints like `envbuild resolve` does, exit 1). Bad flags fail before any work."""
    from envbuild import pipeline
    from envbuild.commands._spec import spec_from_args

    check_build_flags(args)
    spec = spec_from_args(args)
    return spec, pipeline.resolve(spec)


def check_build_flags(args) -> None:
    """--registry-mirror, --wheelhouse and --lock-dir, before any work."""
    from envbuild.dockerfile.mirror import parse_mirror
    from envbuild.errors import UserError

    if args.registry_mirror:
        parse_mirror(args.registry_mirror)
    if args.wheelhouse is not None and not args.wheelhouse.is_dir():
        raise UserError("folder does not exist", where=f"--wheelhouse {args.wheelhouse}")
    if args.lock_dir is not None and args.lock_dir.exists() and not args.lock_dir.is_dir():
        raise UserError("exists and is not a folder", where=f"--lock-dir {args.lock_dir}",
                        hint="name the folder `envbuild lock -o DIR` wrote, or a new one to lock into")


def lock_dir_for(spec, resolution, args, scratch: Path) -> Path:
    """pipeline.lock with the command's --lock-dir and -q (--platform is in the spec)."""
    from envbuild import pipeline

    return pipeline.lock(spec, resolution, lock_dir=args.lock_dir, scratch=scratch,
                         quiet=getattr(args, "quiet", False))
