"""Typed rows of the compatibility matrices.

One frozen dataclass per table in `matrices/`. Every row carries `source` (where the
fact was read), `inferred` (derived rather than read verbatim) and `secondary` (read
only in a third-party copy of the primary source); a row that records a decision of
envbuild's rather than a fact carries `reason` instead of `source`. Versions are kept
as strings in the form the source uses; use `packaging.version.Version` /
`SpecifierSet` on them through the helpers in `envbuild.core.versions`.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Row:
    """A row of a matrix table; every row carries its source."""

    source: str = ""
    inferred: bool = False
    secondary: bool = False
    reason: str = ""  # why, where the row is envbuild's own decision rather than a sourced fact


# --- matrices/cuda_driver.yaml -------------------------------------------------------
@dataclass(frozen=True)
class CudaRelease(Row):
    """A CUDA toolkit release and the driver NVIDIA packaged with it (Table 3)."""

    version: str = ""  # "11.0.3" / "12.4.1" / "10.2.89" as NVIDIA labels it
    min_driver_linux: str | None = None  # "450.51.06"; None = not read
    min_driver_windows: str | None = None


@dataclass(frozen=True)
class MinorCompat(Row):
    """Minor-version compatibility for one CUDA major (11, 12, 13): any driver at or
    above `floor_linux` runs every minor of that major (never crosses a major; does not
    cover PTX JIT of code from a newer minor)."""

    major: int = 0
    floor_linux: str | None = None  # "450.80.02"
    branch_min: int = 0  # driver branch, e.g. 450
    floor_windows: str | None = None  # "452.39"; None = not read


@dataclass(frozen=True)
class DriverArchitecture(Row):
    """A GPU architecture NVIDIA's Linux drivers drive, by its discrete GPUs' compute
    capabilities: the first and the last driver branch that drive it."""

    architecture: str = ""  # "Kepler"
    compute_capabilities: tuple[str, ...] = ()  # ("3.0", "3.5", "3.7")
    first_branch: int | None = None  # 520; None = not read (not judged)
    first_driver_linux: str | None = None  # a release that drives it: "520.56.06"
    last_branch: int | None = None  # 470; None = still supported
    last_driver_linux: str | None = None  # a release of that branch to move to: "470.239.06"

    def misses(self, branch: int) -> str | None:
        """Why a driver of `branch` does not drive these GPUs: "past" the last branch,
        "before" the first; None when it drives them (or the table cannot tell)."""
        if self.last_branch is not None and branch > self.last_branch:
            return "past"
        if self.first_branch is not None and branch < self.first_branch:
            return "before"
        return None


# --- matrices/gpus.yaml -----------------------------------------------------------------
@dataclass(frozen=True)
class Gpu(Row):
    """A GPU model: compute capability, architecture, data-center class, memory, host platforms."""

    name: str = ""  # NVIDIA's name, e.g. "NVIDIA A100"
    aliases: tuple[str, ...] = ()  # what users type: "A100", "A100-80GB", "A100 80GB PCIe"
    compute_capability: str = ""  # "8.0"
    architecture: str = ""  # "Ampere"
    datacenter: bool | None = None  # forward compatibility (cuda-compat) works only on these
    memory_gb: int | None = None  # board memory, only where the name or a cited source states it; None = not read
    # the only platforms the GPU can be in (a Jetson module's or a Grace superchip's Arm CPU);
    # () = not limited. `host` says what it is part of, `host_source` where that was read.
    host_platforms: tuple[str, ...] = ()
    host: str = ""
    host_source: str = ""


# --- matrices/cuda_arch.yaml --------------------------------------------------------------
@dataclass(frozen=True)
class CudaArchSupport(Row):
    """Which real architectures a toolkit can compile for (CMake's CUDA arch table)."""

    cuda_min: str = ""  # first toolkit version of the range, "11.1"
    cuda_max: str = ""  # last toolkit version of the range, "11.3"
    sms: tuple[str, ...] = ()  # ("35", "37", ..., "86")


# --- matrices/family_rules.yaml -----------------------------------------------------------
@dataclass(frozen=True)
class FamilyRule(Row):
    """A fact about a range of a framework's releases, on one platform or on all: whether a
    GPU build exists there, its Python range there, its lowest GPU, the CUDA range of that
    era. It decides where no release row does, and adds per-platform facts to those rows."""

    framework: str = ""  # pytorch | tensorflow | jax | rapids | cupy | "*" (every framework)
    releases: str = ""  # PEP 440 specifier of the releases it covers; "" = every release
    platform: str = ""  # linux-64 | win-64 | osx-64 | osx-arm64 | ...; "" = every platform
    gpu: bool | None = None  # False: no GPU build of these releases on this platform
    released: bool | None = None  # False: never published (or withdrawn): a pin of it says so
    python: str | None = None  # PEP 440 specifier of the Pythons published there
    min_compute_capability: str | None = None  # "6.0"
    cuda_min: str | None = None  # the CUDA range the era's GPU builds cover, "11.1"
    cuda_max: str | None = None
    cudnn_min: str | None = None
    # True: the GPU build needs the driver released with the installed CUDA toolkit (it JIT-compiles
    # with that toolkit's ptxas), so minor-version compatibility does not apply
    native_driver: bool | None = None
    # the GPU build JIT-compiles its kernels with the ptxas of the locally installed CUDA toolkit
    # (the one it loads; not a pip-installed nvcc wheel), which must know the GPU's exact
    # architecture: "fails" when XLA's fallback to the driver's PTX JIT fails too, "slow" when
    # that fallback works
    local_ptxas: str | None = None
    advice: str | None = None  # what to do instead, worded for the conflict: "use WSL2 (platform linux-64)"


# --- matrices/wheels.yaml (GENERATED by `envbuild matrix refresh`) ---------------------------
@dataclass(frozen=True)
class WheelRelease(Row):
    """The wheel files of one release on a package index, as read on `read`."""

    package: str = ""  # distribution name: "torch", "jaxlib", "cupy-cuda12x"
    version: str = ""
    read: str = ""  # the date the index was read, "2026-11-23"
    # platform -> Pythons with a wheel: (("linux-64", "3.9 3.10 3.11"), ("win-64", "3.10 3.11"))
    wheels: tuple[tuple[str, str], ...] = ()
    cuda: str | None = None  # torch: the CUDA build of the default Linux x86_64 wheel (its pinned CUDA runtime)
    cuda_aarch64: str | None = None  # torch: the same for the Linux aarch64 wheel (None: CPU-only or not read)
    # jax: the artefacts each CUDA extra pins: (("cuda12", "jaxlib==0.4.36 jax-cuda12-plugin==0.4.36"),)
    pins: tuple[tuple[str, str], ...] = ()


# --- matrices/lock_targets.yaml ---------------------------------------------------------------
@dataclass(frozen=True)
class TargetGlibc(Row):
    """The glibc of a base image's OS, as the lock states it to the solver (__glibc)."""

    os: str = ""  # the OS label of base image tags: "ubuntu22.04"
    glibc: str = ""


@dataclass(frozen=True)
class TargetDefaults(Row):
    """__glibc and __linux when the base image's OS is not known."""

    glibc: str = ""
    linux: str = ""


@dataclass(frozen=True)
class TargetArchspec(Row):
    """The archspec microarchitecture family of a conda platform (__archspec)."""

    platform: str = ""  # linux-64
    archspec: str = ""  # x86_64


# --- matrices/packages.yaml -------------------------------------------------------------------
@dataclass(frozen=True)
class Package(Row):
    """A package name and the named sets the stages share it in (read via envbuild.core.package_sets)."""

    name: str = ""
    sets: tuple[str, ...] = ()


@dataclass(frozen=True)
class ImageLayer(Row):
    """A layer of a pip environment's image: the locked pins whose PEP 503 name matches one
    of `packages` (shell-style patterns), in the image order of the rows."""

    layer: str = ""  # names the build stage: lower-case letters, digits and dashes
    packages: tuple[str, ...] = ()


# --- matrices/lockable.yaml (GENERATED by `envbuild matrix refresh --lock-proof`) ----------
@dataclass(frozen=True)
class LockProof(Row):
    """Whether the pip requirement of a framework build locks for some Pythons of one
    platform, as the lock proof found it on the real index (one row per outcome and cause)."""

    framework: str = ""
    version: str = ""  # the release (or series) the build row names
    requirement: str = ""  # what was locked: "tensorflow[and-cuda]==2.15.0" (several: space-separated)
    index: str | None = None  # the build's own index, asked next to PyPI
    platform: str = ""
    pythons: str = ""  # "3.9 3.10 3.11"
    lockable: bool = True
    why: str = ""  # what uv answered, when it does not lock
    read: str = ""  # the day of the proof


# --- matrices/pythons.yaml --------------------------------------------------------------------
@dataclass(frozen=True)
class PythonRelease(Row):
    """A CPython feature release envbuild knows."""

    version: str = ""  # major.minor: "3.12"
    first_release: str | None = None  # date of the x.y.0 release
    pep: int | None = None  # the release schedule PEP


# --- matrices/base_images.yaml ----------------------------------------------------------------
@dataclass(frozen=True)
class BaseImage(Row):
    """A real base image tag and what it carries (CUDA, cuDNN, Python, OS, framework)."""

    ref: str = ""  # full real reference: "nvidia/cuda:12.4.1-cudnn-runtime-ubuntu22.04"
    family: str = ""  # dlc | pytorch | rapids | tensorflow | cuda
    flavour: str | None = None  # base | runtime | devel (nvidia/cuda, pytorch); None otherwise
    framework: str | None = None  # pytorch | tensorflow | rapids | None (bare CUDA)
    framework_version: str | None = None
    cuda: str | None = None  # "12.4" (major.minor) or "12.4.1"
    cudnn: str | None = None
    # The Python the image runs: the framework image's own, or for an OS-only base
    # (nvidia/cuda) its distribution's python3, filled in from `DistributionPython` when
    # the tables are loaded (then `python_source` says where it was read). None = not read.
    python: str | None = None  # "3.11"
    os: str | None = None  # "ubuntu22.04"
    platforms: tuple[str, ...] = ("linux-64",)
    python_source: str | None = None
    # Only on a row made for an image outside the catalog (envbuild.resolver.named_base):
    # why what it leaves unknown could not be read from the image
    unread: str | None = None


@dataclass(frozen=True)
class BaseFamily(Row):
    """What the Dockerfile template needs to know about the bases of one family."""

    family: str = ""  # dlc | pytorch | rapids | tensorflow | cuda
    image_python: bool = True  # the bases bring the python3 the installer runs with (nvidia/cuda: none)
    dockerfile_comment: str = ""  # opens the rendered Dockerfile, one "# " line per line


@dataclass(frozen=True)
class BaseCarries(Row):
    """What the Python of a framework image of `family` carries, for its `releases`: the
    framework's pip packages at the image's build (the pip requirements of that build),
    installed by pip with the wheels they pin exactly."""

    family: str = ""  # a base family with a framework: pytorch
    releases: str = ""  # PEP 440 specifier of the framework releases the record holds for: ">=2.6"


@dataclass(frozen=True)
class ImageEnv(Row):
    """What a variable in an image's config env says about a base image outside the
    catalog: its `fact` (cuda, cudnn, python, flavour, framework), either the variable's
    value (read as a version) or, when `value` is set, that value whenever the variable
    is set. The first row whose variable an image sets decides a fact."""

    env: str = ""  # CUDA_VERSION
    fact: str = ""  # one of envbuild.core.model.BASE_FACTS
    value: str | None = None  # flavour "devel" when NV_CUDA_CUDART_DEV_VERSION is set


@dataclass(frozen=True)
class DistributionPython(Row):
    """The python3 an OS release's own archive installs (what `apt-get install python3`
    gives on an OS-only base)."""

    os: str = ""  # as base image rows name it: "ubuntu22.04"
    python: str = ""  # major.minor: "3.10"
    package: str | None = None  # the python3 package version read: "python3 3.10.6-1~22.04"


@dataclass(frozen=True)
class InstallerPython(Row):
    """The oldest python3 envbuild's in-image installer runs on in one mode: the image
    build runs it with the base image's own python3."""

    installer: str = ""  # conda | pip
    python_min: str = ""  # major.minor: "3.10"


# --- matrices/gpu_peak.yaml -----------------------------------------------------------------
@dataclass(frozen=True)
class GpuPeak(Row):
    """Published peak figures, for judging the probe's measured bandwidth and GEMM."""

    gpu: str = ""  # matches Gpu.name
    memory_bandwidth_gbs: float | None = None
    fp32_tflops: float | None = None
    tf32_tflops: float | None = None  # dense (no sparsity)
    bf16_tflops: float | None = None  # dense


# --- matrices/mig.yaml ----------------------------------------------------------------------
@dataclass(frozen=True)
class MigFloor(Row):
    """The driver and CUDA a host needs to run MIG on a parent GPU."""

    parent: str = ""  # matches Gpu.name
    min_driver: str = ""
    min_cuda: str = ""


@dataclass(frozen=True)
class MigProfile(Row):
    """One MIG profile of a parent GPU (of a given total memory)."""

    parent: str = ""  # matches Gpu.name
    parent_memory_gb: int = 0
    name: str = ""  # "3g.40gb"
    memory_gb: float = 0.0
    compute_slices: int = 0
    of_slices: int = 7
    max_instances: int = 1


# --- matrices/cloud_instances.yaml ----------------------------------------------------------
@dataclass(frozen=True)
class CloudInstance(Row):
    """A cloud instance type and the GPUs it carries."""

    instance_type: str = ""  # "g5.xlarge"
    family: str = ""  # "g5"
    cloud: str = "aws"
    gpu: str = ""  # matches Gpu.name
    gpus: int = 1
    gpu_memory_gb: float = 0.0  # per GPU
