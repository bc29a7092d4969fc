"""What `envbuild dockerfile` and `envbuild image` share: spec -> resolution -> lock folder."""
from __future__ import annotations

import sys
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
    """The resolved spec; a conflict prints the resolver's report and exits 1."""
    from envbuild.dockerfile.mirror import parse_mirror
    from envbuild.spec.cli_args import spec_from_args

    if args.registry_mirror:  # bad flags fail before any work
        parse_mirror(args.registry_mirror)
    from envbuild.errors import UserError

    if args.wheelhouse is not None and not args.wheelhouse.is_dir():
        raise UserError("folder does not exist", where=f"--wheelhouse {args.wheelhouse}")
    if args.lock_dir is not None and args.lock_dir.exists() and not args.lock_dir.is_dir():
        raise UserError("exists and is not a folder", where=f"--lock-dir {args.lock_dir}",
                        hint="name the folder `envbuild lock -o DIR` wrote, or a new one to lock into")
    spec = spec_from_args(args)
    from envbuild.resolver import resolve

    resolution = resolve(spec)
    if not resolution.ok:
        from envbuild.jsonout import emit, wanted
        from envbuild.report import render

        print(render(resolution, colour=False), file=sys.stderr)
        if wanted(args):  # the resolver's own JSON (schema/resolve.schema.json), verdict "conflict"
            emit(resolution.to_json())
        raise SystemExit(1)
    return spec, resolution


def lock_dir_for(spec, resolution, args, scratch: Path) -> Path:
    """A lock folder that matches the spec: the user's when it is current, else a fresh lock."""
    from envbuild.lock import api
    from envbuild.lock.check import check

    platform = getattr(args, "platform", None)
    platforms = (platform,) if platform else None
    if args.lock_dir is not None:
        if args.lock_dir.is_dir() and not check(spec, resolution, platforms, args.lock_dir):
            return args.lock_dir
        target = args.lock_dir
    else:
        target = scratch / "lock"
    from envbuild.lock.pip_lock import PipLockFailed

    if not getattr(args, "quiet", False):  # -q: errors only
        print(f"envbuild: locking into {target}", file=sys.stderr)
    try:
        api.lock(spec, resolution, platforms, target)
    except (api.LockConflict, PipLockFailed) as exc:
        from envbuild.urls import mask_text

        # The same refusal `envbuild lock` gives: the conflict in one line each, exit 1.
        for conflict in exc.conflicts or ():
            print(mask_text(f"envbuild: lock conflict: {conflict.message}"), file=sys.stderr)
        if not exc.conflicts:
            print(mask_text(f"envbuild: error: the stack could not be locked: {(str(exc).splitlines() or [''])[0]}"),
                  file=sys.stderr)
        from envbuild.jsonout import emit, wanted

        if wanted(args):
            emit({"verdict": "conflict", "stage": "lock", "spec_hash": spec.hash(),
                  "conflicts": [{"message": mask_text(c.message)} for c in exc.conflicts or ()]
                  or [{"message": mask_text((str(exc).splitlines() or [''])[0])}]})
        raise SystemExit(1) from None
    return target
