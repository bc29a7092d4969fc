"""The value objects every stage shares: the user's Spec and the resolver's Resolution.

The spec parser builds a `Spec`; `envbuild.resolver.resolve(spec)` turns it into a
`Resolution`; lock, dockerfile, image and verify read the resolved stack from there.
Everything here is plain data with a JSON form, so `--json` output and lockfile
metadata are the same structures.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Literal

from envbuild.core.check_lines import checks_json
from envbuild.core.values import BaseFamily, ConflictKind, Installer, Platform

# the enums' texts, for validation messages and command-line choices
INSTALLERS = tuple(i.value for i in Installer)
BASE_FAMILIES = ("auto", *(f.value for f in BaseFamily))
PLATFORMS = tuple(p.value for p in Platform)
BUILD_PLATFORMS = tuple(p.value for p in Platform if p.buildable)  # the ones envbuild can lock and build for
# what `host_platforms` in matrices/gpus.yaml may name: the platforms above, and the ones a
# GPU's host can be that envbuild neither checks nor builds for (conda's names), so no spec names them
GPU_HOST_PLATFORMS = (*PLATFORMS, "linux-armv7l")
CONFLICT_KINDS = tuple(k.value for k in ConflictKind if k.conflict)  # in the order a resolution reports them
VERDICTS = ("ok", "unverified", "conflict")
# The links a resolution checks, as `unchecked[].links` names them, in report order.
LINKS = ("platform", "framework_build", "driver", "gpu_arch", "python", "cudnn", "base_image")
# What a spec may state about a base image outside the catalog (`base_image: {ref: ..., cuda: ...}`)
BASE_FACTS = ("family", "cuda", "cudnn", "python", "os", "flavour", "framework")
CUSTOM_FAMILY = "custom"  # the family of a base image outside the catalog, unless the spec names one


@dataclass(frozen=True)
class FrameworkRequest:
    """One requested framework. `constraint` is the text as written (None = any version):
    conda style `1.6.*`, PEP 440 `>=2.1,<2.3`, or a pip local version `1.7.1+cu101`."""

    name: str
    constraint: str | None = None


@dataclass(frozen=True)
class Spec:
    """What the user asked for, after parsing and validation but before completion."""

    name: str | None = None
    frameworks: tuple[FrameworkRequest, ...] = ()
    cuda: str | None = None
    cudnn: str | None = None
    python: str | None = None
    driver: str | None = None
    gpus: tuple[str, ...] = ()  # model names or compute capabilities, as written
    platform: str = "linux-64"
    # every platform one lock covers, `platform` among them (target.platforms); () = `platform` alone
    platforms: tuple[str, ...] = ()
    installer: str | None = None  # "conda" | "pip" | None (= choose)
    base: str = "auto"  # one of BASE_FAMILIES
    base_image: str | None = None  # explicit IMAGE:TAG, overrides `base`
    # What the user states about `base_image` (`base_image: {ref: ..., cuda: ...}` or
    # --base-fact KEY=VALUE): sorted (fact, value) pairs, one of BASE_FACTS each
    base_facts: tuple[tuple[str, str], ...] = ()
    channels: tuple[str, ...] = ()
    conda_packages: tuple[str, ...] = ()
    pip_packages: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()  # sorted (KEY, value) pairs
    image_repository: str | None = None  # where `envbuild image` tags/pushes
    strict: bool = False  # an unverified resolution is refused (exit 1) instead of passed with exit 0
    # Judge the stack as an image build (the base's python3, the in-image installer's Python
    # floor) rather than as it runs on a host: True with `--for image` and for the commands
    # that build or run images, False with `--for host`; None = as the spec names (see
    # `image_build`).
    for_image: bool | None = None
    source: str | None = None  # path of the spec file, for messages; not hashed
    # resources: what one job needs (GPUs per job, GPU memory per GPU in GiB); None = not stated
    gpu_count: int | None = None
    gpu_memory_gib: float | None = None

    @property
    def image_build(self) -> bool:
        """Is the stack judged as an image build? As `for_image` says, else when the spec
        names a base (family or image) or an image repository."""
        if self.for_image is not None:
            return self.for_image
        return self.base_image is not None or self.base != "auto" or self.image_repository is not None

    def framework(self, name: str) -> FrameworkRequest | None:
        return next((f for f in self.frameworks if f.name == name), None)

    def with_changes(self, changes: dict[str, Any]) -> "Spec":
        """Apply a Fix's `changes`. Keys are spec fields (`cuda`, `python`, `driver`,
        `installer`, `base_image`, `gpus`, ...) or `frameworks.<name>` for a framework's
        constraint (None removes that framework)."""
        fields: dict[str, Any] = {}
        frameworks = {f.name: f for f in self.frameworks}
        for key, value in changes.items():
            if key.startswith("frameworks."):
                name = key.split(".", 1)[1]
                if value is None:
                    frameworks.pop(name, None)
                else:
                    frameworks[name] = FrameworkRequest(name, str(value))
            elif key == "gpus":
                fields["gpus"] = tuple(value)
            else:
                fields[key] = value
        fields["frameworks"] = tuple(frameworks.values())
        return dataclasses.replace(self, **fields)

    def canonical(self) -> dict[str, Any]:
        """A JSON-able form with a stable key order; `source` is left out so that the
        same request hashes the same wherever the file lives."""
        data = to_jsonable(self)
        data.pop("source", None)
        # The same request judged for a host or for an image is the same request: the stage
        # decides which (the resolved stack, hashed on its own in locks, carries the difference).
        data.pop("for_image", None)
        for key in ("gpu_count", "gpu_memory_gib"):  # unstated resources leave the hash as it was
            if data.get(key) is None:
                data.pop(key, None)
        if not data.get("platforms"):  # so does a spec of one platform
            data.pop("platforms", None)
        if not data.get("base_facts"):  # so do unstated base facts
            data.pop("base_facts", None)
        return data

    @property
    def lock_platforms(self) -> tuple[str, ...]:
        """The platforms a lock of this spec covers, in the order its files are named."""
        return self.platforms or (self.platform,)

    def for_platform(self, platform: str) -> "Spec":
        """The same request for one of its lock's platforms (what that platform resolves)."""
        return dataclasses.replace(self, platform=platform)

    def hash(self) -> str:
        return sha256_json(self.canonical())


@dataclass(frozen=True)
class Fact:
    """A matrix fact behind a decision, with where it comes from."""

    text: str
    source: str
    inferred: bool = False
    secondary: bool = False


@dataclass(frozen=True)
class Fix:
    """A change to the spec that makes it resolve. `changes` feeds Spec.with_changes;
    every fix the resolver offers has itself been resolved and passes."""

    description: str
    changes: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Conflict:
    """A reason the stack cannot work, with the facts behind it and verified fixes."""

    kind: str  # one of CONFLICT_KINDS
    message: str  # one sentence: who sets the constraint, its version, which side must move
    facts: tuple[Fact, ...] = ()
    fixes: tuple[Fix, ...] = ()


@dataclass(frozen=True)
class Warning:  # noqa: A001 - a resolver warning, not the builtin category
    """Something that works but deserves attention (PTX JIT, minor-version compatibility,
    an image build of a host stack that would need another value: then with its fixes)."""

    kind: str  # a ConflictKind, e.g. ptx_jit, minor_version_compat, image_build
    message: str
    facts: tuple[Fact, ...] = ()
    fixes: tuple[Fix, ...] = ()


@dataclass(frozen=True)
class Unchecked:
    """A fact that is not known (the matrices lack it, or a base image outside the catalog
    neither states nor shows it), and the links it left unchecked: the verdict is then
    `unverified`, never `ok`."""

    links: tuple[str, ...]  # of LINKS
    message: str  # what is unknown, what was still checked, how to state the fact
    nearest: tuple[str, ...] = ()  # for an unknown release: the nearest releases the matrices know


@dataclass(frozen=True)
class ResolvedFramework:
    """One framework as resolved: the exact release, its installer and build variant."""

    name: str  # canonical framework name (pytorch, tensorflow, jax, rapids, cupy)
    version: str  # exact release, e.g. "2.1.2"
    installer: str  # "conda" | "pip"
    cuda: str | None  # the build's CUDA variant, major.minor ("12.1"); None if CPU-only (never chosen silently)
    conda_specs: tuple[str, ...] = ()  # MatchSpecs that pin the GPU build, e.g. ("pytorch==2.1.2=*cuda*", "pytorch-cuda==12.1")
    pip_requirements: tuple[str, ...] = ()  # e.g. ("torch==2.1.2+cu121",)
    pip_index_url: str | None = None  # e.g. "https://download.pytorch.org/whl/cu121"
    pypi_default: bool = False  # PyPI's untagged wheel of this version is this very build
    archs: tuple[str, ...] = ()  # compiled architectures when known ("sm_50", ..., "compute_90")
    cudnn: str | None = None


@dataclass(frozen=True)
class ResolvedGpu:
    """A target GPU as the matrix knows it."""

    name: str  # as the matrix names it ("NVIDIA A100-SXM4-80GB" or the user's text for a bare CC)
    compute_capability: str | None  # "8.0"; None for a model the matrix does not know
    datacenter: bool | None = None


@dataclass(frozen=True)
class BaseImageChoice:
    """The base image chosen for the Dockerfile, and why."""

    ref: str  # full reference from the catalog, e.g. "nvidia/cuda:12.1.1-cudnn8-runtime-ubuntu22.04"
    family: str  # dlc | pytorch | rapids | tensorflow | cuda | custom (outside the catalog)
    flavour: str | None  # base | runtime | devel (None where the family has none)
    cuda: str | None
    cudnn: str | None
    python: str | None
    os: str | None
    source: str
    why: str  # one line: why this base and this flavour


@dataclass(frozen=True)
class ResolvedStack:
    """Every version the resolution fixed: frameworks, CUDA, cuDNN, Python, base image."""

    frameworks: tuple[ResolvedFramework, ...]
    cuda: str | None  # major.minor of the environment's CUDA
    cudnn: str | None
    python: str
    driver: str | None  # the target host driver, if known
    max_driver_cuda: str | None  # the newest CUDA that driver supports
    gpus: tuple[ResolvedGpu, ...]
    platform: str
    installer: str
    channels: tuple[str, ...]
    base_image: BaseImageChoice | None
    # The CUDA version the driver itself reports (nvidia-smi's "CUDA Version", conda's
    # `__cuda` on that host); max_driver_cuda adds what minor-version compatibility allows.
    driver_cuda: str | None = None


@dataclass(frozen=True)
class Resolution:
    """What `resolve` answers for a spec: the verdict, the stack unless there is a conflict,
    the conflicts, the links that could not be checked, and warnings.

    `ok`: every link was checked against a sourced row and passed. `unverified`: no link
    failed, but some could not be checked (`unchecked`). `conflict`: a link failed."""

    spec: Spec
    verdict: Literal["ok", "unverified", "conflict"]
    resolved: ResolvedStack | None
    conflicts: tuple[Conflict, ...] = ()
    warnings: tuple[Warning, ...] = ()
    matrix_version: str = ""
    unchecked: tuple[Unchecked, ...] = ()

    @property
    def ok(self) -> bool:
        """Every link checked, none failed."""
        return self.verdict == "ok"

    @property
    def usable(self) -> bool:
        """The later stages may go on: ok, or unverified without `strict`."""
        return self.verdict == "ok" or (self.verdict == "unverified" and not self.spec.strict)

    @property
    def exit_code(self) -> int:
        return 0 if self.usable else 1

    def to_json(self) -> dict[str, Any]:
        """The documented `--json` schema (see README, "JSON output")."""
        return {
            "verdict": self.verdict,
            "judged_for": "image" if self.spec.image_build else "host",
            "spec_hash": self.spec.hash(),
            "matrix_version": self.matrix_version,
            "resolved": to_jsonable(self.resolved),
            "conflicts": to_jsonable(self.conflicts),
            "unchecked": to_jsonable(self.unchecked),
            "checks": checks_json(self),
            "warnings": to_jsonable(self.warnings),
        }


def to_jsonable(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    return value


def sha256_json(data: Any) -> str:
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()
