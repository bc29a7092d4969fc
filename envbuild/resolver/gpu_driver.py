"""Does the host driver drive the GPU at all?

A driver branch knows the GPU architectures of its time: one older than the first branch
that drives an architecture, or newer than the last (Kepler ends with R470; Maxwell, Pascal
and Volta with R580), does not see the GPU, whatever the framework build. The branches
are those of Linux drivers (matrices/cuda_driver.yaml, `architectures`).
"""
from __future__ import annotations

from envbuild.core.values import ConflictKind
from envbuild.matrix import lookup
from envbuild.resolver.context import Index, fact
from envbuild.resolver.problem import Hints, Problem
from envbuild.resolver.request import Gpu, Request


def driver_gpu_problems(req: Request, ix: Index) -> list[Problem]:
    """One conflict per GPU that the request's (Linux) driver does not drive."""
    if req.driver is None or not req.platform.linux:
        return []
    out = []
    for g in req.known_gpus:
        row = lookup.driver_architecture(ix.m, str(g.cc))  # None: a Tegra GPU, not judged
        missed = row.misses(req.driver.parts[0]) if row is not None else None
        if missed is not None:
            out.append(_problem(g, row, missed, req.driver))
    return out


def _problem(g: Gpu, row, missed: str, driver) -> Problem:
    arch = row.architecture
    # a GPU given by its compute capability alone is named by it already
    subject = f"{g.resolved.name} is {arch}" if g.row is None else \
        f"{g.resolved.name} is {'an' if arch[:1] in 'AEIOU' else 'a'} {arch} GPU (compute capability {g.cc})"
    if missed == "past":
        return Problem(
            ConflictKind.GPU_ARCH_UNSUPPORTED,
            f"{subject}, and the R{row.last_branch} driver branch is the last that drives {arch}; driver {driver} "
            f"does not see it at all, so use an R{row.last_branch} driver (e.g. {row.last_driver_linux}) on that "
            f"host or choose a newer GPU",
            (fact(f"{arch}: last driver branch R{row.last_branch}", row),),
            hints=Hints(driver=row.last_driver_linux, driver_branch_max=row.last_branch))
    return Problem(
        ConflictKind.DRIVER_TOO_OLD,
        f"{subject}, which drivers drive from the R{row.first_branch} branch on; driver {driver} does not see it "
        f"at all, so upgrade the driver to >= {row.first_driver_linux}",
        (fact(f"{arch} ({g.cc}): first driver branch R{row.first_branch}", row),),
        hints=Hints(driver=row.first_driver_linux))
