"""What to ask the solver: one SolveRequest per target platform, built from the resolved
stack (framework GPU build pins, python, CUDA/cuDNN constraints) and the spec's extras."""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from envbuild.core.model import Resolution, ResolvedFramework, Spec
from envbuild.core.package_sets import package_set
from envbuild.infra.errors import UserError
from envbuild.lock.gpu import build_pin, framework_packages
from envbuild.lock.virtual import VirtualPackage, target_virtual_packages


@dataclass(frozen=True)
class SolveRequest:
    """What one platform's conda solve is asked: channels, specs, constraints, virtual packages."""

    platform: str
    channels: tuple[str, ...]  # URLs (file:// for local folders)
    specs: tuple[str, ...]  # conda MatchSpecs that must be installed
    constraints: tuple[str, ...]  # must hold if the package is pulled in, never installs it
    virtual_packages: tuple[VirtualPackage, ...]
    gpu_frameworks: tuple[str, ...]  # frameworks whose chosen record must be a CUDA build
    cuda: str | None = None  # the resolved CUDA (major.minor) the variant packages must match


def spec_name(match_spec: str) -> str:
    return re.split(r"[\s=<>!~\[]", match_spec.strip(), maxsplit=1)[0]


def conda_frameworks(resolution: Resolution) -> tuple[ResolvedFramework, ...]:
    return tuple(f for f in resolution.resolved.frameworks if f.installer == "conda")


def framework_specs(framework: ResolvedFramework) -> tuple[str, ...]:
    """The resolver's pins, or (when it gave none) the framework's main package at the
    resolved version with the GPU build glob."""
    if framework.conda_specs:
        return framework.conda_specs
    package = framework_packages(framework.name)[0]
    pin = build_pin(framework.name)
    return (f"{package} =={framework.version}" + (f" {pin}" if pin else ""),)


def channel_url(channel: str, base_dir: Path) -> str:
    """Channel names and URLs pass through; a local folder becomes a file:// URL (relative
    paths are taken from the spec file's folder)."""
    if "://" in channel:
        return channel
    if channel.startswith(("/", ".", "~")) or (base_dir / channel).is_dir():
        path = Path(channel).expanduser()
        if not path.is_absolute():
            path = base_dir / path
        path = path.resolve()
        if not path.is_dir():
            raise UserError(f"channel folder {channel} does not exist", where="channels",
                            hint="give a folder holding <platform>/repodata.json, a URL or a channel name")
        return path.as_uri()
    return channel


def needs_conda(spec: Spec, resolution: Resolution) -> bool:
    return bool(conda_frameworks(resolution) or spec.conda_packages)


def needs_pip(spec: Spec, resolution: Resolution) -> bool:
    """Whether a pip lock is written: a framework installed by pip, or pip packages."""
    return bool(spec.pip_packages or any(f.installer == "pip" for f in resolution.resolved.frameworks))


def build_requests(spec: Spec, resolution: Resolution, platforms: tuple[str, ...],
                   glibc: str | None = None) -> list[SolveRequest]:
    stack = resolution.resolved
    base_dir = Path(spec.source).resolve().parent if spec.source else Path.cwd()
    channels = stack.channels or spec.channels
    if not channels:
        raise UserError("no conda channels to solve against", where=spec.source or "spec",
                        hint="add e.g. `channels: [pytorch, nvidia, conda-forge]` or a local channel folder")
    urls = tuple(channel_url(c, base_dir) for c in channels)

    frameworks = conda_frameworks(resolution)
    specs: list[str] = []
    for framework in frameworks:
        specs.extend(framework_specs(framework))
    if stack.python:
        specs.append(f"python {stack.python}.*")
    specs.extend(spec.conda_packages)

    constraints: list[str] = []
    gpu = tuple(f.name for f in frameworks if f.cuda)
    if gpu and stack.cuda:
        # Whatever pulls these in must agree with the resolved CUDA / cuDNN: the packages
        # whose version IS the CUDA variant in the channels that use them.
        constraints += [f"{name} {stack.cuda}.*" for name in package_set("cuda_variant")]
        if stack.cudnn:
            constraints.append(f"cudnn {stack.cudnn}.*")
    return [
        SolveRequest(
            platform=platform,
            channels=urls,
            specs=tuple(specs),
            constraints=tuple(constraints),
            virtual_packages=target_virtual_packages(stack, platform, glibc),
            gpu_frameworks=gpu,
            cuda=stack.cuda if gpu else None,
        )
        for platform in platforms
    ]
