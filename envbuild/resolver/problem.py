"""What a check finds: `Problem`, the resolver's one record of a conflict or a warning.

A problem is its kind (a `ConflictKind`), its sentence, the facts behind it and the
`Hints` the fix search reads. A check that judges thousands of (build, GPU) pairs (a
fleet's joint request) gives the sentence as a function, written when first read: the
verdicts read only the kinds, and only the nearest build's sentences are reported.
"""
from __future__ import annotations

import functools
from collections.abc import Callable, Collection
from dataclasses import dataclass, field

from envbuild.core.model import Fact
from envbuild.core.values import ConflictKind, CudaVersion


@dataclass(frozen=True)
class Hints:
    """What a problem tells the fix search (fixes.py) beyond its kind: the values a
    candidate fix may move to. Every field is optional."""

    driver: str | None = None  # the driver the link needs at least
    driver_branch_max: str | None = None  # the last driver branch that still drives the GPU
    max_cuda: CudaVersion | None = None  # the newest CUDA the host's driver runs
    pythons: Collection[str] = ()  # Pythons that would pass this link
    base_pythons: Collection[str] = ()  # Pythons of fitting base images: an image request is retried with them
    installer: str | None = None  # the installer that would pass this link
    base_image: bool = False  # the base image the spec names is a side that may move
    cudnn: str | None = None  # the cuDNN that would pass this link
    platform: str | None = None  # the platform the GPU's host runs
    unbuildable_host: bool = False  # the GPU sits in a system no platform envbuild builds for runs on
    no_builds_for_installer: bool = False  # the framework has no build at all for the spec's installer
    other_variant: bool = False  # the build is of another CUDA variant than the pinned one (not yet worded)
    links: tuple[str, ...] = ()  # unknown_fact: the links (of model.LINKS) left unchecked
    nearest: tuple[str, ...] = ()  # unknown_fact: the nearest releases the matrices know


NO_HINTS = Hints()


@dataclass(frozen=True)
class Problem:
    """What one check found; a conflict when hard, a warning when soft. `wording` is the
    sentence, or a function that writes it when `message` is first read."""

    kind: ConflictKind
    wording: str | Callable[[], str] = field(repr=False)
    facts: tuple[Fact, ...] = ()
    soft: bool = False  # a warning, not a conflict (ptx_jit, unknown_fact, minor_version_compat)
    framework: str | None = None
    hints: Hints = field(default=NO_HINTS, compare=False)

    @functools.cached_property
    def message(self) -> str:
        return self.wording if isinstance(self.wording, str) else self.wording()


def unknown(message: str, links: tuple[str, ...], *, framework: str | None = None,
            nearest: tuple[str, ...] = ()) -> Problem:
    """A fact a check needs is unknown (the matrices lack it, or a base image outside the
    catalog neither states nor shows it): `links` (of model.LINKS) stay unchecked, and
    `message` says what is unknown and how to state it. `nearest`: for a release the
    matrices do not know, the nearest ones they do."""
    return Problem(ConflictKind.UNKNOWN_FACT, message, soft=True, framework=framework,
                   hints=Hints(links=links, nearest=nearest))
