"""Does the host driver drive the GPU at all?

A driver branch knows the GPU architectures of its time: one older than the branch that
added an architecture, or newer than the last branch that kept it (Kepler ends with R470;
Maxwell, Pascal and Volta with R580), does not see the GPU, whatever the framework build.
The branches are those of Linux drivers (matrices/cuda_driver.yaml, `architectures`;
envbuild.matrix.lookup.driver_span).
"""
from __future__ import annotations

from envbuild.matrix import lookup
from envbuild.model import Fact
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
            out.append(found[0](g.resolved.name))
    return out


def _judge(req: Request, ix: Index, cc) -> tuple:
    """() when the driver drives GPUs of compute capability `cc`, else (a function of the
    GPU's name that writes the problem,)."""
    span = lookup.driver_span(ix.m, str(cc))
    if span is None:  # an integrated (Tegra) GPU
        return ()
    missed = span.misses(req.driver.parts[0])
    row = span.architecture
    arch = row.architecture
    if missed == "past":
        return (lambda name: Problem(
            "gpu_arch_unsupported",
            f"{name} is a {arch} GPU (compute capability {cc}), and the R{row.last_branch} driver branch is the last "
            f"that drives {arch}; driver {req.driver} does not see it at all, so use an R{row.last_branch} driver "
            f"(e.g. {row.last_driver_linux}) on that host or choose a newer GPU",
            (fact(f"{arch}: last driver branch R{row.last_branch}", row),),
            hints={"driver": row.last_driver_linux, "driver_branch_max": row.last_branch}),)
    if missed is None:
        return ()
    need = span.first_driver
    return (lambda name: Problem(
        "driver_too_old",
        f"{name} (compute capability {cc}) is driven only from the R{span.first_branch} driver branch on, the one "
        f"NVIDIA released with CUDA {span.first_cuda}, the first toolkit for sm_{cc.sm}; driver {req.driver} does not "
        f"see it at all, so upgrade the driver to >= {need}",
        (fact(f"CUDA {span.first_cuda} is the first toolkit with sm_{cc.sm}", span.toolkits),
         fact(f"CUDA {span.first_release.version} came with driver {need}", span.first_release),
         Fact(f"{arch}: driven by NVIDIA's Linux drivers", row.source, row.inferred, row.secondary)),
        hints={"driver": need}),)
