"""What an image adds to its base, layer by layer, and the compressed bytes a push sent.

The engine keeps layers uncompressed: an image's `Size` is the sum of its layers', and its
history gives the size of the layer each build step made (newest first; the steps that only
set metadata, ENV and LABEL, make none). The layers envbuild adds are the newest ones, those
of its Dockerfile's final stage, and the build context says what each holds
(`BuildContext.layers`).

A registry keeps layers compressed: a pushed image's manifest lists each layer's compressed
size, in the order of the image's layers (`RootFS.Layers`). A push sent the layers the engine
reported as "Pushed"; the others the registry had already ("Layer already exists", "Mounted
from" another repository). The push stream names a layer by the first 12 hex digits of its
uncompressed digest.
"""
from __future__ import annotations

from dataclasses import dataclass

from envbuild.output.progress import human_bytes

# Steps of the classic builder that set only metadata write `#(nop) INSTRUCTION ...`; of
# those, only COPY and ADD make a layer.
_LAYER_NOPS = ("COPY", "ADD")


@dataclass
class LayerSize:
    holds: str  # what the layer holds: environment, cuda, dependencies, package-1, envbuild...
    bytes: int | None  # uncompressed, as the engine stores it
    diff_id: str | None  # sha256 of the uncompressed layer
    compressed_bytes: int | None = None  # as the registry stores it (known once pushed)
    pushed: bool | None = None  # this run uploaded it (None: no push)

    def to_json(self) -> dict:
        return {"holds": self.holds, "bytes": self.bytes, "compressed_bytes": self.compressed_bytes,
                "pushed": self.pushed}


def _makes_layer(step: dict) -> bool:
    created = step.get("CreatedBy") or ""
    if "#(nop) " not in created:
        return True  # a RUN, or the rootfs of an imported image
    words = created.split("#(nop) ", 1)[1].split()
    return bool(words) and words[0] in _LAYER_NOPS


def added_layers(image: dict, history: list[dict] | None, holds: tuple[str, ...]) -> list[LayerSize]:
    """The layers the final stage added, oldest first, from the engine's record of the image
    (`inspect`) and its history; sizes are None when the history does not show them."""
    diff_ids = ((image.get("RootFS") or {}).get("Layers") or [])[-len(holds):] if holds else []
    steps = [step for step in history or () if _makes_layer(step)][:len(holds)]
    steps.reverse()
    if len(steps) != len(holds) or len(diff_ids) != len(holds):
        return [LayerSize(what, None, None) for what in holds]
    return [LayerSize(what, step.get("Size"), diff_id) for what, step, diff_id in zip(holds, steps, diff_ids)]


def pushed_sizes(manifest: dict, diff_ids: list[str], pushed: set[str], layers: list[LayerSize]) -> tuple[int, int]:
    """Fill in each added layer's compressed size and whether this push sent it, from the
    pushed manifest; return (the image's compressed bytes, the compressed bytes sent), the
    base's layers included (a registry without the base is sent those too)."""
    blobs = [layer for layer in manifest.get("layers") or () if isinstance(layer, dict)]
    sizes = {diff_id: int(blob.get("size") or 0) for diff_id, blob in zip(diff_ids, blobs)}
    sent = {diff_id for diff_id in sizes if diff_id.split(":")[-1][:12] in pushed}
    for layer in layers:
        if layer.diff_id in sizes:
            layer.compressed_bytes = sizes[layer.diff_id]
            layer.pushed = layer.diff_id in sent
    return sum(sizes.values()), sum(sizes[d] for d in sent)


def registry_layers(manifest: dict, holds: tuple[str, ...]) -> list[LayerSize]:
    """The added layers of an image only the registry holds: compressed sizes alone."""
    blobs = [layer for layer in manifest.get("layers") or () if isinstance(layer, dict)][-len(holds):] if holds else []
    if len(blobs) != len(holds):
        return [LayerSize(what, None, None) for what in holds]
    return [LayerSize(what, None, None, compressed_bytes=int(blob.get("size") or 0), pushed=False)
            for what, blob in zip(holds, blobs)]


def summary(result) -> list[str]:
    """The sizes of an `image` run (`make.ImageResult`) for its text output."""
    if result.size_bytes is None and result.compressed_bytes is None:
        return []
    lines = []
    if result.size_bytes is not None:
        parts = [f"base {human_bytes(result.base_bytes)}"] if result.base_bytes is not None else []
        if result.added_bytes is not None:
            parts.append(f"{human_bytes(result.added_bytes)} added by envbuild in {len(result.layers)} layers")
        lines.append(f"size: {human_bytes(result.size_bytes)}" + (f" ({', '.join(parts)})" if parts else ""))
    for layer in result.layers:
        compressed = "" if layer.compressed_bytes is None else f", {human_bytes(layer.compressed_bytes)} compressed"
        sent = "" if layer.pushed is None else (", pushed" if layer.pushed else ", already in the registry")
        lines.append(f"  layer {layer.holds}: {human_bytes(layer.bytes)}{compressed}{sent}")
    if result.pushed_bytes is not None:
        lines.append(f"pushed {human_bytes(result.pushed_bytes)} compressed of {human_bytes(result.compressed_bytes)}"
                     " (the layers the registry did not have)")
    return lines
