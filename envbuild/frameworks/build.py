"""`Build`: one installable GPU build of a framework for one CUDA variant.

Each framework's table has its own shape (PyTorch lists builds, TensorFlow tested
configs, JAX releases with CUDA plugin majors, RAPIDS releases with a CUDA range, CuPy
wheel names or conda packages with a CUDA range). The checks compare every framework the same way, so
each framework's plugin (`envbuild/frameworks/<name>.py`) turns its rows into `Build`s with an
exact CUDA major.minor, with the helpers here. Ranged rows (JAX, RAPIDS, CuPy) become one Build per CUDA
release NVIDIA published in that range.
"""
from __future__ import annotations

import functools
from collections.abc import Hashable
from dataclasses import dataclass, field

from packaging.version import Version

from envbuild import matrix
from envbuild.core import specifiers
from envbuild.core.values import ComputeCapability, CudaVersion
from envbuild.core.versions import parse_version
from envbuild.matrix import tables as t
from envbuild.matrix.lookup import pythons


@functools.lru_cache(maxsize=1)
def known_pythons() -> tuple[str, ...]:
    """The CPython feature releases (matrices/pythons.yaml), oldest first: the universe a
    Python specifier is evaluated over when the resolver has to choose a Python."""
    return pythons(matrix.load())


@dataclass(frozen=True, eq=False)
class Build:
    """One installable GPU build of a framework release, as the resolver judges it."""

    framework: str  # canonical: pytorch | tensorflow | jax | rapids | cupy
    version: str
    installer: str  # pip | conda
    cuda: CudaVersion  # the CUDA variant, major.minor
    variant: str  # how the variant is named where it is installed: "+cu121", "cudatoolkit=10.2", "cuda12"
    row: t.Row  # the matrix row behind it (source, inferred, secondary)
    pythons: frozenset[str] | None  # None = not read
    python_text: str | None
    archs: tuple[str, ...] | None = None  # compiled archs (sm_XX / compute_XX); None = not read
    cudnn: str | None = None  # cuDNN the build was compiled with
    cudnn_min: str | None = None  # cuDNN the build needs at least (JAX)
    cuda_min: CudaVersion | None = None  # oldest CUDA minor of its major whose libraries it accepts (JAX)
    platforms: tuple[str, ...] = ("linux-64",)
    bundles_runtime: bool = True  # the package brings its own CUDA runtime (pip nvidia-* / conda cudatoolkit)
    driver_min: str | None = None  # a framework-stated driver floor (JAX, RAPIDS docs)
    min_cc: ComputeCapability | None = None  # a framework-stated lowest GPU (RAPIDS)
    package: str = ""  # the distribution or conda spec that names the variant
    index_url: str | None = None
    channels: tuple[str, ...] = ()
    pypi_default: bool = False  # PyPI's untagged wheel of this version is this very build
    # the variant is the environment's CUDA itself (rows with a CUDA range: JAX, RAPIDS, CuPy)
    ranged: bool = False
    # the wheel files of what pip installs for it (resolver.artefacts.Wheels); None = not read
    wheels: object = None
    # the lock proof's rows for its pip requirement (matrices/lockable.yaml), and per
    # platform the Pythons they say do not lock (resolver.lockable)
    lock_proof: tuple = ()
    unlockable: dict = field(default_factory=dict)
    # what only its framework's plugin reads (the pip extra it installs with, PyTorch's
    # companion packages, TensorFlow's Windows build): a frozen value the plugin defines
    extras: Hashable = None
    v: Version = field(default=None)  # type: ignore[assignment]

    def __post_init__(self) -> None:
        if not isinstance(self.cuda, CudaVersion):  # a plugin parses its row's text once, into the value
            raise TypeError(f"Build.cuda must be a CudaVersion, not {self.cuda!r}")
        object.__setattr__(self, "v", parse_version(self.version))

    @property
    def cuda_major(self) -> int:
        return self.cuda.major

    def published_pythons(self, platform: str) -> frozenset[str] | None:
        """The Pythons published on `platform`: those with a wheel when the index was read
        for this build (its artefacts win over the matrix range), else the range."""
        found = self.wheels.pythons(platform) if self.wheels is not None else None
        return found or self.pythons

    def pythons_on(self, platform: str) -> frozenset[str] | None:
        """The Pythons to choose from on `platform`: the published ones, without those the
        lock proof found not to lock."""
        found = self.published_pythons(platform)
        refused = self.unlockable.get(platform)
        return found - refused if refused and found is not None else found

    @property
    def label(self) -> str:
        """`pytorch 1.6.0 (conda, cudatoolkit=10.2)`."""
        return f"{self.framework} {self.version} ({self.installer}, {self.variant})"


@functools.lru_cache(maxsize=None)
def _pythons(text: str | None) -> frozenset[str] | None:
    if text is None:
        return None
    # "<=3.11" must admit 3.11.x: a late patch release of each minor is asked too
    return frozenset(p for p in known_pythons()
                     if specifiers.admits(text, p, True) or specifiers.admits(text, f"{p}.9", True))


def _cuda_minors(releases: tuple[t.CudaRelease, ...]) -> list[CudaVersion]:
    """The CUDA major.minors NVIDIA released, oldest first: the variants of ranged rows."""
    seen = set()
    for r in releases:
        try:
            v = CudaVersion.parse(r.version)
        except ValueError:
            continue
        seen.add((v.major, v.minor))
    return [CudaVersion(major, minor) for major, minor in sorted(seen)]


def _minors_between(minors: list[CudaVersion], lo: str, hi: str) -> list[CudaVersion]:
    lo_v, hi_v = CudaVersion.parse(lo), CudaVersion.parse(hi)
    return [m for m in minors if lo_v <= m <= hi_v]
