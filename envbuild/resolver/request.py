"""The spec, read once into the values the checks compare (parsed versions, GPU rows)."""
from __future__ import annotations

from dataclasses import dataclass

from envbuild.errors import UserError
from envbuild.matrix import tables as t
from envbuild.model import ResolvedGpu, Spec
from envbuild.resolver.context import Index, mm
from envbuild.versions import Constraint, cuda_from_local, parse_compute_capability, parse_constraint, parse_driver, parse_version


@dataclass(frozen=True)
class Gpu:
    resolved: ResolvedGpu
    cc: tuple[int, int]
    row: t.Gpu | None

    @property
    def sm(self) -> int:
        return self.cc[0] * 10 + self.cc[1]

    @property
    def label(self) -> str:
        return f"{self.resolved.name} (sm_{self.sm})"


@dataclass(frozen=True)
class CudaPin:
    text: str  # as written
    major: int
    minor: int | None  # None = any minor of the major

    def matches(self, cuda: str) -> bool:
        v = parse_version(cuda).release
        return v[0] == self.major and (self.minor is None or (v[1] if len(v) > 1 else 0) == self.minor)

    @property
    def short(self) -> str:
        return f"{self.major}" if self.minor is None else f"{self.major}.{self.minor}"


@dataclass(frozen=True)
class Request:
    spec: Spec
    frameworks: tuple[tuple[str, Constraint, CudaPin | None], ...]  # name, version constraint, +cuXYZ pin
    cuda: CudaPin | None
    cudnn: tuple[int, ...] | None
    python: str | None  # major.minor
    driver: str | None
    gpus: tuple[Gpu, ...]
    platform: str
    installer: str | None


def read_request(spec: Spec, ix: Index) -> Request:
    frameworks = []
    for f in spec.frameworks:
        try:
            constraint = parse_constraint(f.constraint)
        except ValueError as exc:
            raise UserError(f"{f.name}: {exc}", where=spec.source, hint='write e.g. "2.1.*" or ">=2.1,<2.3"') from None
        local = None
        if constraint.local is not None:
            try:
                local = _pin(f"+{constraint.local}", cuda_from_local(constraint.local))
            except ValueError as exc:
                raise UserError(f"{f.name}: {exc}", where=spec.source) from None
        frameworks.append((f.name, constraint, local))
    cuda = None
    if spec.cuda:
        try:
            cuda = _pin(spec.cuda, spec.cuda[2:] if spec.cuda.lower().startswith("cu") else spec.cuda)
        except ValueError as exc:
            raise UserError(f"cuda: {exc}", where=spec.source, hint='write it like "12.1" or "11.0.221"') from None
    try:
        cudnn = parse_version(spec.cudnn).release if spec.cudnn else None
        python = mm(parse_version(spec.python)) if spec.python else None
        driver = spec.driver.strip() if spec.driver else None
        if driver:
            parse_driver(driver)
    except ValueError as exc:
        raise UserError(str(exc), where=spec.source) from None
    gpus = tuple(_gpu(text, ix, spec) for text in spec.gpus)
    return Request(spec, tuple(frameworks), cuda, cudnn, python, driver, gpus, spec.platform, spec.installer)


def _pin(text: str, cuda: str) -> CudaPin:
    if cuda.isdigit() and len(cuda) >= 3:  # "cu121" written without the dot
        cuda = f"{cuda[:-1]}.{cuda[-1]}"
    release = parse_version(cuda).release
    return CudaPin(text, release[0], release[1] if len(release) > 1 else None)


def _gpu(text: str, ix: Index, spec: Spec) -> Gpu:
    row = ix.gpu(text)
    if row is not None:
        cc = parse_compute_capability(row.compute_capability)
        return Gpu(ResolvedGpu(row.name, row.compute_capability, row.datacenter), cc, row)
    try:
        cc = parse_compute_capability(text)
    except ValueError:
        raise UserError(f"unknown GPU {text!r}", where=spec.source,
                        hint="give a model the matrix knows (A100, RTX 3090) or a compute capability (8.6)") from None
    return Gpu(ResolvedGpu(f"GPU of compute capability {cc[0]}.{cc[1]}", f"{cc[0]}.{cc[1]}", None), cc, None)
