"""Solve each SolveRequest with py-rattler, refuse CPU builds of GPU frameworks, and turn
solver failures into conflicts (see errors.py)."""
from __future__ import annotations

from dataclasses import dataclass

from envbuild.core.model import Conflict, Fix
from envbuild.core.package_sets import package_frozenset
from envbuild.core.values import ConflictKind
from envbuild.infra.errors import EnvironmentProblem, UserError
from envbuild.lock import loop
from envbuild.lock.errors import diagnose
from envbuild.lock.gpu import framework_packages, is_gpu_build, variant_problem
from envbuild.lock.request import SolveRequest
from envbuild.lock.virtual import VirtualPackage


@dataclass(frozen=True)
class LockedPackage:
    """One solved conda package, independent of rattler's objects."""

    name: str
    version: str
    build: str
    build_number: int
    subdir: str
    url: str
    channel: str
    md5: str | None
    sha256: str | None
    depends: tuple[str, ...]
    size: int | None


class SolveFailed(Exception):
    """The request cannot be locked; `conflicts` say why in resolve's format, `raw` holds
    the solver's own explanation for --verbose."""

    def __init__(self, conflicts: tuple[Conflict, ...], raw: str):
        self.conflicts = conflicts
        self.raw = raw
        super().__init__("; ".join(c.message for c in conflicts))


def _hex(value: bytes | None) -> str | None:
    return value.hex() if value else None


def locked_package(record) -> LockedPackage:
    return LockedPackage(
        name=record.name.normalized,
        version=str(record.version),
        build=str(record.build),
        build_number=record.build_number,
        subdir=record.subdir,
        url=record.url,
        channel=record.channel or "",
        md5=_hex(record.md5),
        sha256=_hex(record.sha256),
        depends=tuple(record.depends),
        size=record.size,
    )


class Solver:
    """Holds one rattler Gateway so repodata is read once for the solve and every probe."""

    def __init__(self):
        import rattler
        import rattler.exceptions

        self.rattler = rattler
        self.errors = rattler.exceptions
        self.gateway = rattler.Gateway()

    def _virtual(self, packages: tuple[VirtualPackage, ...]):
        r = self.rattler
        return [r.GenericVirtualPackage(r.PackageName(p.name), r.Version(p.version), r.BuildString(p.build))
                for p in packages]

    async def solve(self, request: SolveRequest, specs=None, constraints=None, virtual_packages=None):
        """Records for `request` (optionally with specs/constraints/virtual packages
        replaced, for probing). Raises rattler's SolverError when unsatisfiable."""
        r = self.rattler
        try:
            return await r.solve(
                sources=list(request.channels),
                specs=[r.MatchSpec(s) for s in (request.specs if specs is None else specs)],
                constraints=[r.MatchSpec(s) for s in (request.constraints if constraints is None else constraints)],
                gateway=self.gateway,
                platforms=[request.platform, "noarch"],
                virtual_packages=self._virtual(request.virtual_packages if virtual_packages is None else virtual_packages),
                channel_relations="disabled",
            )
        except self.errors.InvalidMatchSpecError as exc:
            raise UserError(f"invalid conda package spec: {exc}", where="packages.conda") from None
        except (self.errors.GatewayError, self.errors.FetchRepoDataError, self.errors.InvalidChannelError) as exc:
            raise EnvironmentProblem(
                f"cannot read the conda channels {', '.join(request.channels)}: {str(exc).splitlines()[0]}",
                hint="check the channel URLs or folders; for offline use point `channels` at a local mirror",
            ) from None

    async def query(self, request: SolveRequest, spec: str):
        """All records of `spec`'s package name in the request's channels (no dependencies)."""
        r = self.rattler
        result = await self.gateway.query(
            list(request.channels), [request.platform, "noarch"], [r.MatchSpec(spec)], recursive=False,
            channel_relations="disabled",
        )
        match = r.MatchSpec(spec)
        return [rec for per_channel in result for rec in per_channel if rec.matches(match)]


def cpu_fallback_conflicts(request: SolveRequest, packages: list[LockedPackage]) -> list[Conflict]:
    """A GPU framework whose chosen record is not a CUDA build is refused, never locked."""
    conflicts = []
    refused: set[str] = set()
    by_name = {p.name: p for p in packages}
    for framework in request.gpu_frameworks:
        record = next((by_name[n] for n in framework_packages(framework) if n in by_name), None)
        if record is None:
            conflicts.append(Conflict(
                kind=ConflictKind.FRAMEWORK_CUDA_MISMATCH,
                message=f"the solution for {request.platform} holds no {framework} package; the channel's "
                        f"package name differs from {framework_packages(framework)[0]!r}, so the GPU build cannot be checked",
            ))
        elif not is_gpu_build(framework, record.build, record.depends):
            refused.add(record.name)
            conflicts.append(Conflict(
                kind=ConflictKind.FRAMEWORK_CUDA_MISMATCH,
                message=f"the solver chose {record.name} {record.version} build {record.build} for {request.platform}, "
                        f"which is not a CUDA build; envbuild refuses to lock a CPU build for a GPU target",
                fixes=(Fix(f"pin the GPU build, e.g. `{record.name}=={record.version}=*cuda*`, or use a channel with CUDA builds"),),
            ))
    # Every other record with CPU and GPU builds: torchvision next to a CUDA pytorch must
    # be a CUDA build too, and of a CUDA the target runs.
    for p in packages if request.gpu_frameworks else ():
        why = variant_problem(p.name, p.build, p.depends, request.cuda)
        if why and p.name not in refused:
            conflicts.append(Conflict(
                kind=ConflictKind.FRAMEWORK_CUDA_MISMATCH,
                message=f"the solver chose {p.name} {p.version} build {p.build} for {request.platform}, which {why}; "
                        f"envbuild refuses to lock it into a GPU environment for CUDA {request.cuda}",
            ))
    if request.cuda:
        wanted = request.cuda.split(".")[:2]
        for p in packages:
            if p.name in package_frozenset("cuda_variant") and p.version.split(".")[:2] != wanted:
                conflicts.append(Conflict(
                    kind=ConflictKind.FRAMEWORK_CUDA_MISMATCH,
                    message=f"the solver chose {p.name} {p.version} for {request.platform}, but the resolved CUDA is "
                            f"{request.cuda}; envbuild refuses to lock a different CUDA variant",
                    fixes=(Fix(f"pin the variant in the conda specs, e.g. `{p.name}={request.cuda}`"),),
                ))
    return conflicts


async def _solve_all(requests: list[SolveRequest]) -> tuple[dict[str, list[LockedPackage]], list[Conflict], list[str]]:
    solver = Solver()
    solved: dict[str, list[LockedPackage]] = {}
    conflicts: list[Conflict] = []
    raw: list[str] = []
    for request in requests:
        try:
            records = await solver.solve(request)
        except solver.errors.SolverError as exc:
            loop.settle_at_exit()
            raw.append(f"[{request.platform}]\n{exc}")
            conflicts.append(await diagnose(solver, request, str(exc)))
            continue
        # sort_topologically hands back plain PackageRecords; map them to the full records
        by_name = {r.name.normalized: r for r in records}
        ordered = solver.rattler.PackageRecord.sort_topologically(records)
        packages = [locked_package(by_name[r.name.normalized]) for r in ordered]
        refused = cpu_fallback_conflicts(request, packages)
        if refused:
            conflicts.extend(refused)
            raw.append(f"[{request.platform}] solved: " + ", ".join(f"{p.name}={p.version}={p.build}" for p in packages))
            continue
        solved[request.platform] = packages
    return solved, conflicts, raw


def solve(requests: list[SolveRequest]) -> dict[str, list[LockedPackage]]:
    """Packages per platform, in install (topological) order. Raises SolveFailed."""
    solved, conflicts, raw = loop.run(_solve_all(requests))
    if conflicts:
        raise SolveFailed(tuple(conflicts), "\n\n".join(raw))
    return solved
