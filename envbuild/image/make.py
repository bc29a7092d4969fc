"""The image stages: build (content tag, cache check, build) and publish (tag, push).

`envbuild.pipeline.make_image` runs them in order, with the verify gate between them:
an image gets tags and is pushed only after it passed the gate when one was asked for.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from envbuild.core.model import Resolution
from envbuild.dockerfile.context import BuildContext
from envbuild.dockerfile.reference import parse
from envbuild.image import build as engine_build, engine, push as engine_push, sizes
from envbuild.image.build import _docker_platform
from envbuild.image.provenance import git_provenance
from envbuild.image.registry import image_manifest, manifest_digest
from envbuild.image.tag import content_tag
from envbuild.infra.errors import EnvironmentProblem, UserError


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

    @property
    def needs_image(self) -> bool:
        """Tags, a push and the verify gate need the image in the local engine."""
        return self.push or bool(self.extra_tags) or self.verify


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
    done: bool = False  # nothing left to tag or push: answered from the engine's image list
    holds: tuple[str, ...] = ()  # what each layer envbuild adds to the base holds (BuildContext.layers)
    base_bytes: int | None = None  # the base image as the engine stores it (uncompressed)
    layers: list = field(default_factory=list)  # sizes.LayerSize of each layer envbuild added, oldest first
    compressed_bytes: int | None = None  # the whole image as the registry stores it, once there
    pushed_bytes: int | None = None  # compressed bytes this push uploaded; None without --push

    @property
    def added_bytes(self) -> int | None:
        """What envbuild added to the base: its layers, uncompressed."""
        sizes = [layer.bytes for layer in self.layers]
        return sum(sizes) if sizes and None not in sizes else None


def _say(progress, text: str) -> None:
    progress.line(text)


def _in_registry(ref: str) -> bool | None:
    """True/False when the registry answered, None when it could not be asked."""
    try:
        return _digest_or_raise(ref) is not None
    except (EnvironmentProblem, UserError):
        return None


def _registry_digest(ref: str) -> str | None:
    """The digest of `ref` in its registry; None when it has none or could not be asked."""
    try:
        return _digest_or_raise(ref)
    except (EnvironmentProblem, UserError):
        return None


def _digest_or_raise(ref: str) -> str | None:
    return manifest_digest(parse(ref), timeout=3)


def _registry_sizes(result: ImageResult, platform: str) -> None:
    try:
        found = image_manifest(parse(result.ref), platform, timeout=5)
    except (EnvironmentProblem, UserError):  # sizes are a report: unknown when the registry will not say
        return
    if found is not None:
        measure_registry(result, found[1])


def check_repository(repository: str) -> None:
    """A bad repository name fails before any work."""
    parse(repository)
    if ":" in repository.rsplit("/", 1)[-1] or "@" in repository:
        raise UserError(f"the repository {repository!r} must not carry a tag or digest",
                        where="--repository", hint="envbuild chooses the tag; add more with --tag")


def build(resolution: Resolution, context: BuildContext, options: ImageOptions, *, platform: str,
          progress) -> ImageResult:
    """The image for the context under its content tag: found locally, found in the registry
    (pulled when it is needed here), or built. No tag is moved yet."""
    content = content_tag(resolution, context.path, context.base_digest, platform)
    ref = f"{options.repository}:{content}"
    local = engine.light_inspect(ref)
    result = ImageResult(ref=ref, image_id=local["Id"] if local else None, cached=None,
                         base_ref=context.base_ref, base_digest=context.base_digest, holds=context.layers)
    if local and not options.needs_image:
        # Nothing to build, tag or push: answer without loading the docker SDK.
        result.cached, result.done = "local", True
        result.tags.append(ref)
        labels = (local.get("Config") or {}).get("Labels") or {}
        result.base_digest = labels.get("org.opencontainers.image.base.digest") or result.base_digest
        measure(result, local)
        _say(progress, f"up to date: {ref} already exists locally; nothing to build")
        return result
    client = engine.connect()
    import docker  # the SDK: connect() has loaded it

    if result.image_id:
        result.cached = "local"
    elif options.check_registry and _in_registry(ref):
        result.cached = "registry"
    if result.cached == "registry" and (options.extra_tags or options.verify):  # both need the image here
        try:
            client.api.pull(options.repository, content)
        except docker.errors.APIError as exc:
            raise EnvironmentProblem(f"{ref} is in the registry but cannot be pulled ({exc.explanation or exc})",
                                     hint="check that the registry is reachable from the Docker engine") from None
        result.image_id = engine.local_image_id(client, ref)
    elif result.cached == "registry" and not options.push:  # its sizes are the registry's
        _registry_sizes(result, platform)
    if result.cached:
        _say(progress, f"up to date: {ref} already exists {'locally' if result.cached == 'local' else 'in the registry'}; "
                       "nothing to build")
    else:
        _say(progress, f"building {ref} from {context.base_ref}")
        result.base_digest = pull_base(client, context.base_ref, platform, progress) or result.base_digest
        result.labels = build_labels(resolution, ref, result.base_digest)
        result.context_bytes = sum(p.stat().st_size for p in context.path.rglob("*") if p.is_file())
        result.image_id = engine_build.build(client, context.path, platform=platform, progress=progress,
                                             labels=result.labels)
    return result


# What is true of the tags when a push fails part way (see `push`).
PUSH_AFTERWARDS = "only the tags whose push finished are in the registry; the others are where they were"


def tag(result: ImageResult, options: ImageOptions, *, progress, start: float) -> None:
    """Move the content tag onto the image, and the extra tags unless a push follows (then
    `push` moves each one as it is pushed)."""
    if not result.image_id:  # in the registry only, and nothing here needs it
        return
    client = engine.connect()
    repository, content = options.repository, result.ref.rsplit(":", 1)[1]
    for name in (content, *(() if options.push else options.extra_tags)):
        client.api.tag(result.image_id, repository, name)
        result.tags.append(f"{repository}:{name}")
    measure(result, client.api.inspect_image(result.image_id))
    if not result.cached:
        _say(progress, f"built {result.ref} ({result.image_id[:19]}) in {time.monotonic() - start:.1f}s")


def push(result: ImageResult, options: ImageOptions, *, progress, platform: str) -> None:
    """Push the content tag (unless the registry has it), then each extra tag: moved onto
    the image here, pushed, and put back where it was if its push fails. A push cut off
    part way so moves no tag whose push did not finish, in the registry or locally (the
    content tag names this content wherever it points)."""
    client = engine.connect()
    repository, content = options.repository, result.ref.rsplit(":", 1)[1]
    in_registry = False
    if result.cached == "registry":  # the content tag is there already
        result.pushed_digest = manifest_digest(parse(result.ref))
        in_registry = True
    elif result.cached == "local" and options.check_registry:
        # found here by its content tag: pushed before when the registry has that tag too
        # (the same tag is the same inputs), so only the extra tags go up
        digest = _registry_digest(result.ref)
        if digest:
            result.pushed_digest = digest
            in_registry = True
    uploaded: set[str] = set()
    if not in_registry:
        _say(progress, f"pushing {repository}:{content}")
        pushed = engine_push.push(client, repository, content, progress=progress)
        result.pushed_digest = pushed.digest
        uploaded |= pushed.uploaded
    for name in options.extra_tags:
        before = engine.local_image_id(client, f"{repository}:{name}")
        client.api.tag(result.image_id, repository, name)
        _say(progress, f"pushing {repository}:{name}")
        try:
            pushed = engine_push.push(client, repository, name, progress=progress)
        except BaseException:
            _put_back(client, repository, name, before)
            raise
        result.pushed_digest = pushed.digest
        uploaded |= pushed.uploaded
        result.tags.append(f"{repository}:{name}")
    _say(progress, f"pushed {repository}@{result.pushed_digest}")
    measure_push(result, client, repository, uploaded, platform)


def measure(result: ImageResult, image: dict) -> None:
    """The image's size, its base's and each added layer's, from the engine's records (the
    image's inspect and history, the base's inspect); nothing is pulled or unpacked."""
    result.size_bytes = image.get("Size")
    base = engine.light_inspect(result.base_ref) if result.base_ref else None
    result.base_bytes = base.get("Size") if base else None
    result.layers = sizes.added_layers(image, engine.light_history(image.get("Id") or result.ref), result.holds)


def measure_push(result: ImageResult, client, repository: str, uploaded: set[str], platform: str) -> None:
    """Each added layer's compressed size and whether this push sent it, from the pushed
    manifest as the registry keeps it; the bytes sent."""
    try:
        found = image_manifest(parse(f"{repository}@{result.pushed_digest}"), platform)
    except EnvironmentProblem:  # sizes are a report: a registry that will not say leaves them unknown
        return
    if found is None:
        return
    if not result.image_id:  # the registry had the content tag, and nothing here needed the image
        measure_registry(result, found[1])
        result.pushed_bytes = 0
        return
    diff_ids = (client.api.inspect_image(result.image_id).get("RootFS") or {}).get("Layers") or []
    result.compressed_bytes, result.pushed_bytes = sizes.pushed_sizes(found[1], diff_ids, uploaded, result.layers)


def measure_registry(result: ImageResult, manifest: dict) -> None:
    """An image only the registry holds: its compressed size and its added layers'."""
    result.compressed_bytes = sum(int(layer.get("size") or 0) for layer in manifest.get("layers") or ()
                                  if isinstance(layer, dict))
    result.layers = sizes.registry_layers(manifest, result.holds)


def _put_back(client, repository: str, name: str, image_id: str | None) -> None:
    """The local tag `name` as it was before: on its old image, or gone if it had none.
    Best effort: an engine that went away cannot be asked (its error is the one reported)."""
    try:
        if image_id:
            client.api.tag(image_id, repository, name)
        else:
            client.api.remove_image(f"{repository}:{name}", noprune=True)
    except Exception:  # noqa: BLE001 - the push's own error is the one to report
        pass


def pull_base(client, base_ref: str, platform: str, progress) -> str | None:
    """Pull the base with progress (a multi-GB framework base takes minutes); return the
    digest it was pulled by. When the engine cannot pull it, the copy it has is used
    (air-gapped hosts); with none, the base is what went away: one line, exit 3."""
    import docker

    name, _, digest = base_ref.partition("@")
    repository, tag = (name.rsplit(":", 1) if ":" in name.rsplit("/", 1)[-1] else (name, "latest"))
    layers = {}
    failed = None
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
                failed = (item.get("errorDetail") or {}).get("message") or item["error"]
                break
    except docker.errors.APIError as exc:
        failed = exc.explanation or str(exc)
    progress.done()
    if failed is None and digest:
        return digest
    try:  # not pullable here (air-gapped): the copy the engine has, and the digest it recorded
        found = client.api.inspect_image(base_ref).get("RepoDigests") or []
    except docker.errors.ImageNotFound:
        raise _base_not_pulled(base_ref, failed) from None
    except docker.errors.APIError:
        found = []
    return digest or next((d.split("@", 1)[1] for d in found if d.split("@", 1)[0] == repository), None) or \
        next((d.split("@", 1)[1] for d in found), None)


def _base_not_pulled(base_ref: str, why: str | None) -> EnvironmentProblem:
    registry = parse(base_ref).registry
    first = " ".join((why or "no reason given").split())[:300]
    return EnvironmentProblem(
        f"the base image {base_ref} cannot be pulled, and the Docker engine has no copy of it ({first})",
        hint=f"check the reference and that {registry} is reachable from the engine (`docker login {registry}` "
             "if it needs one), or pull it through a reachable mirror with --registry-mirror HOST; no tag was changed")


def build_labels(resolution: Resolution, ref: str, base_digest: str | None) -> dict[str, str]:
    """Labels set at build time: they vary per build (time, commit), so they stay out of
    the Dockerfile and the content tag."""
    labels = {
        "org.opencontainers.image.created": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "org.opencontainers.image.version": ref.rsplit(":", 1)[1],
        "org.opencontainers.image.base.digest": base_digest or "",
    }
    labels.update(git_provenance(resolution.spec.source))
    return {k: v for k, v in labels.items() if v}
