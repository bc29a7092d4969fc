"""The spec, read once into the values the checks compare (parsed versions, GPU rows)."""
from __future__ import annotations

import difflib
import functools
from dataclasses import dataclass

from envbuild.core.model import ResolvedGpu, Spec
from envbuild.core.values import ComputeCapability, CudaVersion, DriverVersion, Installer, Platform, major_minor
from envbuild.core.versions import Constraint, parse_constraint, parse_version
from envbuild.frameworks import read_label
from envbuild.infra.errors import UserError
from envbuild.matrix import tables as t
from envbuild.matrix.lookup import gpu_key, gpu_names
from envbuild.resolver.context import Index


@dataclass(frozen=True)
class Gpu:
    """A requested GPU with its parsed compute capability and matrix row."""

    resolved: ResolvedGpu
    cc: ComputeCapability | None  # None: a model the matrix does not know (no architecture check)
    row: t.Gpu | None

    @property
    def sm(self) -> int:
        return self.cc.sm

    @functools.cached_property
    def label(self) -> str:
        return f"{self.resolved.name} (sm_{self.sm})" if self.cc else repr(self.resolved.name)


@dataclass(frozen=True)
class CudaPin:
    """A CUDA version the request fixes (`cuda:` or a +cuXYZ label): a major and maybe a minor."""

    text: str  # as written
    major: int
    minor: int | None  # None = any minor of the major

    def matches(self, cuda: CudaVersion) -> bool:
        return cuda.major == self.major and (self.minor is None or cuda.minor == self.minor)

    @property
    def short(self) -> str:
        return f"{self.major}" if self.minor is None else f"{self.major}.{self.minor}"

    @property
    def version(self) -> CudaVersion | None:
        """The pinned major.minor; None when only a major is pinned."""
        return None if self.minor is None else CudaVersion(self.major, self.minor)


@dataclass(frozen=True)
class Request:
    """A spec with its values parsed once for the checks."""

    spec: Spec
    frameworks: tuple[tuple[str, Constraint, CudaPin | None], ...]  # name, version constraint, +cuXYZ pin
    cuda: CudaPin | None
    cudnn: tuple[int, ...] | None
    python: str | None  # major.minor
    driver: DriverVersion | None
    gpus: tuple[Gpu, ...]
    platform: Platform
    installer: Installer | None
    unknown_labels: tuple[tuple[str, str], ...] = ()  # (framework, label) for +labels that name no CUDA

    @functools.cached_property
    def known_gpus(self) -> tuple[Gpu, ...]:
        return tuple(g for g in self.gpus if g.cc is not None)

    @functools.cached_property
    def first_of_each_cc(self) -> tuple[Gpu, ...]:
        """The first known GPU of each compute capability, in request order: the checks'
        verdicts depend on a GPU's capability alone (its name is only in the wording)."""
        seen: dict = {}
        for g in self.known_gpus:
            seen.setdefault(g.cc, g)
        return tuple(seen.values())

    @functools.cached_property
    def cc_key(self) -> _Key:
        """The distinct compute capabilities of `first_of_each_cc`, as one dictionary key."""
        return _Key(tuple(g.cc for g in self.first_of_each_cc))

    @functools.cached_property
    def host_key(self) -> _Key:
        """What the checks other than the GPUs' read from the request."""
        return _Key((self.platform, self.python, self.driver, self.cudnn))


class _Key(tuple):
    """A tuple that computes its hash once."""

    def __hash__(self) -> int:
        found = self.__dict__.get("hash")
        if found is None:
            found = self.__dict__["hash"] = tuple.__hash__(self)
        return found


def read_request(spec: Spec, ix: Index) -> Request:
    frameworks, label_cudnn, unknown_labels = [], None, []
    for f in spec.frameworks:
        try:
            constraint = parse_constraint(f.constraint)
        except ValueError as exc:
            raise UserError(f"{f.name}: {exc}", where=spec.source, hint='write e.g. "2.1.*" or ">=2.1,<2.3"') from None
        local = None
        if constraint.local is not None:
            label = read_label(constraint.local)
            if label.kind in ("cpu", "rocm"):
                raise UserError(f"{f.name}: +{constraint.local} is not a CUDA build", where=spec.source,
                                hint="use a +cuXYZ variant (e.g. +cu121) or leave the label off")
            if label.cuda:
                local = _pin(f"+{constraint.local}", label.cuda)
                label_cudnn = label_cudnn or label.cudnn
            else:
                unknown_labels.append((f.name, constraint.local))
        frameworks.append((f.name, constraint, local))
    cuda = None
    if spec.cuda:
        try:
            cuda = _pin(spec.cuda, spec.cuda[2:] if spec.cuda.lower().startswith("cu") else spec.cuda)
        except ValueError as exc:
            raise UserError(f"cuda: {exc}", where=spec.source, hint='write it like "12.1" or "11.0.221"') from None
    try:
        # jaxlib's `+cuda11.cudnn86` states the cuDNN the build needs when the spec does not
        cudnn_text = spec.cudnn or label_cudnn
        cudnn = parse_version(cudnn_text).release if cudnn_text else None
        python = major_minor(parse_version(spec.python)) if spec.python else None
        driver = DriverVersion.parse(spec.driver) if spec.driver else None
        platform = Platform(spec.platform)
    except ValueError as exc:
        raise UserError(str(exc), where=spec.source) from None
    gpus = tuple(_gpu(text, ix) for text in spec.gpus)
    installer = Installer(spec.installer) if spec.installer else None
    return Request(spec, tuple(frameworks), cuda, cudnn, python, driver, gpus, platform, installer,
                   tuple(unknown_labels))


def _pin(text: str, cuda: str) -> CudaPin:
    if cuda.isdigit() and len(cuda) >= 3:  # "cu121" written without the dot
        cuda = f"{cuda[:-1]}.{cuda[-1]}"
    release = parse_version(cuda).release
    return CudaPin(text, release[0], release[1] if len(release) > 1 else None)


def _gpu(text: str, ix: Index) -> Gpu:
    # memoised per text: a fleet's joint request and the specs its fixes try name the same
    # hundred GPUs, and equal requests then hold the same Gpu values
    found = ix.memo.gpus.get(text)
    if found is None:
        found = ix.memo.gpus[text] = _read_gpu(text, ix)
    return found


def _read_gpu(text: str, ix: Index) -> Gpu:
    row = ix.gpu(text)
    if row is not None:
        cc = _row_cc(row.compute_capability)
        return Gpu(ResolvedGpu(row.name, row.compute_capability, row.datacenter), cc, row)
    try:
        cc = ComputeCapability.parse(text)
    except ValueError:
        # a model the matrix does not know: kept, warned about, and left out of the architecture checks
        return Gpu(ResolvedGpu(text, None, None), None, None)
    return Gpu(ResolvedGpu(f"GPU of compute capability {cc}", str(cc), None), cc, None)


@functools.lru_cache(maxsize=64)
def _row_cc(text: str) -> ComputeCapability:
    """A GPU row's compute capability (a few dozen values for hundreds of rows)."""
    return ComputeCapability.parse(text)


def gpu_suggestion(ix: Index, text: str) -> str | None:
    """The nearest GPU name the matrix knows, for the warning about an unknown one."""
    names = {gpu_key(n): n for n in gpu_names(ix.m)}
    close = difflib.get_close_matches(gpu_key(text), list(names), n=1, cutoff=0.6)
    return names[close[0]] if close else None
