"""Matrix rows -> `Build`s: one installable GPU build of a framework for one CUDA variant.

Each framework's table has its own shape (PyTorch lists builds, TensorFlow tested
configs, JAX releases with CUDA plugin majors, RAPIDS releases with a CUDA range, CuPy
wheel names or conda packages with a CUDA range). The checks compare every framework the same way, so
this module turns each row into `Build`s with an exact CUDA major.minor. Ranged rows
(JAX, RAPIDS, CuPy) become one Build per CUDA release NVIDIA published in that range.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from envbuild.matrix import tables as t
from envbuild.versions import cuda_to_local, parse_version


@functools.lru_cache(maxsize=1)
def known_pythons() -> tuple[str, ...]:
    """The CPython feature releases (matrices/pythons.yaml), oldest first: the universe a
    Python specifier is evaluated over when the resolver has to choose a Python."""
    from envbuild import matrix
    from envbuild.matrix.lookup import pythons

    return pythons(matrix.load())


@dataclass(frozen=True, eq=False)
class Build:
    framework: str  # canonical: pytorch | tensorflow | jax | rapids | cupy
    version: str
    installer: str  # pip | conda
    cuda: str  # the CUDA variant, major.minor
    variant: str  # how the variant is named where it is installed: "+cu121", "cudatoolkit=10.2", "cuda12"
    row: t.Row  # the matrix row behind it (source, inferred, secondary)
    pythons: frozenset[str] | None  # None = not read
    python_text: str | None
    archs: tuple[str, ...] | None = None  # compiled archs (sm_XX / compute_XX); None = not read
    cudnn: str | None = None  # cuDNN the build was compiled with
    cudnn_min: str | None = None  # cuDNN the build needs at least (JAX)
    cuda_min: str | None = None  # oldest CUDA minor of its major whose libraries it accepts (JAX)
    platforms: tuple[str, ...] = ("linux-64",)
    bundles_runtime: bool = True  # the package brings its own CUDA runtime (pip nvidia-* / conda cudatoolkit)
    driver_min: str | None = None  # a framework-stated driver floor (JAX, RAPIDS docs)
    min_cc: tuple[int, int] | None = None  # a framework-stated lowest GPU (RAPIDS)
    windows_gpu: bool | None = None  # TensorFlow: a native Windows GPU build exists
    pip_extra: str | None = None
    package: str = ""  # the distribution or conda spec that names the variant
    index_url: str | None = None
    channels: tuple[str, ...] = ()
    companions: tuple[tuple[str, str], ...] = ()
    pypi_default: bool = False
    # the variant is the environment's CUDA itself (rows with a CUDA range: JAX, RAPIDS, CuPy)
    ranged: bool = False
    # the wheel files of what pip installs for it (resolver.artefacts.Wheels); None = not read
    wheels: object = None
    v: Version = field(default=None)  # type: ignore[assignment]
    cuda_v: Version = field(default=None)  # type: ignore[assignment]

    def __post_init__(self) -> None:
        object.__setattr__(self, "v", parse_version(self.version))
        object.__setattr__(self, "cuda_v", parse_version(self.cuda))

    @property
    def cuda_major(self) -> int:
        return self.cuda_v.release[0]

    def pythons_on(self, platform: str) -> frozenset[str] | None:
        """The Pythons to choose from on `platform`: those with a wheel when the index was
        read for this build (its artefacts win over the matrix range), else the range."""
        if self.wheels is not None:
            found = self.wheels.pythons(platform)
            if found:
                return found
        return self.pythons

    @property
    def label(self) -> str:
        """`pytorch 1.6.0 (conda, cudatoolkit=10.2)`."""
        return f"{self.framework} {self.version} ({self.installer}, {self.variant})"


@functools.lru_cache(maxsize=None)
def _pythons(text: str | None) -> frozenset[str] | None:
    if text is None:
        return None
    spec = SpecifierSet(text)
    return frozenset(p for p in known_pythons() if spec.contains(p, prereleases=True) or _minor_in(spec, p))


def _minor_in(spec: SpecifierSet, minor: str) -> bool:
    # "<=3.11" must admit 3.11.x; test a late patch release of the minor too.
    return spec.contains(f"{minor}.9", prereleases=True)


def _cuda_minors(releases: tuple[t.CudaRelease, ...]) -> list[str]:
    seen = {}
    for r in releases:
        try:
            v = parse_version(r.version)
        except ValueError:
            continue
        seen[f"{v.release[0]}.{v.release[1] if len(v.release) > 1 else 0}"] = True
    return sorted(seen, key=parse_version)


def _minors_between(minors: list[str], lo: str, hi: str) -> list[str]:
    lo_v, hi_v = parse_version(lo), parse_version(hi)
    return [m for m in minors if lo_v <= parse_version(m) <= hi_v]


def torch_builds(rows: tuple[t.TorchBuild, ...]) -> list[Build]:
    out = []
    for r in rows:
        if not r.cuda:
            continue  # CPU rows are never chosen
        out.append(Build(
            framework="pytorch", version=r.version, installer=r.installer, cuda=r.cuda,
            variant=r.package or (f"+{cuda_to_local(r.cuda)}" if r.installer == "pip" else f"cuda {r.cuda}"),
            row=r, pythons=_pythons(r.python), python_text=r.python, archs=r.archs, cudnn=r.cudnn,
            platforms=tuple(r.platforms), package=r.package, index_url=r.index_url,
            channels=tuple(r.channels), companions=tuple(tuple(c) for c in r.companions),
            pypi_default=r.pypi_default,
        ))
    return out


def tf_builds(rows: tuple[t.TfBuild, ...]) -> list[Build]:
    out = []
    for r in rows:
        if not r.cuda:
            continue
        out.append(Build(
            framework="tensorflow", version=r.version, installer="pip", cuda=r.cuda,
            variant=f"tensorflow[{r.pip_extra}]" if r.pip_extra else f"CUDA {r.cuda}",
            row=r, pythons=_pythons(r.python), python_text=r.python, archs=r.archs, cudnn=r.cudnn,
            platforms=("linux-64", "win-64") if r.windows_gpu else ("linux-64",),
            # Before `[and-cuda]` (2.14) the wheel loads CUDA and cuDNN from the system.
            bundles_runtime=bool(r.pip_extra), windows_gpu=r.windows_gpu, pip_extra=r.pip_extra,
            package="tensorflow",
        ))
    return out


def jax_builds(rows: tuple[t.JaxRelease, ...], minors: list[str]) -> list[Build]:
    out = []
    for r in rows:
        floors = dict(r.cuda_min)
        for major in r.cuda_majors:
            extra = next((e for e in r.pip_extras if e.startswith(f"cuda{major}") and "local" not in e), None)
            extra = extra or next((e for e in r.pip_extras if e.startswith(f"cuda{major}")), f"cuda{major}")
            for minor in (m for m in minors if parse_version(m).release[0] == major):
                out.append(Build(
                    framework="jax", version=r.version, installer="pip", cuda=minor, variant=f"jax[{extra}]",
                    row=r, pythons=_pythons(r.python), python_text=r.python, cudnn_min=r.cudnn_min,
                    cuda_min=floors.get(major), driver_min=r.driver_min_linux,
                    # `cuda`, `cuda11_cudnn86` (before 0.4.7) and `*_local` wheels load the system CUDA
                    bundles_runtime="local" not in extra and "cudnn" not in extra and extra != "cuda",
                    pip_extra=extra,
                    package="jax", ranged=True,
                ))
    return out


def rapids_builds(rows: tuple[t.RapidsRelease, ...], minors: list[str]) -> list[Build]:
    out = []
    for r in rows:
        if not (r.cuda_min and r.cuda_max):
            continue
        pythons = frozenset(r.python) if r.python else None
        min_cc = None
        if r.min_compute_capability:
            major, _, minor = r.min_compute_capability.partition(".")
            min_cc = (int(major), int(minor or 0))
        for minor in _minors_between(minors, r.cuda_min, r.cuda_max):
            for installer in ("conda", "pip"):
                out.append(Build(
                    framework="rapids", version=r.version, installer=installer, cuda=minor,
                    variant=f"cuda-version={minor}" if installer == "conda" else f"cu{r.cuda_major}",
                    row=r, pythons=pythons, python_text=", ".join(r.python) or None,
                    driver_min=r.driver_min_linux, min_cc=min_cc,
                    # RAPIDS conda packages pull cuda-version's libraries; the -cuXX wheels
                    # load the CUDA runtime of the system they are installed into.
                    bundles_runtime=installer == "conda",
                    package="rapids" if installer == "conda" else f"cudf-cu{r.cuda_major}",
                    channels=("rapidsai", "conda-forge", "nvidia") if installer == "conda" else (), ranged=True,
                ))
    return out


def cupy_builds(rows: tuple[t.CupyPackage, ...], minors: list[str], versions: list[str]) -> list[Build]:
    """CuPy rows name a wheel (or conda-forge's `cupy`) and the CuPy releases shipped under
    it (a specifier). The releases themselves come from `versions` (every version any row
    names)."""
    out = []
    for r in rows:
        if not (r.cuda_min and r.cuda_max):
            continue
        for version in versions:
            if r.cupy_versions and not cupy_series_admits(r, version):
                continue
            for minor in _minors_between(minors, r.cuda_min, _range_end(r.cuda_max)):
                conda = r.installer == "conda"
                out.append(Build(
                    framework="cupy", version=version, installer=r.installer, cuda=minor,
                    variant=_cupy_conda_variant(minor) if conda else r.package,
                    row=r, pythons=_pythons(r.python), python_text=r.python,
                    # a cupy-cudaXXX wheel loads the system CUDA; the conda package pulls
                    # cudatoolkit (11.x) or cuda-nvrtc, libcublas, ... (12.x on) itself
                    bundles_runtime=conda, package=r.package, channels=tuple(r.channels), ranged=True,
                ))
    return out


def _cupy_conda_variant(minor: str) -> str:
    """What selects the CUDA of conda-forge's cupy: cudatoolkit for 11.x, cuda-version after."""
    return f"cudatoolkit={minor}" if parse_version(minor).release[0] < 12 else f"cuda-version={minor}"


def _range_end(text: str) -> str:
    """`12.x` -> `12.99` so every 12 minor is inside."""
    return text[:-2] + ".99" if text.endswith(".x") else text


def cupy_release_versions(rows: tuple[t.CupyPackage, ...]) -> list[str]:
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


def cupy_series_admits(row: t.CupyPackage, series: str) -> bool:
    """Does the wheel `row` ship some release of CuPy major `series`?"""
    spec = SpecifierSet(row.cupy_versions)
    major = int(series)
    return any(spec.contains(f"{major}.{minor}.0", prereleases=True) for minor in range(0, 20))
