"""`envbuild dockerfile`: render the Dockerfile and its whole build context into a folder.

The folder builds as it is with `docker build DIR` (classic builder or BuildKit)."""
from __future__ import annotations

import tempfile
from pathlib import Path

from envbuild import pipeline
from envbuild.commands._build_inputs import add_build_arguments, lock_dir_for, resolve_spec
from envbuild.dockerfile import locked, lockfiles, outputs
from envbuild.dockerfile.context import OWNED
from envbuild.output.jsonout import emit
from envbuild.spec.cli_args import add_spec_arguments


def configure(parser) -> None:
    add_spec_arguments(parser)
    parser.add_argument("-o", "--output", type=Path, required=True, metavar="DIR",
                        help="folder to write; only envbuild's own entries there (Dockerfile, envbuild/) are replaced")
    parser.add_argument("--force", action="store_true",
                        help="write into a folder that holds other files: they are left as they are, and a "
                             "Dockerfile or envbuild/ that envbuild did not write is moved aside")
    add_build_arguments(parser)
    parser.add_argument("--json", action="store_true",
                        help="print the outcome as one JSON object (schema/dockerfile.schema.json)")


def run(args) -> int:
    spec, resolution = resolve_spec(args)
    outputs.guard(args.output, OWNED, force=args.force, spec_source=spec.source, lock_dir=args.lock_dir)
    with tempfile.TemporaryDirectory(prefix="envbuild-dockerfile-") as scratch:
        lock_dir = lock_dir_for(spec, resolution, args, Path(scratch))
        context = pipeline.context(args.output, resolution, lock_dir, platform=args.platform,
                                   mirror=args.registry_mirror, pin_digests=args.pin_digests,
                                   wheelhouse=args.wheelhouse, force=args.force)
        lock_files = sorted(p.name for p in lock_dir.iterdir() if p.is_file())
        packages = locked.base_summary(lockfiles.read_lock_dir(lock_dir, args.platform or resolution.resolved.platform))
    if packages is not None:
        packages["layers"] = list(context.pip_layers)
    if args.json:
        emit({"verdict": resolution.verdict, "unchecked": resolution.unchecked, "dockerfile": str(context.path / "Dockerfile"), "context": str(context.path),
              "base": {"reference": context.base_ref, "digest": context.base_digest},
              "installer": context.installer, "lock_dir": str(args.lock_dir) if args.lock_dir else None,
              "lock_files": lock_files, "spec_hash": resolution.spec.hash(),
              "matrix_version": resolution.matrix_version, "packages": packages})
        return 0
    print(f"wrote {context.path / 'Dockerfile'} (base {context.base_ref}, {context.installer} environment)")
    if packages is not None:
        print(f"  {locked.base_summary_line(packages)}")
        if packages["note"]:
            print(f"  note: {packages['note']}")
    return 0
