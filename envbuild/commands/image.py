"""`envbuild image`: build the resolved, locked stack into an image with a
content-addressed tag, skip the build when that tag exists, and push it."""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from envbuild.commands._build_inputs import add_build_arguments, lock_dir_for, resolve_spec
from envbuild.commands._image_fleet import run_fleet
from envbuild.dockerfile import outputs
from envbuild.dockerfile.context import OWNED
from envbuild.image import engine, make
from envbuild.image.credentials import check_push_access
from envbuild.image.make import ImageOptions
from envbuild.image.sizes import summary
from envbuild.infra.errors import UserError
from envbuild.output.jsonout import emit
from envbuild.output.progress import Progress
from envbuild.pipeline import make_image
from envbuild.spec.cli_args import add_spec_arguments


def configure(parser) -> None:
    add_spec_arguments(parser)
    group = parser.add_argument_group("image")
    group.add_argument("--repository", metavar="REGISTRY/NAME",
                       help="where the image is tagged and pushed (default: image.repository in the spec)")
    group.add_argument("--tag", action="append", default=[], metavar="TAG",
                       help="extra tag (repeatable), moved only onto a successfully built image")
    group.add_argument("--push", action="store_true", help="push the image (credentials from your Docker config)")
    group.add_argument("--verify", action=argparse.BooleanOptionalAction, default=False,
                       help="run the verification probe on the new image before tagging and pushing it")
    group.add_argument("--context", type=Path, metavar="DIR", help="keep the build context in DIR")
    group.add_argument("--force", action="store_true",
                       help="keep the context in a --context folder that holds other files: they are left as "
                            "they are, and a Dockerfile or envbuild/ that envbuild did not write is moved aside")
    group.add_argument("--progress", choices=("auto", "tty", "plain"), default="auto",
                       help="live progress on a terminal, plain lines in CI (default: auto)")
    group.add_argument("--json", action="store_true",
                       help="print the outcome as one JSON object (schema/image.schema.json)")
    fleet = parser.add_argument_group(
        "fleet (the fewest images that serve every target of a fleet file; docs/fleets.md)")
    fleet.add_argument("--fleet", metavar="FLEET.yaml", help="plan and build the images this fleet's targets need")
    fleet.add_argument("--target", action="append", default=[], metavar="NAME",
                       help="with --fleet: only these targets (repeatable)")
    fleet.add_argument("--plan", action="store_true",
                       help="print the plan (each image's stack, content tag and targets) and build nothing")
    fleet.add_argument("--plan-item", type=int, metavar="N", help="build only image N of the plan (1 = the first)")
    fleet.add_argument("--jobs", type=int, metavar="N", help="build at most N images at once (default 1)")
    fleet.add_argument("--manifest", metavar="FILE",
                       help="write target -> image reference and digest here (default: fleet-images.json)")
    add_build_arguments(parser)


def run(args) -> int:
    if args.fleet or args.target or args.plan or args.plan_item is not None or args.jobs is not None \
            or args.manifest:
        return run_fleet(args)

    spec, resolution = resolve_spec(args)
    repository = args.repository or spec.image_repository
    if not repository:
        raise UserError("no image repository", where=spec.source or "command line",
                        hint="set image.repository in the spec or pass --repository REGISTRY/NAME")
    make.check_repository(repository)  # a bad name fails before any work
    if args.context is not None:  # a folder that cannot take the context fails before any work
        outputs.guard(args.context, OWNED, force=args.force, spec_source=spec.source, lock_dir=args.lock_dir,
                      flag="--context")
    engine.ping()  # fail in a second when the engine is down, not after a full solve
    if args.push:  # and when the registry will refuse the push (before locking and building)
        check_push_access(repository)
    progress = Progress(sys.stderr, terminal={"auto": None, "tty": True, "plain": False}[args.progress],
                        quiet=args.quiet)
    with tempfile.TemporaryDirectory(prefix="envbuild-image-") as scratch:
        lock_dir = lock_dir_for(spec, resolution, args, Path(scratch))
        options = ImageOptions(repository=repository, extra_tags=tuple(args.tag), push=args.push,
                               platform=args.platform, mirror=args.registry_mirror,
                               pin_digests=args.pin_digests, wheelhouse=args.wheelhouse,
                               verify=args.verify, keep_context=args.context, force_context=args.force)
        result = make_image(resolution, lock_dir, options, progress=progress)
    if args.json:
        emit(image_json(result, repository, resolution))
        return 0

    for line in summary(result):  # on stderr with the progress: stdout stays the reference alone
        progress.line(line)
    print(result.ref)
    if result.pushed_digest:
        print(f"{repository}@{result.pushed_digest}")
    return 0


def image_json(result, repository: str, resolution) -> dict:
    """`image --json` (schema/image.schema.json)."""
    verification = result.verification
    return {
        "verdict": resolution.verdict,
        "unchecked": resolution.unchecked,
        "reference": result.ref,
        "repository": repository,
        "content_tag": result.ref.rsplit(":", 1)[1],
        "digest": result.pushed_digest,
        "image_id": result.image_id,
        "tags": list(result.tags),
        "cache_hit": result.cached is not None,
        "cached": result.cached,
        "pushed": result.pushed_digest is not None,
        "base": {"reference": result.base_ref, "digest": result.base_digest},
        "sizes": {"image_bytes": result.size_bytes, "context_bytes": result.context_bytes,
                  "base_bytes": result.base_bytes, "added_bytes": result.added_bytes,
                  "compressed_bytes": result.compressed_bytes, "pushed_bytes": result.pushed_bytes,
                  "layers": [layer.to_json() for layer in result.layers]},
        "verification": {"verdict": "pass" if verification["ok"] else "fail", **verification}
        if verification else {"verdict": "not_run"},
        "spec_hash": resolution.spec.hash(),
        "matrix_version": resolution.matrix_version,
        "seconds": round(result.seconds, 2),
    }
