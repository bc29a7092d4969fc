"""Virtual packages of the target machine.

A conda solve on a build host without a GPU sees no `__cuda`, and the solver then picks a
CPU build or fails for the wrong reason. envbuild therefore states the target instead:
`__cuda` from the CUDA version the resolved driver reports (or the resolved CUDA when the
driver is unknown), `__glibc` from the base image's OS, `__linux`, `__unix`, `__archspec`.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from envbuild.errors import UserError
from envbuild.model import ResolvedStack
from envbuild.paths import DATA_DIR


@dataclass(frozen=True)
class VirtualPackage:
    name: str
    version: str
    build: str = "0"

    def __str__(self) -> str:
        return f"{self.name}={self.version}={self.build}"


@lru_cache(maxsize=1)
def _targets() -> dict[str, Any]:
    import yaml

    with open(DATA_DIR / "lock_targets.yaml", encoding="utf-8") as handle:
        return yaml.load(handle, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # the C parser: 10x faster


def glibc_for(os_label: str | None) -> str:
    data = _targets()
    if os_label:
        for row in data["glibc"]:
            if row["os"] == os_label:
                return row["glibc"]
    return data["defaults"]["glibc"]


def cuda_for(stack: ResolvedStack) -> str | None:
    """The `__cuda` version: what conda itself detects on the target host, i.e. the CUDA
    version the driver reports (not the minor-version-compatibility ceiling, which conda
    never sees). Without a known driver the environment's own CUDA is the best statement
    of the target (the resolver has already checked it against whatever it knew)."""
    return stack.driver_cuda or stack.max_driver_cuda or stack.cuda


def target_virtual_packages(stack: ResolvedStack, platform: str) -> tuple[VirtualPackage, ...]:
    data = _targets()
    arch = data["archspec"].get(platform)
    if arch is None:
        raise UserError(
            f"cannot lock for platform {platform!r}",
            hint=f"supported: {', '.join(sorted(data['archspec']))}",
        )
    os_label = stack.base_image.os if stack.base_image else None
    packages = [
        VirtualPackage("__unix", "0"),
        VirtualPackage("__linux", data["defaults"]["linux"]),
        VirtualPackage("__glibc", glibc_for(os_label)),
        VirtualPackage("__archspec", "1", arch),
    ]
    cuda = cuda_for(stack)
    if cuda:
        packages.append(VirtualPackage("__cuda", cuda))
    return tuple(packages)
