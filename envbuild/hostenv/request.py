"""The request for an environment on this host: the spec with this machine's facts laid
over it, resolved without a base image.

- The target: this host's NVIDIA driver and GPUs replace the spec's (`--driver`/`--gpu`
  on the command line win). A host without a driver (a build machine, a laptop) keeps the
  spec's target, with a warning that the environment is for that target.
- The platform: this host's (`linux-64`, `linux-aarch64`).
- No base image: the environment is installed here, so nothing is bound to an image's
  Python and the lock's C library is this host's glibc.
- The Python of a pip environment (a venv over an interpreter of this host): the spec's,
  else the one the existing environment runs, else the host's default, as long as the
  stack supports it; otherwise the resolver's choice, which `envbuild.hostenv.python`
  then finds or installs.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable

from envbuild.core.model import BUILD_PLATFORMS, Resolution, Spec
from envbuild.core.values import major_minor
from envbuild.core.versions import parse_version
from envbuild.infra.errors import EnvironmentProblem
from envbuild.resolver import resolve


@dataclass(frozen=True)
class Host:
    """What this machine is, for an environment installed on it."""

    platform: str
    glibc: str | None
    driver: str | None
    gpus: tuple[str, ...]  # as a spec names them


@dataclass(frozen=True)
class HostRequest:
    spec: Spec  # the spec for this host
    target_source: str  # "host", "spec" or "flags": where the driver and GPUs came from
    notes: tuple[str, ...]  # what the user must know (printed as warnings)


def for_host(spec: Spec, host: Host, *, target_from_flags: bool) -> HostRequest:
    if host.platform not in BUILD_PLATFORMS:
        raise EnvironmentProblem(f"this host is {host.platform}, and envbuild installs GPU environments for "
                                 f"{', '.join(BUILD_PLATFORMS)} only",
                                 hint="run `envbuild env` on the Linux machine that will run the environment")
    notes = []
    changes: dict = {"platform": host.platform, "platforms": (), "base": "auto", "base_image": None, "base_facts": (),
                     "for_image": False}  # judged as a host, whatever image the spec names
    if host.platform not in spec.lock_platforms:
        notes.append(f"the spec is for {', '.join(spec.lock_platforms)}; this environment is for this host's "
                     f"{host.platform}")
    target = _target_text(spec.driver, spec.gpus)
    if target_from_flags:
        source = "flags"
    elif host.driver:
        source = "host"
        gpus = host.gpus or spec.gpus
        if spec.driver and (spec.driver, tuple(spec.gpus)) != (host.driver, gpus):
            notes.append(f"the spec's target ({target}) is replaced by this host's "
                         f"({_target_text(host.driver, gpus)})")
        if not host.gpus and spec.gpus:
            notes.append(f"no GPU was read on this host; the spec's GPUs stand ({', '.join(spec.gpus)})")
        changes.update(driver=host.driver, gpus=tuple(gpus))
    else:
        source = "spec"
        notes.append("this host has no NVIDIA driver, so the environment is for the spec's target "
                     f"({target or 'no driver or GPU named: nothing checks them'}), not for this machine's GPUs")
    return HostRequest(dataclasses.replace(spec, **changes), source, tuple(notes))


def _target_text(driver: str | None, gpus) -> str:
    parts = ([f"driver {driver}"] if driver else []) + ([", ".join(gpus)] if gpus else [])
    return ", ".join(parts)


def resolve_for_host(request: HostRequest, host_python: Callable[[], "str | None"]) -> tuple[HostRequest, Resolution]:
    """The resolution without a base image. For a pip environment whose spec leaves Python
    open, `host_python()` (the version the existing environment runs, else the host's
    default) is pinned when the stack supports it; otherwise the resolver's choice stands
    and a note says why."""
    resolution = resolve(request.spec, image=False)
    if not resolution.usable or resolution.resolved.installer != "pip" or request.spec.python:
        return request, resolution
    version = host_python()
    if not version:
        return request, resolution
    python = major_minor(parse_version(version))
    pinned_spec = dataclasses.replace(request.spec, python=python)
    pinned = resolve(pinned_spec, image=False)
    if pinned.ok or (pinned.usable and not resolution.ok):  # never a verdict worse than the resolver's choice
        return dataclasses.replace(request, spec=pinned_spec), pinned
    why = pinned.conflicts[0].message if pinned.conflicts else "it does not resolve"
    note = (f"this host's Python {version} does not fit the stack ({why}); the environment gets Python "
            f"{resolution.resolved.python}")
    return dataclasses.replace(request, notes=request.notes + (note,)), resolution
