"""`envbuild wheelhouse SPEC -o DIR`: download every file the lock pins into DIR, for
builds without network access (`image --wheelhouse DIR`)."""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from envbuild.commands._build_inputs import add_build_arguments, lock_dir_for, resolve_spec
from envbuild.dockerfile.lockfiles import read_lock_dir
from envbuild.image.wheelhouse import fill, guard
from envbuild.lock.virtual import glibc_for
from envbuild.output.jsonout import emit
from envbuild.output.progress import Progress
from envbuild.spec.cli_args import add_spec_arguments


def configure(parser) -> None:
    add_spec_arguments(parser)
    parser.add_argument("-o", "--output", type=Path, required=True, metavar="DIR",
                        help="folder to fill (created; files already there with the locked hash are kept)")
    add_build_arguments(parser)
    parser.add_argument("--json", action="store_true",
                        help="print the files as one JSON object (schema/wheelhouse.schema.json)")


def run(args) -> int:
    args.wheelhouse = None  # the folder being filled is not an input here
    guard(args.output)  # a folder that cannot be one fails before any work
    spec, resolution = resolve_spec(args)
    stack = resolution.resolved
    platform = args.platform or stack.platform
    progress = Progress(sys.stderr, quiet=args.quiet)
    with tempfile.TemporaryDirectory(prefix="envbuild-wheelhouse-") as scratch:
        lock_dir = lock_dir_for(spec, resolution, args, Path(scratch))
        lock = read_lock_dir(lock_dir, platform)
        files = fill(lock, args.output, platform=platform, python=stack.python,
                     glibc=glibc_for(stack.base_image.os if stack.base_image else None), progress=progress)
    if args.json:
        channel = args.output / "conda-channel"
        emit({"verdict": "ok", "output": str(args.output), "platform": platform,
              "channel": channel.resolve().as_uri() if channel.is_dir() else None,
              "files": [{"manager": f.manager, "name": f.name, "version": f.version, "path": str(f.path),
                         "sha256": f.sha256, "downloaded": f.downloaded} for f in files]})
        return 0
    new = sum(1 for f in files if f.downloaded)
    print(f"{args.output}: {len(files)} locked file(s), {new} downloaded, {len(files) - new} already there "
          "(hashes checked)")
    return 0
