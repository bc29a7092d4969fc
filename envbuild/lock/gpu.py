"""Which conda records are GPU builds.

The most dangerous lock is a silent one: a solve that falls back to the CPU build of a
framework. After every solve the framework's record is checked here, and a record that
is not a CUDA build is refused.
"""
from __future__ import annotations

# conda package(s) that carry each framework's compiled code, in the order to look for them
FRAMEWORK_PACKAGES = {
    "pytorch": ("pytorch",),
    "tensorflow": ("tensorflow-base", "tensorflow-gpu", "tensorflow"),
    "jax": ("jaxlib",),
    # conda-forge splits CuPy (13.0 on): `cupy` depends on `cupy-core` (the compiled code,
    # whose CUDA ties are only run_constrained) and on the CUDA libraries, so it is `cupy`
    # whose record shows the CUDA variant.
    "cupy": ("cupy", "cupy-core"),
    "rapids": ("rapids",),
}

# Dependencies through which channels tie a build to a CUDA variant: the toolkit packages
# of the pytorch/defaults channels, the nvidia/conda-forge metapackages, the virtual package.
# (conda-forge's cupy depends on cuda-version, and on cudatoolkit for its CUDA 11 builds.)
CUDA_DEPENDENCIES = frozenset(
    {"cudatoolkit", "pytorch-cuda", "cuda-version", "__cuda", "cuda-cudart", "cuda-runtime", "cudnn", "nccl"}
)

# Only these frameworks publish CPU builds under the same package name; their build string
# must name CUDA. CuPy and RAPIDS have no CPU builds, so their dependencies decide.
HAS_CPU_BUILDS = frozenset({"pytorch", "tensorflow", "jax"})


def dependency_name(depend: str) -> str:
    return depend.split(" ", 1)[0]


def is_cpu_marked(build: str, depends: tuple[str, ...]) -> bool:
    if "cpu" in build.lower():
        return True
    # pytorch channel: CPU builds depend on `pytorch-mutex 1.0 cpu`
    return any(d.split() == ["pytorch-mutex", "1.0", "cpu"] for d in depends)


def is_gpu_build(framework: str, build: str, depends: tuple[str, ...]) -> bool:
    if is_cpu_marked(build, depends):
        return False
    if "cuda" in build.lower():
        return True
    if framework in HAS_CPU_BUILDS:
        return False
    return any(dependency_name(d) in CUDA_DEPENDENCIES for d in depends)


def build_pin(framework: str) -> str | None:
    """The build-string glob that refuses CPU builds of `framework` (None: not needed)."""
    return "*cuda*" if framework in HAS_CPU_BUILDS else None
