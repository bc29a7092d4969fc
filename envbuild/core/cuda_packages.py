"""Which CUDA a set of locked packages installs: the CUDA runtime, ptxas and cuDNN among
(name, version) pairs, by the named sets of matrices/packages.yaml. Shared by the lock,
which judges them (envbuild/lock/cuda_check.py), and the Dockerfile stage, whose labels
name them (envbuild/dockerfile/locked.py)."""
from __future__ import annotations

from dataclasses import dataclass

from envbuild.core.package_sets import package_set


@dataclass(frozen=True)
class Component:
    """A locked package that carries part of the environment's CUDA."""

    role: str  # runtime | ptxas | cudnn
    package: str
    version: str

    @property
    def minor(self) -> str:
        return ".".join(self.version.split(".")[:2])


def components(packages) -> tuple[Component, ...]:
    """The CUDA runtime, ptxas and cuDNN among locked (name, version) pairs, pip's wheels
    before conda's packages (the frameworks load the wheels first)."""
    versions: dict[str, str] = {}
    for name, version in packages:
        versions.setdefault(name.lower().replace("_", "-"), version)
    out = []
    roles = (("runtime", package_set("cuda_runtime_package")), ("ptxas", package_set("ptxas_package")),
             ("cudnn", package_set("cudnn_package")))
    for role, names in roles:
        # pip's wheels first, then the conda packages in the set's order (their minors agree: cuda-version
        # constrains cuda-cudart and cudatoolkit)
        found = sorted((n for n in names if n in versions), key=lambda n: (not n.startswith("nvidia-"), names.index(n)))
        if found:
            out.append(Component(role, found[0], versions[found[0]]))
    return tuple(out)


def installed_cuda(packages, fallback: str | None) -> str | None:
    """The CUDA runtime (major.minor) locked among (name, version) pairs; `fallback` when
    none is (the framework's wheel or the base image carries it)."""
    runtime = next((c for c in components(packages) if c.role == "runtime"), None)
    return runtime.minor if runtime else fallback
