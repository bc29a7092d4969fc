"""Virtual packages of the target machine.

A conda solve on a build host without a GPU sees no `__cuda`, and the solver then picks a
CPU build or fails for the wrong reason. envbuild therefore states the target instead:
`__cuda` from the CUDA version the resolved driver reports (or the resolved CUDA when the
driver is unknown), `__glibc` from the base image's OS, `__linux`, `__unix`, `__archspec`.
"""
from __future__ import annotations

from dataclasses import dataclass

from envbuild import matrix
from envbuild.core.model import ResolvedStack
from envbuild.infra.errors import UserError


@dataclass(frozen=True)
class VirtualPackage:
    """A conda virtual package (`__cuda`, `__glibc`, ...) the solver assumes the target has."""

    name: str
    version: str
    build: str = "0"

    def __str__(self) -> str:
        return f"{self.name}={self.version}={self.build}"


def _targets():
    """The matrices, whose lock_targets.yaml tables say what the target machine is."""
    return matrix.load()


def glibc_for(os_label: str | None) -> str:
    """The glibc of the target OS. An OS without a row is refused rather than given the
    default floor: a floor above the OS's real glibc locks packages that cannot run there.
    Only a base whose OS is not known at all (a framework image, an image outside the
    catalog) gets the default, and the lock says so (`unknown_os_note`)."""
    m = _targets()
    if not os_label:
        return m.target_defaults[0].glibc
    for row in m.target_glibc:
        if row.os == os_label:
            return row.glibc
    raise UserError(f"the glibc of OS {os_label!r} is not recorded, so a lock cannot state the target's C library",
                    where="matrices/lock_targets.yaml", hint="add a glibc row for it with its source")


def unknown_os_note(stack: ResolvedStack) -> str | None:
    """The lock's note when the base image's OS, and so its glibc, is not known."""
    if stack.base_image is None or stack.base_image.os:
        return None
    default = _targets().target_defaults[0].glibc
    return (f"the OS of the base image {stack.base_image.ref} is not recorded, so the lock assumes its glibc is "
            f"{default} (the default floor): packages that need a newer glibc are refused, and an OS older "
            f"than that floor is not detected")


def cuda_for(stack: ResolvedStack) -> str | None:
    """The `__cuda` version: what conda itself detects on the target host, i.e. the CUDA
    version the driver reports (not the minor-version-compatibility ceiling, which conda
    never sees). Without a known driver the environment's own CUDA is the best statement
    of the target (the resolver has already checked it against whatever it knew)."""
    return stack.driver_cuda or stack.max_driver_cuda or stack.cuda


def target_virtual_packages(stack: ResolvedStack, platform: str, glibc: str | None = None) -> tuple[VirtualPackage, ...]:
    """`glibc`: the target's C library when known directly (a host), else the base image OS's."""
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
        VirtualPackage("__glibc", glibc or glibc_for(os_label)),
        VirtualPackage("__archspec", "1", arch),
    ]
    cuda = cuda_for(stack)
    if cuda:
        packages.append(VirtualPackage("__cuda", cuda))
    return tuple(packages)
