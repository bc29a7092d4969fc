"""spec -> image: context, content tag, cache check, build, verify, tag, push.

`make_image` is what `envbuild image` runs once the spec is resolved and locked; tests
and other tools call it with a Resolution and a lock folder directly.
"""
from __future__ import annotations

import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from envbuild.errors import EnvironmentProblem, UserError
from envbuild.model import Resolution


@dataclass(frozen=True)
class ImageOptions:
    repository: str
    extra_tags: tuple[str, ...] = ()
    push: bool = False
    platform: str | None = None
    mirror: str | None = None
    pin_digests: bool = False
    wheelhouse: Path | None = None
    verify: bool = False
    check_registry: bool = True  # look for the content tag in the registry before building
    keep_context: Path | None = None  # write the build context here instead of a temp folder
    force_context: bool = False  # keep_context may hold other files (left as they are)


@dataclass
class ImageResult:
    ref: str  # repository:content-tag
    image_id: str | None
    cached: str | None  # None (built) | "local" | "registry"
    pushed_digest: str | None = None
    tags: list[str] = field(default_factory=list)
    seconds: float = 0.0
    base_ref: str | None = None
    base_digest: str | None = None
    size_bytes: int | None = None  # the image as the engine stores it (uncompressed)
    context_bytes: int | None = None
    verification: dict | None = None  # verify's report summary when --verify ran
    labels: dict = field(default_factory=dict)  # labels added at build time (created, revision...)


class VerifyFailed(UserError):
    exit_code = 1


def _say(progress, text: str) -> None:
    progress.line(text)


def _in_registry(ref: str) -> bool | None:
    """True/False when the registry answered, None when it could not be asked."""
    from envbuild.dockerfile.digests import manifest_digest
    from envbuild.dockerfile.reference import parse

    try:
        return manifest_digest(parse(ref), timeout=3) is not None
    except (EnvironmentProblem, UserError):
        return None


def make_image(resolution: Resolution, lock_dir: Path, options: ImageOptions, *, progress=None) -> ImageResult:
    from envbuild.dockerfile.context import write_context
    from envbuild.dockerfile.reference import parse
    from envbuild.image import build, engine, push, tag

    start = time.monotonic()
    progress = progress or build.Progress()
    repository = options.repository
    parse(repository)  # a bad repository name fails before any work
    if ":" in repository.rsplit("/", 1)[-1] or "@" in repository:
        raise UserError(f"the repository {repository!r} must not carry a tag or digest",
                        where="--repository", hint="envbuild chooses the tag; add more with --tag")
    platform = options.platform or resolution.resolved.platform
    if options.push:  # a refused login fails now, not after a long build
        from envbuild.image.credentials import check_push_access

        check_push_access(repository)
    workdir = Path(tempfile.mkdtemp(prefix="envbuild-image-"))
    try:
        out = options.keep_context or workdir / "context"
        context = write_context(out, resolution, lock_dir, platform=platform, mirror=options.mirror,
                                pin_digests=options.pin_digests, wheelhouse=options.wheelhouse,
                                force=options.force_context)
        content = tag.content_tag(resolution, context.path, context.base_digest, platform)
        ref = f"{repository}:{content}"
        local = engine.light_inspect(ref)
        result = ImageResult(ref=ref, image_id=local["Id"] if local else None, cached=None,
                             base_ref=context.base_ref, base_digest=context.base_digest)
        if local and not (options.push or options.extra_tags or options.verify):
            # Nothing to build, tag or push: answer without loading the docker SDK.
            result.cached, result.size_bytes = "local", local.get("Size")
            result.tags.append(ref)
            labels = (local.get("Config") or {}).get("Labels") or {}
            result.base_digest = labels.get("org.opencontainers.image.base.digest") or result.base_digest
            _say(progress, f"up to date: {ref} already exists locally; nothing to build")
            result.seconds = time.monotonic() - start
            return result
        client = engine.connect()

        if result.image_id:
            result.cached = "local"
        elif options.check_registry and _in_registry(ref):
            result.cached = "registry"
        if result.cached == "registry" and (options.extra_tags or options.verify):  # both need the image here
            client.api.pull(repository, content)
            result.image_id = engine.local_image_id(client, ref)
        if result.cached:
            _say(progress, f"up to date: {ref} already exists {'locally' if result.cached == 'local' else 'in the registry'}; "
                           "nothing to build")
            if options.verify:  # an earlier run may have built it unverified: check it before tagging or pushing
                result.verification = _verify(result.image_id, resolution, progress)
        else:
            _say(progress, f"building {ref} from {context.base_ref}")
            result.base_digest = pull_base(client, context.base_ref, platform, progress) or result.base_digest
            result.labels = build_labels(resolution, ref, result.base_digest)
            result.context_bytes = sum(p.stat().st_size for p in context.path.rglob("*") if p.is_file())
            image_id = build.build(client, context.path, platform=platform, progress=progress, labels=result.labels)
            if options.verify:
                result.verification = _verify(image_id, resolution, progress)
            result.image_id = image_id

        if result.image_id:  # only a finished (and, when asked, verified) image gets tags
            for name in (content, *options.extra_tags):
                client.api.tag(result.image_id, repository, name)
                result.tags.append(f"{repository}:{name}")
            result.size_bytes = client.api.inspect_image(result.image_id).get("Size")
            if not result.cached:
                _say(progress, f"built {ref} ({result.image_id[:19]}) in {time.monotonic() - start:.1f}s")

        if options.push:
            names = [content, *options.extra_tags]
            if result.cached == "registry":  # the content tag is there already
                from envbuild.dockerfile.digests import manifest_digest

                result.pushed_digest = manifest_digest(parse(ref))
                names = list(options.extra_tags)
            for name in names:
                _say(progress, f"pushing {repository}:{name}")
                result.pushed_digest = push.push(client, repository, name, progress=progress)
            _say(progress, f"pushed {repository}@{result.pushed_digest}")
        result.seconds = time.monotonic() - start
        return result
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def pull_base(client, base_ref: str, platform: str, progress) -> str | None:
    """Pull the base with progress (a multi-GB framework base takes minutes); return the
    digest it was pulled by, None when the engine could not pull it (the build then
    uses what the engine has, or fails with the engine's own words)."""
    import docker

    from envbuild.image.build import _docker_platform

    name, _, digest = base_ref.partition("@")
    repository, tag = (name.rsplit(":", 1) if ":" in name.rsplit("/", 1)[-1] else (name, "latest"))
    layers = {}
    try:
        for item in client.api.pull(repository, digest or tag, stream=True, decode=True,
                                    platform=_docker_platform(platform)):
            detail, layer = item.get("progressDetail") or {}, item.get("id")
            if item.get("status") == "Downloading" and layer and detail.get("total"):
                task = layers.get(layer) or layers.setdefault(layer, progress.task(f"base layer {layer}",
                                                                                   total=detail["total"]))
                task.update(detail.get("current", 0), total=detail["total"])
            elif item.get("status") in ("Download complete", "Pull complete") and layer in layers:
                layers.pop(layer).done("downloaded")
            elif item.get("status", "").startswith("Digest: "):
                digest = item["status"].split(" ", 1)[1].strip()
            if "error" in item:
                break
    except docker.errors.APIError:
        pass
    progress.done()
    if not digest:  # not pullable here (air-gapped): the digest the engine recorded, if any
        try:
            found = client.api.inspect_image(base_ref).get("RepoDigests") or []
        except docker.errors.APIError:
            found = []
        digest = next((d.split("@", 1)[1] for d in found if d.split("@", 1)[0] == repository), None) or \
            next((d.split("@", 1)[1] for d in found), None)
    return digest or None


def build_labels(resolution: Resolution, ref: str, base_digest: str | None) -> dict[str, str]:
    """Labels set at build time: they vary per build (time, commit), so they stay out of
    the Dockerfile and the content tag."""
    from datetime import datetime, timezone

    from envbuild.image.provenance import git_provenance

    labels = {
        "org.opencontainers.image.created": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "org.opencontainers.image.version": ref.rsplit(":", 1)[1],
        "org.opencontainers.image.base.digest": base_digest or "",
    }
    labels.update(git_provenance(resolution.spec.source))
    return {k: v for k, v in labels.items() if v}


def _verify(image_id: str, resolution: Resolution, progress) -> dict:
    """The verification gate: the image is tagged only if the probe's required checks pass."""
    from envbuild.verify import run_verify
    from envbuild.verify.summary import summary_text

    _say(progress, f"verifying {image_id[:19]} before tagging it")
    report = run_verify(image_id, gpus="all", expect_spec=resolution, client=None, progress=progress)
    _say(progress, summary_text(report))
    if not report.ok:
        raise VerifyFailed(f"the image {image_id[:19]} failed verification; no tag was moved onto it "
                           "and nothing was pushed",
                           hint="see the probe's report above; `envbuild verify IMAGE` runs it again")
    return report.to_json()["summary"]
