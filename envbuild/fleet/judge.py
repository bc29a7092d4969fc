"""Does a stack run on a fleet's targets? Asked before `export` writes a job for a target
and before `verify --fleet` submits the probe to one.

The stack is the spec the command was given, judged as an image build (`for_image`), or,
without one, the stack an image envbuild built records in its labels (`io.envbuild.*`,
read from the registry). Each target is then resolved with its own driver, GPU, MIG
slice and memory (`envbuild.fleet.resolve`); a base image outside the catalog is read as
`resolve` reads it (its stated facts, then the image). A stack that cannot be judged (an
image without envbuild's labels, a registry that does not answer) is said so, not refused.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from envbuild.core.model import Resolution, Spec
from envbuild.dockerfile.reference import parse
from envbuild.fleet import Target
from envbuild.fleet.resolve import resolve_fleet
from envbuild.image.registry import image_labels
from envbuild.infra.errors import UserError
from envbuild.spec import spec_from_mapping

LABELS = "io.envbuild."


@dataclass(frozen=True)
class Judged:
    """One target's answer: its verdict and, for a conflict, the resolution that shows it."""

    target: Target
    verdict: str  # ok | unverified | conflict
    resolution: Resolution  # its conflicts are the target's own (MIG, memory included)

    @property
    def reason(self) -> str:
        """Why the stack does not run there (a conflict) or was not checked (unverified)."""
        if self.resolution.conflicts:
            return self.resolution.conflicts[0].message
        return self.resolution.unchecked[0].message if self.resolution.unchecked else ""

    def refused(self, strict: bool) -> bool:
        return self.verdict == "conflict" or (strict and self.verdict == "unverified")


def judge(spec: Spec, targets: tuple[Target, ...], *, read_base=None) -> dict[str, Judged]:
    """Each target's verdict for `spec` as an image build, by target name. `read_base`
    reads a base image outside the catalog (`envbuild.image.facts.read`, handed in by the
    commands), so its facts are judged as `resolve` judges them."""
    answer = resolve_fleet(dataclasses.replace(spec, for_image=True), targets, read_base=read_base)
    out = {}
    for r in answer.targets:
        shown = dataclasses.replace(r.resolution, conflicts=tuple(r.conflicts), verdict=r.verdict,
                                    warnings=tuple(r.warnings))
        out[r.target.name] = Judged(r.target, r.verdict, shown)
    return out


def image_spec(image: str, platform: str = "linux-64") -> tuple[Spec | None, str]:
    """(the spec of the stack an envbuild image records in its labels, or None; why not)."""
    try:
        labels = image_labels(parse(image), platform=platform, timeout=10)
    except UserError as exc:  # unreachable or refusing registry, a malformed reference
        return None, f"its labels could not be read ({exc.line()})"
    if labels is None:
        return None, f"the registry has no image {image}"
    try:
        spec = spec_from_labels(labels, source=f"the labels of {image}")
    except UserError as exc:
        return None, f"its envbuild labels do not form a spec ({exc.line()})"
    if spec is None:
        return None, "it carries no envbuild labels (not an image `envbuild image` built)"
    return spec, ""


def spec_from_labels(labels: dict[str, str], source: str) -> Spec | None:
    """The stack an envbuild image was built for, from its labels (envbuild/dockerfile/render.py
    writes them): frameworks pinned to the versions built, their CUDA when they share one,
    the Python, installer, platform and base image. None without envbuild's labels. The
    values are checked like a spec file's (bad ones raise UserError)."""
    frameworks, cudas = {}, set()
    for item in labels.get(LABELS + "frameworks", "").split():
        name, _, rest = item.partition("==")
        version, _, cuda = rest.partition("+cuda")
        if name and version:
            frameworks[name] = version
            cudas.add(cuda or None)
    cuda = labels.get(LABELS + "cuda") or None
    if not frameworks and not cuda:
        return None
    data: dict = {"frameworks": frameworks} if frameworks else {}
    if cuda and cudas <= {cuda}:  # frameworks built for another CUDA than the environment's keep their own
        data["cuda"] = cuda
    for key, label in (("python", "python"), ("installer", "installer"), ("base_image", "base")):
        if labels.get(LABELS + label):
            data[key] = labels[LABELS + label]
    if labels.get(LABELS + "platform"):
        data["target"] = {"platform": labels[LABELS + "platform"]}
    return spec_from_mapping(data, source=source)
