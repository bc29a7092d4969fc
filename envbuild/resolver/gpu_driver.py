"""Does the host driver drive the GPU at all?

A driver branch knows the GPU architectures of its time: one older than the first branch
that drives an architecture, or newer than the last (Kepler ends with R470; Maxwell, Pascal
and Volta with R580), does not see the GPU, whatever the framework build. The branches
are those of Linux drivers (matrices/cuda_driver.yaml, `architectures`).
"""
from __future__ import annotations

from envbuild.matrix import lookup
from envbuild.resolver.checks import Problem
from envbuild.resolver.context import Index, fact
from envbuild.resolver.request import Request

LINUX = ("linux-64", "linux-aarch64")


def driver_gpu_problems(req: Request, ix: Index) -> list[Problem]:
    """One conflict per GPU that the request's driver does not drive."""
    if req.driver is None or req.platform not in LINUX:
        return []
    out = []
    for g in req.known_gpus:
        key = ("driver_gpu", req.driver, g.cc)
        found = ix.memo.get(key)
        if found is None:
            found = ix.memo[key] = _judge(req, ix, g.cc)
        if found:
            # a GPU given by its compute capability alone is named by it already
            out.append(found[0](g.resolved.name, g.row is None))
    return out


def _judge(req: Request, ix: Index, cc) -> tuple:
    """() when the driver drives GPUs of compute capability `cc`, else (a function of the
    GPU's name, and whether that name is the capability, that writes the problem,)."""
    row = lookup.driver_architecture(ix.m, str(cc))
    missed = row.misses(req.driver.parts[0]) if row is not None else None  # None row: a Tegra GPU
    if missed is None:
        return ()
    arch = row.architecture
    if missed == "past":
        return (lambda name, by_cc: Problem(
            "gpu_arch_unsupported",
            f"{_subject(name, by_cc, arch, cc)}, and the R{row.last_branch} driver branch is the last "
            f"that drives {arch}; driver {req.driver} does not see it at all, so use an R{row.last_branch} driver "
            f"(e.g. {row.last_driver_linux}) on that host or choose a newer GPU",
            (fact(f"{arch}: last driver branch R{row.last_branch}", row),),
            hints={"driver": row.last_driver_linux, "driver_branch_max": row.last_branch}),)
    return (lambda name, by_cc: Problem(
        "driver_too_old",
        f"{_subject(name, by_cc, arch, cc)}, which drivers drive from the R{row.first_branch} branch "
        f"on; driver {req.driver} does not see it at all, so upgrade the driver to >= {row.first_driver_linux}",
        (fact(f"{arch} ({cc}): first driver branch R{row.first_branch}", row),),
        hints={"driver": row.first_driver_linux}),)


def _subject(name: str, by_cc: bool, arch: str, cc) -> str:
    """`Tesla K80 is a Kepler GPU (compute capability 3.7)`, or for a GPU given by its
    capability, `GPU of compute capability 3.7 is Kepler`."""
    article = "an" if arch[:1] in "AEIOU" else "a"
    return f"{name} is {arch}" if by_cc else f"{name} is {article} {arch} GPU (compute capability {cc})"
