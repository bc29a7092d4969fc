"""The matrix questions the checks ask, answered from indexes built once per data version.

`index(m)` parses every version string of the matrices once (per `m.version`) and keeps
lookups by key, so a resolve only does dictionary reads and tuple comparisons.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

from envbuild import frameworks
from envbuild.core.model import Fact
from envbuild.core.values import CudaVersion, DriverVersion
from envbuild.frameworks import build as b
from envbuild.matrix import Matrices, lookup
from envbuild.matrix import tables as t
from envbuild.resolver import lockable
from envbuild.resolver.artefacts import WheelTable
from envbuild.resolver.memo import Memo


def fact(text: str, row: t.Row | None) -> Fact:
    if row is None:
        return Fact(text, source="envbuild rule")
    return Fact(text, source=row.source, inferred=row.inferred, secondary=row.secondary)


class Index:
    def __init__(self, m: Matrices):
        self.m = m
        self.minors = b._cuda_minors(m.cuda_releases)
        # CUDA (major, minor) -> its releases, first (the x.y.0 / GA row) first, each with its driver
        self.release_rows: dict[tuple[int, int], list[tuple[CudaVersion, t.CudaRelease]]] = {}
        for r in m.cuda_releases:
            try:
                v = CudaVersion.parse(r.version)
            except ValueError:
                continue
            self.release_rows.setdefault((v.major, v.minor), []).append((v, r))
        for rows in self.release_rows.values():
            rows.sort(key=lambda vr: vr[0])
        self.memo = Memo()  # answers kept for the life of the index, one typed cache each
        self._driver_rules: dict = {}
        self._driver_cudas: dict = {}
        self.drivers = Lazy(DriverVersion.parse)  # the matrices' driver texts, parsed once
        self.arch_ranges = [
            (CudaVersion.parse(r.cuda_min), CudaVersion.parse(r.cuda_max), frozenset(int(s) for s in r.sms), r)
            for r in m.cuda_arch
        ]
        self._toolkits: dict = {}
        self._sm_spans: dict = {}
        self._runs: dict = {}
        self.builds = Lazy(self._builds)  # framework -> builds, best first; made on first use
        self.versions = Lazy(lambda name: list(dict.fromkeys(x.version for x in self.builds[name])))
        cudas = {text: ImageCuda.read(text) for text in {img.cuda for img in m.base_images}}  # a few dozen tags
        self.images = [(img, cudas[img.cuda]) for img in m.base_images]

    def _builds(self, name: str) -> list[b.Build]:
        if name not in frameworks.names():
            return []
        made = frameworks.get(name).builds(self.m, self.minors)
        # best first: newest release, then newest CUDA, then pip before conda
        made.sort(key=lambda x: (x.v, x.cuda, x.installer == "pip"), reverse=True)
        return self.attach_wheels(made)

    @functools.cached_property
    def wheel_table(self) -> WheelTable:
        """`matrices/wheels.yaml` by distribution: read only when builds are made."""
        return WheelTable(self.m.wheels)

    @functools.cached_property
    def lock_proofs(self) -> dict:
        """`matrices/lockable.yaml` by (framework, requirement, index)."""
        return lockable.by_requirement(self.m.lock_proofs)

    def attach_wheels(self, builds: list[b.Build]) -> list[b.Build]:
        """Give each pip build the wheel files of what it installs (matrices/wheels.yaml)
        and the lock proof of its requirement (matrices/lockable.yaml)."""
        for x in builds:
            object.__setattr__(x, "wheels", self.wheel_table.for_build(x))
            if x.installer == "pip" and self.lock_proofs:
                rows = self.lock_proofs.get((x.framework, *lockable.requirement(x)), ())
                object.__setattr__(x, "lock_proof", rows)
                object.__setattr__(x, "unlockable", lockable.refused(rows))
        return builds

    # --- GPUs ---------------------------------------------------------------------------
    def gpu(self, text: str) -> t.Gpu | None:
        return lookup.find_gpu(self.m, text)

    @functools.cached_property
    def table_capabilities(self) -> frozenset[str]:
        """The compute capabilities of the GPU table's rows."""
        return frozenset(g.compute_capability for g in self.m.gpus)

    # --- CUDA <-> driver (the rules live in envbuild.matrix.lookup; memoised here) --------
    def driver_rule(self, cuda: CudaVersion, platform: str):
        key = (cuda, platform)
        found = self._driver_rules.get(key)
        if found is None:
            found = self._driver_rules[key] = lookup.min_driver_for_cuda(self.m, str(cuda), platform)[1]
        return found

    def driver_cuda(self, driver: DriverVersion, platform: str) -> DriverCudas:
        key = (driver, platform)
        found = self._driver_cudas.get(key)
        if found is None:
            found = self._driver_cudas[key] = DriverCudas.read(lookup.max_cuda_for_driver(self.m, str(driver), platform)[1])
        return found

    def native_need(self, cuda: CudaVersion) -> str | None:
        """The driver packaged with the first release of CUDA `cuda`'s major.minor: what
        an image's NVIDIA_REQUIRE_CUDA asks of the host."""
        rows = self.release_rows.get((cuda.major, cuda.minor), [])
        return next((r.min_driver_linux for _v, r in rows if r.min_driver_linux), None)

    # --- GPU <-> toolkit ----------------------------------------------------------------------
    # Each answer depends only on its arguments and the data, so it is computed once per
    # Index: a fleet asks the same questions for every GPU of every build.
    def toolkit_sms(self, cuda: CudaVersion) -> tuple[frozenset[int], t.Row] | None:
        try:
            return self._toolkits[cuda]
        except KeyError:
            pass
        v = cuda.minor_version
        found = next(((sms, row) for lo, hi, sms, row in self.arch_ranges if lo <= v <= hi), None)
        self._toolkits[cuda] = found
        return found

    def toolkit_runs_on(self, cuda: CudaVersion, cc) -> bool:
        """Does code of the CUDA `cuda` toolkit run on a GPU of compute capability `cc`?
        (False when the matrix has no architecture list for it.)"""
        runs = self.toolkit_runs(cuda)
        found = runs.get(cc)
        if found is None:
            sms = self.toolkit_sms(cuda)
            found = runs[cc] = sms is not None and runs_on(sms[0], cc)
        return found

    def toolkit_runs(self, cuda: CudaVersion) -> dict:
        """compute capability -> `toolkit_runs_on(cuda, it)`, filled as GPUs are asked about."""
        found = self._runs.get(cuda)
        if found is None:
            found = self._runs[cuda] = {}
        return found

    def sm_span(self, cc) -> tuple[CudaVersion | None, CudaVersion | None, CudaVersion | None]:
        """For a GPU of compute capability `cc`: the first and the last toolkit with native
        code for it (major.minor), and the first whose code it runs at all (an sm_80
        binary runs on sm_86)."""
        found = self._sm_spans.get(cc)
        if found is None:
            native = [(lo, hi) for lo, hi, sms, _r in self.arch_ranges if cc.sm in sms]
            runnable = [lo for lo, _hi, sms, _r in self.arch_ranges if runs_on(sms, cc)]
            found = self._sm_spans[cc] = (
                min(lo for lo, _ in native).minor_version if native else None,
                max(hi for _, hi in native).minor_version if native else None,
                min(runnable) if runnable else None)
        return found

    def min_cuda_for_sm(self, sm: int) -> CudaVersion | None:
        found = [lo for lo, _hi, sms, _r in self.arch_ranges if sm in sms]
        return min(found).minor_version if found else None

    def max_cuda_for_sm(self, sm: int) -> CudaVersion | None:
        found = [hi for _lo, hi, sms, _r in self.arch_ranges if sm in sms]
        return max(found).minor_version if found else None


@dataclass(frozen=True)
class DriverCudas:
    """The newest CUDA (major.minor) a driver runs, as the checks compare it: `cuda` with
    minor-version compatibility, `native_cuda` by its packaged driver (what nvidia-smi
    reports); `rule` says why."""

    cuda: CudaVersion | None
    native_cuda: CudaVersion | None
    rule: str
    source: str
    inferred: bool = False
    secondary: bool = False

    @classmethod
    def read(cls, found: lookup.DriverCuda) -> DriverCudas:
        return cls(CudaVersion.parse(found.cuda) if found.cuda else None,
                   CudaVersion.parse(found.native_cuda) if found.native_cuda else None,
                   found.rule, found.source, found.inferred, found.secondary)


def runs_on(sms, cc) -> bool:
    """Can code built for real archs `sms` (ints, 86 = sm_86) run on a GPU of compute
    capability `cc`? Same major, minor at most the GPU's."""
    return any(s // 10 == cc.major and s % 10 <= cc.minor for s in sms)


@dataclass(frozen=True)
class ImageCuda:
    """The CUDA a base image carries: `version` as its tag states it (12.4 or 12.4.1), or a
    major alone (`13`, RAPIDS' tags), then `version` is its x.0 and `major_only` is set.
    The base choice ranks every image of a family by `minor` and `newest_first`, so
    both are made once, with the value."""

    version: CudaVersion
    major_only: bool
    minor: CudaVersion  # its major.minor (x.0 for a major alone)
    newest_first: tuple[int, ...]  # sort key: newer releases first (of one release, the shorter tag first)

    @classmethod
    def read(cls, text: str | None) -> ImageCuda | None:
        """`parse`, or None for no text or one that is not a CUDA version."""
        try:
            return cls.parse(text) if text else None
        except ValueError:
            return None

    @classmethod
    def parse(cls, text: str) -> ImageCuda:
        if text.isascii() and text.isdigit():
            version = CudaVersion(int(text), 0)
            return cls(version, True, version, (-version.major,))
        version = CudaVersion.parse(text)
        return cls(version, False, version.minor_version, tuple(-x for x in version.release))

    @property
    def major(self) -> int:
        return self.version.major

    def fits(self, cuda: CudaVersion) -> bool:
        """Does it carry CUDA `cuda`'s major.minor? An image tagged with a major alone fits
        every minor of it."""
        if self.major_only:
            return self.version.major == cuda.major
        return self.version.major == cuda.major and self.version.minor == cuda.minor


class Lazy(dict):
    """A dict that computes a missing key with `make(key)` and keeps it."""

    def __init__(self, make):
        super().__init__()
        self._make = make

    def __missing__(self, key):
        value = self[key] = self._make(key)
        return value

    def get(self, key, default=None):
        return self[key]


def index(m: Matrices) -> Index:
    """The index of `m`, built on first use and kept with it (Matrices are immutable)."""
    return m.derived(Index)
