"""The build-input flags of `dockerfile`, `image`, `wheelhouse` and `export`, and their
adapter onto the pipeline's resolve and lock stages (envbuild/pipeline.py).

ENVBUILD_REGISTRY_MIRROR and ENVBUILD_WHEELHOUSE stand for --registry-mirror and
--wheelhouse when the flag is not given (a CI runner or a site without Docker Hub sets
them once); they are checked like the flags, naming the variable."""
from __future__ import annotations

import os
from pathlib import Path

from envbuild import pipeline
from envbuild.commands._spec import spec_from_args
from envbuild.dockerfile.mirror import parse_mirror
from envbuild.infra.errors import UserError
from envbuild.output import say
from envbuild.output.report import say_unchecked

ENVIRONMENT = {"ENVBUILD_REGISTRY_MIRROR": "registry_mirror", "ENVBUILD_WHEELHOUSE": "wheelhouse"}


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
    check_build_flags(args)
    spec = spec_from_args(args, for_image=True)  # these commands build (or fill the wheels of) an image
    resolution = pipeline.resolve(spec)
    say_unchecked(resolution)
    return spec, resolution


def check_build_flags(args) -> None:
    """--registry-mirror, --wheelhouse (or their variables) and --lock-dir, before any work."""
    check_build_inputs(args)
    if args.lock_dir is not None and args.lock_dir.exists() and not args.lock_dir.is_dir():
        raise UserError("exists and is not a folder", where=f"--lock-dir {args.lock_dir}",
                        hint="name the folder `envbuild lock -o DIR` wrote, or a new one to lock into")


def check_build_inputs(args, environ=None) -> None:
    """The mirror and wheelhouse, from the flags or else the environment, checked before
    any work; a bad value names its flag or variable."""
    environ = os.environ if environ is None else environ
    source = {}
    for name, dest in ENVIRONMENT.items():
        if dest == "wheelhouse" and getattr(args, "command", None) == "wheelhouse":
            continue  # `envbuild wheelhouse` fills a folder: no wheelhouse is its input
        value = environ.get(name, "").strip()
        if getattr(args, dest, None) is None and value:
            say.detail(f"{name}={value} (from the environment; a flag would win)")
            setattr(args, dest, Path(value) if dest == "wheelhouse" else value)
            source[dest] = name
    if args.registry_mirror:
        try:
            parse_mirror(args.registry_mirror)
        except UserError as exc:
            if "registry_mirror" not in source:
                raise
            raise UserError(f"invalid registry mirror {args.registry_mirror!r}", where=source["registry_mirror"],
                            hint=exc.hint) from None
    if args.wheelhouse is not None and not args.wheelhouse.is_dir():
        raise UserError("folder does not exist", where=f"{source.get('wheelhouse', '--wheelhouse')} {args.wheelhouse}")


def lock_dir_for(spec, resolution, args, scratch: Path) -> Path:
    """pipeline.lock with the command's --lock-dir and -q (--platform is in the spec)."""
    return pipeline.lock(spec, resolution, lock_dir=args.lock_dir, scratch=scratch,
                         quiet=getattr(args, "quiet", False))
