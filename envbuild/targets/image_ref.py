"""The image a job runs when none is named: the content tag `envbuild image` gives the
spec (the same resolution, lock and build context), pinned by digest when the registry
already has it."""
from __future__ import annotations

import tempfile
from pathlib import Path


def default_image(spec, args) -> str:
    from envbuild import pipeline
    from envbuild.errors import UserError
    from envbuild.image import tag
    from envbuild.resolver import resolve

    repository = getattr(args, "repository", None) or spec.image_repository
    if not repository:
        raise UserError("no image to run and no repository to name it", where=spec.source or "command line",
                        hint="pass --image REF, or set image.repository in the spec (or --repository)")
    resolution = resolve(spec)
    if not resolution.ok:
        raise UserError(f"the spec does not resolve: {resolution.conflicts[0].message}", where=spec.source or "command line",
                        hint="run `envbuild resolve` on it and apply a fix")
    platform = resolution.resolved.platform
    with tempfile.TemporaryDirectory(prefix="envbuild-export-") as scratch:
        lock_dir = pipeline.lock(spec, resolution, lock_dir=getattr(args, "lock_dir", None), scratch=Path(scratch),
                                 platform=getattr(args, "platform", None), quiet=getattr(args, "quiet", False))
        context = pipeline.context(Path(scratch) / "context", resolution, lock_dir, platform=platform,
                                   mirror=getattr(args, "registry_mirror", None),
                                   pin_digests=getattr(args, "pin_digests", False),
                                   wheelhouse=getattr(args, "wheelhouse", None))
        ref = f"{repository}:{tag.content_tag(resolution, context.path, context.base_digest, platform)}"
    from envbuild.dockerfile.reference import parse
    from envbuild.registry import manifest_digest

    try:
        digest = manifest_digest(parse(ref), timeout=5)
    except UserError:  # registry unreachable: the tag alone still names the image
        digest = None
    return f"{ref}@{digest}" if digest else ref
