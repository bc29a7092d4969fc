"""Virtual packages of the target machine.

A conda solve on a build host without a GPU sees no `__cuda`, and the solver then picks a
CPU build or fails for the wrong reason. envbuild therefore states the target instead:
`__cuda` from the CUDA version the resolved driver reports (or the resolved CUDA when the
driver is unknown), `__glibc` from the base image's OS, `__linux`, `__unix`, `__archspec`.
"""
from __future__ import annotations

from dataclasses import dataclass

from envbuild.errors import UserError
from envbuild.model import ResolvedStack


@dataclass(frozen=True)
class VirtualPackage:
    name: str
    version: str
    build: str = "0"

    def __str__(self) -> str:
        return f"{self.name}={self.version}={self.build}"


def _targets():
    """The matrices, whose lock_targets.yaml tables say what the target machine is."""
    from envbuild import matrix

    return matrix.load()


def glibc_for(os_label: str | None) -> str:
    m = _targets()
    if os_label:
        for row in m.target_glibc:
            if row.os == os_label:
                return row.glibc
    return m.target_defaults[0].glibc


def cuda_for(stack: ResolvedStack) -> str | None:
    """The `__cuda` version: what conda itself detects on the target host, i.e. the CUDA
    version the driver reports (not the minor-version-compatibility ceiling, which conda
    never sees). Without a known driver the environment's own CUDA is the best statement
    of the target (the resolver has already checked it against whatever it knew)."""
    return stack.driver_cuda or stack.max_driver_cuda or stack.cuda


def target_virtual_packages(stack: ResolvedStack, platform: str) -> tuple[VirtualPackage, ...]:
    m = _targets()
    archspec = {row.platform: row.archspec for row in m.target_archspec}
    arch = archspec.get(platform)
    if arch is None:
        raise UserError(
            f"cannot lock for platform {platform!r}",
            hint=f"supported: {', '.join(sorted(archspec))}",
        )
    os_label = stack.base_image.os if stack.base_image else None
    packages = [
        VirtualPackage("__unix", "0"),
        VirtualPackage("__linux", m.target_defaults[0].linux),
        VirtualPackage("__glibc", glibc_for(os_label)),
        VirtualPackage("__archspec", "1", arch),
    ]
    cuda = cuda_for(stack)
    if cuda:
        packages.append(VirtualPackage("__cuda", cuda))
    return tuple(packages)
