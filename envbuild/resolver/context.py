"""The matrix questions the checks ask, answered from indexes built once per data version.

`index(m)` parses every version string of the matrices once (per `m.version`) and keeps
lookups by key, so a resolve only does dictionary reads and tuple comparisons.
"""
from __future__ import annotations

import functools

from packaging.version import Version

from envbuild import frameworks
from envbuild.core.model import Fact
from envbuild.core.values import DriverVersion, major_minor
from envbuild.core.versions import parse_version
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
        # CUDA major.minor -> its first release (the x.y.0 / GA row) and that row's driver
        self.release_rows: dict[str, list[t.CudaRelease]] = {}
        for r in m.cuda_releases:
            try:
                key = major_minor(parse_version(r.version))
            except ValueError:
                continue
            self.release_rows.setdefault(key, []).append(r)
        for rows in self.release_rows.values():
            rows.sort(key=lambda r: parse_version(r.version))
        self.memo = Memo()  # answers kept for the life of the index, one typed cache each
        self._driver_rules: dict = {}
        self._driver_cudas: dict = {}
        self.drivers = Lazy(DriverVersion.parse)  # the matrices' driver texts, parsed once
        self.arch_ranges = [
            (parse_version(r.cuda_min), parse_version(r.cuda_max), frozenset(int(s) for s in r.sms), r)
            for r in m.cuda_arch
        ]
        self._toolkits: dict = {}
        self._sm_spans: dict = {}
        self._runs: dict = {}
        self.builds = Lazy(self._builds)  # framework -> builds, best first; made on first use
        self.versions = Lazy(lambda name: list(dict.fromkeys(x.version for x in self.builds[name])))
        self.images = [(img, _image_cuda(img)) for img in m.base_images]

    def _builds(self, name: str) -> list[b.Build]:
        if name not in frameworks.names():
            return []
        made = frameworks.get(name).builds(self.m, self.minors)
        # best first: newest release, then newest CUDA, then pip before conda
        made.sort(key=lambda x: (x.v, x.cuda_v, x.installer == "pip"), reverse=True)
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
    def driver_rule(self, cuda: str, platform: str):
        key = (cuda, platform)
        found = self._driver_rules.get(key)
        if found is None:
            found = self._driver_rules[key] = lookup.min_driver_for_cuda(self.m, cuda, platform)[1]
        return found

    def driver_cuda(self, driver: DriverVersion, platform: str):
        key = (driver, platform)
        found = self._driver_cudas.get(key)
        if found is None:
            found = self._driver_cudas[key] = lookup.max_cuda_for_driver(self.m, str(driver), platform)[1]
        return found

    def native_need(self, cuda: str) -> str | None:
        """The driver packaged with the first release of CUDA `cuda` (major.minor): what
        an image's NVIDIA_REQUIRE_CUDA asks of the host."""
        rows = self.release_rows.get(major_minor(parse_version(cuda)), [])
        return next((r.min_driver_linux for r in rows if r.min_driver_linux), None)

    # --- GPU <-> toolkit ----------------------------------------------------------------------
    # Each answer depends only on its arguments and the data, so it is computed once per
    # Index: a fleet asks the same questions for every GPU of every build.
    def toolkit_sms(self, cuda: str) -> tuple[frozenset[int], t.Row] | None:
        try:
            return self._toolkits[cuda]
        except KeyError:
            pass
        v = parse_version(major_minor(parse_version(cuda)))
        found = next(((sms, row) for lo, hi, sms, row in self.arch_ranges if lo <= v <= hi), None)
        self._toolkits[cuda] = found
        return found

    def toolkit_runs_on(self, cuda: str, cc) -> bool:
        """Does code of the CUDA `cuda` toolkit run on a GPU of compute capability `cc`?
        (False when the matrix has no architecture list for it.)"""
        runs = self.toolkit_runs(cuda)
        found = runs.get(cc)
        if found is None:
            sms = self.toolkit_sms(cuda)
            found = runs[cc] = sms is not None and runs_on(sms[0], cc)
        return found

    def toolkit_runs(self, cuda: str) -> dict:
        """compute capability -> `toolkit_runs_on(cuda, it)`, filled as GPUs are asked about."""
        found = self._runs.get(cuda)
        if found is None:
            found = self._runs[cuda] = {}
        return found

    def sm_span(self, cc) -> tuple[Version | None, Version | None, Version | None]:
        """For a GPU of compute capability `cc`: the first and the last toolkit with native
        code for it (major.minor), and the first whose code it runs at all (an sm_80
        binary runs on sm_86)."""
        found = self._sm_spans.get(cc)
        if found is None:
            native = [(lo, hi) for lo, hi, sms, _r in self.arch_ranges if cc.sm in sms]
            runnable = [lo for lo, _hi, sms, _r in self.arch_ranges if runs_on(sms, cc)]
            found = self._sm_spans[cc] = (
                parse_version(major_minor(min(lo for lo, _ in native))) if native else None,
                parse_version(major_minor(max(hi for _, hi in native))) if native else None,
                min(runnable) if runnable else None)
        return found

    def min_cuda_for_sm(self, sm: int) -> str | None:
        found = [lo for lo, _hi, sms, _r in self.arch_ranges if sm in sms]
        return major_minor(min(found)) if found else None

    def max_cuda_for_sm(self, sm: int) -> str | None:
        found = [hi for _lo, hi, sms, _r in self.arch_ranges if sm in sms]
        return major_minor(max(found)) if found else None


def runs_on(sms, cc) -> bool:
    """Can code built for real archs `sms` (ints, 86 = sm_86) run on a GPU of compute
    capability `cc`? Same major, minor at most the GPU's."""
    return any(s // 10 == cc.major and s % 10 <= cc.minor for s in sms)


def _image_cuda(img: t.BaseImage) -> Version | None:
    try:
        return parse_version(img.cuda) if img.cuda else None
    except ValueError:
        return None


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
