"""The driver link: is the host's driver new enough for the build's CUDA (and for what
the build itself or its family asks)?"""
from __future__ import annotations

from envbuild.core.model import Fact
from envbuild.core.values import ConflictKind
from envbuild.frameworks.build import Build
from envbuild.resolver import families
from envbuild.resolver.context import Index, fact
from envbuild.resolver.problem import Hints, Problem, unknown
from envbuild.resolver.request import Request


def driver(b: Build, req: Request, ix: Index) -> list[Problem]:
    if req.driver is None or req.platform.startswith("osx"):
        return []
    rule = ix.driver_rule(b.cuda, req.platform)
    need, source_fact = rule.driver, None
    if need is not None:
        source_fact = Fact(rule.rule, rule.source or "envbuild rule", rule.inferred, rule.secondary)
    drivers = ix.drivers
    if b.driver_min and (need is None or drivers[b.driver_min] > drivers[need]):
        need, source_fact = b.driver_min, fact(f"{b.framework} {b.version} asks for driver >= {b.driver_min}", b.row)
    native = next((r for r in families.rules_for(ix, b.framework, b.v, None) if r.native_driver), None)
    native_need = ix.native_need(b.cuda) if native is not None else None
    if native_need and (need is None or drivers[native_need] > drivers[need]):
        # the build JIT-compiles with the CUDA toolkit's ptxas, whose output needs that toolkit's own driver
        need = native_need
        source_fact = fact(f"{b.framework} {native.releases}: the driver must be at least the one released with the "
                           f"installed CUDA toolkit (no minor-version compatibility)", native)
    if need is None:
        return [unknown(f"the matrix has no minimum driver for CUDA {b.cuda}", ("driver",), framework=b.framework)]
    if req.driver >= drivers[need]:
        return []
    have = ix.driver_cuda(req.driver, req.platform)
    top = have.native_cuda if native is not None else have.cuda
    reach = f"{'natively ' if native is not None else ''}supports CUDA up to {top}" if top else \
        "is older than every CUDA release in the matrix"
    return [Problem(ConflictKind.DRIVER_TOO_OLD,
                    f"{b.framework} {b.version} is built for CUDA {b.cuda}, which needs driver >= {need}; "
                    f"your driver {req.driver} {reach}, so upgrade the driver or use a build for CUDA "
                    f"{top or 'older'}",
                    (source_fact, Fact(have.rule, have.source or "envbuild rule", have.inferred, have.secondary)),
                    framework=b.framework, hints=Hints(driver=need, max_cuda=top))]
