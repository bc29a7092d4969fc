"""Which conda records are GPU builds.

The most dangerous lock is a silent one: a solve that falls back to the CPU build of a
framework. After every solve the framework's record is checked here, and a record that
is not a CUDA build is refused.
"""
from __future__ import annotations

import functools
import re

from envbuild import frameworks
from envbuild.core.package_sets import package_frozenset


def framework_packages(framework: str) -> tuple[str, ...]:
    """The conda package(s) that carry `framework`'s compiled code, in the order to look
    for them (its plugin's `conda_packages`; an unknown name stands for itself)."""
    if framework in frameworks.names():
        return frameworks.get(framework).lock.conda_packages
    return (framework,)


def all_framework_packages() -> frozenset[str]:
    return frozenset(n for p in frameworks.all() for n in p.lock.conda_packages)


# Dependencies through which channels tie a build to a CUDA variant (the toolkit packages
# of the pytorch/defaults channels, the nvidia/conda-forge metapackages, the virtual
# package) and those whose version is the variant: the sets `cuda_dependency` and
# `cuda_variant` of matrices/packages.yaml.
# (conda-forge's cupy depends on cuda-version, and on cudatoolkit for its CUDA 11 builds.)


def _has_cpu_builds(framework: str) -> bool:
    """Does `framework` publish CPU builds under the same package name (PyTorch, TensorFlow,
    JAX)? Then its build string must name CUDA; CuPy and RAPIDS have no CPU builds, so
    their dependencies decide."""
    return framework in frameworks.names() and frameworks.get(framework).lock.has_cpu_builds


@functools.lru_cache(maxsize=None)
def variant_records() -> frozenset[str]:
    """Packages published as CPU and GPU builds under one name, and the packages that select
    between them (the plugins' `lock.variant_records`). In a GPU
    environment each of these records must be a GPU build of a CUDA the target runs, not
    only the framework's own."""
    return frozenset(n for p in frameworks.all() for n in p.lock.variant_records)


@functools.lru_cache(maxsize=None)
def cpu_selectors() -> frozenset[str]:
    """Records whose presence selects a framework's CPU builds (the plugins' `lock.cpu_selectors`)."""
    return frozenset(n for p in frameworks.all() for n in p.lock.cpu_selectors)


@functools.lru_cache(maxsize=None)
def cpu_dependencies() -> frozenset[tuple[str, ...]]:
    """Dependencies (name, version, build) that mark a record as a CPU build."""
    return frozenset(tuple(d.split()) for p in frameworks.all() for d in p.lock.cpu_dependencies)


# CUDA in build strings: py3.11_cuda12.4_cudnn9.1.0_0 (pytorch channel), cuda120_py310h..._301
# and cuda120py311h... (conda-forge), py311_cu124 (torchvision/torchaudio)
_BUILD_CUDA = (re.compile(r"cuda(\d+)\.(\d+)"), re.compile(r"cuda(\d+)(\d)(?=_|py)"),
               re.compile(r"(?:^|_)cu(\d+)(\d)(?=_|$)"))


def build_cuda(build: str, depends: tuple[str, ...]) -> str | None:
    """major.minor of the CUDA a record was built for, from its build string or the
    lower bound of its variant dependency; None when it names none."""
    for pattern in _BUILD_CUDA:
        found = pattern.search(build.lower())
        if found:
            return f"{int(found.group(1))}.{found.group(2)}"
    for depend in depends:
        if dependency_name(depend) in package_frozenset("cuda_variant"):
            found = re.search(r"(\d+)\.(\d+)", depend)
            if found:
                return f"{found.group(1)}.{found.group(2)}"
    return None


def cuda_compatible(built: str, target: str) -> bool:
    """A build for CUDA X.Y runs with the target's CUDA X.Z when Z >= Y (one major)."""
    b, t = [int(p) for p in built.split(".")[:2]], [int(p) for p in target.split(".")[:2]]
    return b[0] == t[0] and b[1] <= t[1]


def variant_problem(name: str, build: str, depends: tuple[str, ...], target_cuda: str | None) -> str | None:
    """Why a record does not belong in a GPU environment for `target_cuda`, else None."""
    if name not in variant_records():
        return None
    if name in cpu_selectors():
        return "selects the CPU builds"
    if is_cpu_marked(build, depends):
        return "is a CPU build"
    built = build_cuda(build, depends)
    if built and target_cuda and not cuda_compatible(built, target_cuda):
        return f"is built for CUDA {built}, which the target's CUDA {target_cuda} does not run"
    return None


def dependency_name(depend: str) -> str:
    return depend.split(" ", 1)[0]


def is_cpu_marked(build: str, depends: tuple[str, ...]) -> bool:
    if "cpu" in build.lower():
        return True
    # a channel's CPU marker package (the plugins' `lock.cpu_dependencies`)
    return any(tuple(d.split()) in cpu_dependencies() for d in depends)


def is_gpu_build(framework: str, build: str, depends: tuple[str, ...]) -> bool:
    if is_cpu_marked(build, depends):
        return False
    if "cuda" in build.lower():
        return True
    if _has_cpu_builds(framework):
        return False
    cuda_dependencies = package_frozenset("cuda_dependency")
    return any(dependency_name(d) in cuda_dependencies for d in depends)


def build_pin(framework: str) -> str | None:
    """The build-string glob that refuses CPU builds of `framework` (None: not needed)."""
    return "*cuda*" if _has_cpu_builds(framework) else None
