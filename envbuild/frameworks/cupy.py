"""CuPy: one matrix row per wheel name (cupy-cuda12x, cupy-cuda102) or conda package, with the
CuPy major series shipped under it and the CUDA range it runs with."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from envbuild.core.values import CudaVersion
from envbuild.core.versions import parse_version
from envbuild.frameworks.base import Framework, Install, LockNames, Pins, Refresh, Spelling, TableShape, View
from envbuild.frameworks.build import Build, _minors_between, _pythons
from envbuild.matrix import wheels as w
from envbuild.matrix.tables import Row


# --- its rows: matrices/cupy.yaml -------------------------------------------------------------------
@dataclass(frozen=True)
class CupyPackage(Row):
    """A CuPy package (wheel or conda) and the CUDA it is built for."""

    package: str = ""  # wheel name: "cupy-cuda12x", "cupy-cuda102"; conda package: "cupy"
    cupy_versions: str = ""  # PEP 440 specifier of CuPy releases shipped under that name, ">=12,<14"
    cuda_min: str = ""  # toolkit range the package runs with
    cuda_max: str = ""
    python: str | None = None
    latest: str | None = None  # newest release seen published under this name (bounds an open `cupy_versions`)
    installer: str = "pip"  # pip (a cupy-cudaXXX wheel) | conda (one package, CUDA variant chosen by cuda-version)
    channels: tuple[str, ...] = ()  # conda channels that publish it


@dataclass(frozen=True)
class CupyInstall(Install):
    def needs_devel(self, cuda):
        if cuda >= CudaVersion(12, 2):
            return f"CuPy on CUDA {cuda} compiles kernels with NVRTC, which needs the CUDA headers of a devel image"
        return None


class CupyView(View):
    def columns(self, rows, archs, marks):
        return (["package", "cupy versions", "cuda", "python", ""],
                [[r.package, r.cupy_versions, f"{r.cuda_min}-{r.cuda_max}", r.python or "?", marks(r).strip()]
                 for r in rows])

    def select_rows(self, rows, query, version):
        """A wheel name, or one CuPy version."""
        if query.lower().startswith("cupy"):
            return [r for r in rows if r.package == query.lower()]
        v = version(query, "CuPy version")
        return [r for r in rows if SpecifierSet(r.cupy_versions).contains(v, prereleases=True)]


class CupyRefresh(Refresh):
    def projects(self, m):
        return {r.package for r in PLUGIN.rows(m) if r.installer == "pip"}

    def series(self, m, files):
        plan: dict[str, set[str]] = {}
        for r in PLUGIN.rows(m):
            if r.installer != "pip" or r.package not in files:
                continue
            spec = SpecifierSet(r.cupy_versions or "")
            plan[r.package] = {str(v) for v in w.released_versions(files[r.package]) if spec.contains(v)}
        return plan


class Cupy(Framework):
    name = "cupy"
    order = 5
    spelling = Spelling(
        cuda_in_name=(
            (r"^cupy-cuda(\d+)x$", "major"),  # cupy-cuda11x, cupy-cuda12x
            (r"^cupy-cuda(\d{2,3})$", "variant"),  # cupy-cuda102, cupy-cuda117
        ),
        cpu_only=("cupy-cpu",),
    )
    row_type = CupyPackage
    shape = TableShape(versions_are_series=True)  # builds are per major series ("13"), see candidates()
    # conda-forge splits CuPy (13.0 on): `cupy` depends on `cupy-core` (the compiled code,
    # whose CUDA ties are only run_constrained) and on the CUDA libraries, so it is `cupy`
    # whose record shows the CUDA variant.
    install = CupyInstall()
    lock = LockNames(
        pip_name_prefixes=("cupy-cuda",),  # cupy-cuda12x, cupy-cuda102
        conda_packages=("cupy", "cupy-core"), variant_records=("cupy", "cupy-core"),
    )
    view = CupyView()
    refresh = CupyRefresh()

    def builds(self, m, minors):
        """CuPy rows name a wheel (or conda-forge's `cupy`) and the CuPy releases shipped under
        it (a specifier). The releases themselves are every major series any row admits."""
        out = []
        rows = self.rows(m)
        versions = release_versions(rows)
        releases = first_releases(versions)
        for r in rows:
            if not (r.cuda_min and r.cuda_max):
                continue
            shipped = shipped_series(r, releases) if r.cupy_versions else set(versions)
            for version in versions:
                if version not in shipped:
                    continue
                for minor in _minors_between(minors, r.cuda_min, _range_end(r.cuda_max)):
                    conda = r.installer == "conda"
                    out.append(Build(
                        framework=self.name, version=version, installer=r.installer, cuda=minor,
                        variant=_conda_variant(minor) if conda else r.package,
                        row=r, pythons=_pythons(r.python), python_text=r.python,
                        # a cupy-cudaXXX wheel loads the system CUDA; the conda package pulls
                        # cudatoolkit (11.x) or cuda-nvrtc, libcublas, ... (12.x on) itself
                        bundles_runtime=conda, package=r.package, channels=tuple(r.channels), ranged=True,
                    ))
        return out

    def pins(self, b, label=None):
        # a bare major ("13") is a CuPy series: any release of it
        release = f"{b.package}=={b.version}.*" if "." not in b.version else f"{b.package}=={b.version}"
        if b.installer == "conda":
            # conda-forge's cupy has no CPU build; the pin selects its CUDA variant
            cuda = f"cudatoolkit=={b.cuda}.*" if b.cuda_major < 12 else f"cuda-version=={b.cuda}"
            return Pins(conda=(release, cuda))
        return Pins(pip=(release,))

    def candidates(self, constraint, pinned, ix):
        """CuPy builds are per major series ("13"); a pinned release ("13.4.1") replaces the
        series in the builds whose wheel ships it."""
        if pinned is None:
            series = {s for s in ix.versions.get(self.name, []) if any(constraint.contains(f"{s}.{minor}") for minor in range(20))}
            return [b for b in ix.builds.get(self.name, []) if b.version in series]
        key = (self.name, str(pinned))
        found = ix.memo.pinned_builds.get(key)
        if found is None:
            found = ix.memo.pinned_builds[key] = ix.attach_wheels([
                dataclasses.replace(b, version=str(pinned)) for b in ix.builds.get(self.name, [])
                if pinned.release[0] == b.v.release[0] and SpecifierSet(b.row.cupy_versions or "").contains(pinned, prereleases=True)
            ])
        return found

    def wheel_groups(self, table, b):
        spec = SpecifierSet(getattr(b.row, "cupy_versions", "") or "")
        if "." in b.version:  # a pinned release
            want = Version(b.version)
            admits = lambda v: v == want  # noqa: E731
        else:
            major = int(b.version)
            admits = lambda v: v.release[0] == major and spec.contains(v)  # noqa: E731
        return [table.matching(b.package, admits)], False


def _conda_variant(minor: CudaVersion) -> str:
    """What selects the CUDA of conda-forge's cupy: cudatoolkit for 11.x, cuda-version after."""
    return f"cudatoolkit={minor}" if minor.major < 12 else f"cuda-version={minor}"


def _range_end(text: str) -> str:
    """`12.x` -> `12.99` so every 12 minor is inside."""
    return text[:-2] + ".99" if text.endswith(".x") else text


def release_versions(rows) -> list[str]:
    """The CuPy major series the rows' specifiers admit (`>=12,<14` -> "12", "13"). The
    matrix records series per wheel name, not every release, so a series stands for
    its releases unless the spec pins one exactly."""
    majors: set[int] = set()
    for r in rows:
        try:
            spec = SpecifierSet(r.cupy_versions)
        except Exception:  # noqa: BLE001 - a malformed row is reported by the integrity tests
            continue
        lows = [parse_version(s.version.removesuffix(".*")).release[0] for s in spec if s.operator in (">=", "==", "~=")]
        highs = [parse_version(s.version) for s in spec if s.operator == "<"]
        if lows and not highs and r.latest:  # still published: the newest release read bounds it
            majors.update(range(min(lows), parse_version(r.latest).release[0] + 1))
        elif lows and highs:
            top = max(highs)
            last = top.release[0] - (1 if all(x == 0 for x in top.release[1:]) else 0)
            majors.update(range(min(lows), last + 1))
    return [str(m) for m in sorted(majors)]


def first_releases(series: list[str]) -> list[Version]:
    """The releases that stand for each CuPy major series: X.0.0 to X.19.0."""
    return [Version(f"{major}.{minor}.0") for major in series for minor in range(20)]


def shipped_series(row, releases: list[Version]) -> set[str]:
    """The CuPy major series the wheel `row` ships some release of (`releases`: the
    series' first releases). Each release is parsed once, and each of the row's
    specifiers drops what it refuses before the next looks."""
    return {str(v.major) for v in SpecifierSet(row.cupy_versions).filter(releases, prereleases=True)}


PLUGIN = Cupy()
