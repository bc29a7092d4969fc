"""The answers the resolver keeps for the life of an `Index` (one per loaded matrices),
each cache a dictionary keyed by the values its answer depends on.

Each is kept because one resolve asks its question many times: a fleet resolves each of
its targets against the same matrices (a hundred requests that differ in their GPUs),
and a fix search resolves dozens of requests that differ in one value. Builds are keys
by identity (each is made once per index, and a build with a release put in is made once
here, so that the caches keyed by builds find it again); GPUs by their label (name and
architecture).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from envbuild.core.model import BaseImageChoice, Fact
    from envbuild.core.values import CudaVersion
    from envbuild.frameworks.build import Build
    from envbuild.matrix import tables as t
    from envbuild.resolver.checks import HostLinks, Verdict, Verdicts
    from envbuild.resolver.checks.gpu import Answer, CarriedArchs
    from envbuild.resolver.complete import Choice, Selected
    from envbuild.resolver.context import ImageCuda
    from envbuild.resolver.problem import Problem
    from envbuild.resolver.request import Gpu


@dataclass
class Memo:
    """One dictionary per question, named for it, with the module that asks it."""

    # checks: (CUDA pin, Request.host_key, Request.cc_key) -> build -> its verdict
    verdicts: dict[tuple, Verdicts] = field(default_factory=dict)
    # checks: (CUDA pin, Request.host_key) -> build -> the verdict of its host links
    host_verdicts: dict[tuple, dict[Build, Verdict]] = field(default_factory=dict)
    # checks: Request.cc_key -> gpu.signature -> the verdict of the GPU links of the builds of that signature
    gpu_verdicts: dict[tuple, dict[tuple, Verdict]] = field(default_factory=dict)
    # checks.gpu: build -> its gpu.signature
    gpu_signatures: dict[Build, tuple] = field(default_factory=dict)
    # checks: (build, CUDA pin, Request.host_key) -> its host links' problems
    host_links: dict[tuple, HostLinks] = field(default_factory=dict)
    # checks: (build, platform, python) -> (the platform link's problems, the Python links')
    platform_links: dict[tuple, tuple[list[Problem], list[Problem]]] = field(default_factory=dict)
    # checks: (build, platform, driver) -> the driver link's problems
    driver_links: dict[tuple, list[Problem]] = field(default_factory=dict)
    # checks.gpu: (build, GPU label) -> the toolkit's answer, and the build's own
    toolkit_answers: dict[tuple[Build, str], Answer] = field(default_factory=dict)
    build_answers: dict[tuple[Build, str], Answer] = field(default_factory=dict)
    # checks.gpu: CUDA -> the fact of the architectures its toolkit compiles for
    toolkit_facts: dict[CudaVersion, tuple[Fact, ...]] = field(default_factory=dict)
    # checks.gpu: build -> its arch list as `carried_archs` reads it
    compiled_archs: dict[Build, CarriedArchs] = field(default_factory=dict)
    # request: a GPU as the spec writes it -> the GPU read from the matrices
    gpus: dict[str, Gpu] = field(default_factory=dict)
    # families: (framework, release, platform) -> the family rules that cover it
    family_rules: dict[tuple, list[t.FamilyRule]] = field(default_factory=dict)
    # complete: (framework, constraint, CUDA pin) -> the builds the constraint selects
    selected: dict[tuple, Selected] = field(default_factory=dict)
    # complete: (builds, platform) -> those that decide on the platform
    on_platform: dict[tuple, list[Build]] = field(default_factory=dict)
    # plugins: (framework, release) -> the builds of its series that ship it, with that release put in
    pinned_builds: dict[tuple[str, str], list[Build]] = field(default_factory=dict)
    # complete: (framework, patch release) -> its series' builds standing in for it, with that release put in
    stand_in_builds: dict[tuple[str, str], list[Build]] = field(default_factory=dict)
    # complete: (the viable builds per framework, installer, python, platform) -> the joint choice
    combined: dict[tuple, tuple[Choice | None, list[Problem]]] = field(default_factory=dict)
    # base: what a base image choice reads -> (the image, its problems)
    base_images: dict[tuple, tuple[BaseImageChoice | None, list[Problem]]] = field(default_factory=dict)
    # base: (family, platform) -> the catalog's images of that family with what the choice compares
    family_images: dict[tuple[str, str], list[tuple[t.BaseImage, ImageCuda, tuple]]] = field(default_factory=dict)
    # fixes: framework -> its builds by release, best first
    builds_by_version: dict[str, dict[str, list[Build]]] = field(default_factory=dict)
