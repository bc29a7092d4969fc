"""RAPIDS: one matrix row per (release, CUDA major), with the CUDA range it runs on."""
from __future__ import annotations

from dataclasses import dataclass

from packaging.version import Version

from envbuild.core.values import ComputeCapability
from envbuild.frameworks.base import Framework, Install, LockNames, Pins, Refresh, Spelling, View
from envbuild.frameworks.build import Build, _minors_between
from envbuild.matrix import wheels as w
from envbuild.matrix.tables import Row

_LIBRARIES = ("cudf", "cuml")  # the pip wheels that stand for a RAPIDS install


# --- its rows: matrices/rapids.yaml --------------------------------------------------------------------
@dataclass(frozen=True)
class RapidsRelease(Row):
    """A RAPIDS release for one CUDA major: its CUDA range, Pythons, driver and lowest GPU."""

    version: str = ""  # "24.02"
    python: tuple[str, ...] = ()  # ("3.9", "3.10", "3.11")
    cuda_major: int = 0  # one row per CUDA major the release supports
    cuda_min: str = ""  # "12.0"
    cuda_max: str = ""  # "12.2"
    driver_min_linux: str | None = None
    min_compute_capability: str | None = None  # "7.0"
    pip_index_url: str | None = None  # where pip finds the -cuXX wheels; "" = the release has none


class RapidsView(View):
    def columns(self, rows, archs, marks):
        return (["version", "cuda major", "cuda", "python", "driver >=", "min CC", ""],
                [[r.version, r.cuda_major, f"{r.cuda_min}-{r.cuda_max}", ",".join(r.python) or "?", r.driver_min_linux or "?",
                  r.min_compute_capability or "?", marks(r).strip()] for r in rows])


class RapidsRefresh(Refresh):
    def projects(self, m):
        return {f"{n}-cu{r.cuda_major}" for r in PLUGIN.rows(m) for n in _LIBRARIES}

    def series(self, m, files):
        plan: dict[str, set[str]] = {}
        for r in PLUGIN.rows(m):
            series = Version(r.version).release[:2]
            for name in (f"{n}-cu{r.cuda_major}" for n in _LIBRARIES):
                found = {str(v) for v in w.released_versions(files.get(name, {})) if v.release[:2] == series}
                plan.setdefault(name, set()).update(found)
        return plan


class Rapids(Framework):
    name = "rapids"
    order = 4
    spelling = Spelling(aliases=("cudf", "cuml", "cugraph", "cuspatial"),
                        cuda_in_name=((r"^(?:cudf|cuml|cugraph|cuspatial)-cu(\d+)$", "major"),))  # cudf-cu12
    row_type = RapidsRelease
    install = Install(conda_first=True, base_family="rapids")  # RAPIDS documents conda first
    # RAPIDS pip wheels carry the CUDA major in their names (cudf-cu12, libcudf-cu12,
    # rmm-cu12): the set of library names is data (matrices/packages.yaml).
    lock = LockNames(conda_packages=("rapids",), pip_name_set="rapids_wheel")
    view = RapidsView()
    refresh = RapidsRefresh()

    def builds(self, m, minors):
        out = []
        for r in self.rows(m):
            if not (r.cuda_min and r.cuda_max):
                continue
            pythons = frozenset(r.python) if r.python else None
            min_cc = ComputeCapability.parse(r.min_compute_capability) if r.min_compute_capability else None
            # pip_index_url '' states that the release has no pip packages (RAPIDS' began with 22.10)
            installers = ("conda",) if r.pip_index_url == "" else ("conda", "pip")
            for minor in _minors_between(minors, r.cuda_min, r.cuda_max):
                for installer in installers:
                    out.append(Build(
                        framework=self.name, version=r.version, installer=installer, cuda=minor,
                        variant=f"cuda-version={minor}" if installer == "conda" else f"cu{r.cuda_major}",
                        row=r, pythons=pythons, python_text=", ".join(r.python) or None,
                        driver_min=r.driver_min_linux, min_cc=min_cc,
                        # RAPIDS conda packages pull cuda-version's libraries; the -cuXX wheels
                        # load the CUDA runtime of the system they are installed into.
                        bundles_runtime=installer == "conda",
                        package="rapids" if installer == "conda" else f"cudf-cu{r.cuda_major}",
                        index_url=None if installer == "conda" else r.pip_index_url,
                        channels=("rapidsai", "conda-forge", "nvidia") if installer == "conda" else (), ranged=True,
                    ))
        return out

    def pins(self, b, label=None):
        if b.installer == "conda":
            return Pins(conda=(f"rapids=={b.version}.*", f"cuda-version=={b.cuda}"))
        return Pins(pip=tuple(f"{n}-cu{b.cuda_major}=={b.version}.*" for n in _LIBRARIES), index_url=b.index_url)

    def wheel_groups(self, table, b):
        series = Version(b.version).release[:2]
        return [table.matching(f"{n}-cu{b.cuda_major}", lambda v: v.release[:2] == series) for n in _LIBRARIES], False


PLUGIN = Rapids()
