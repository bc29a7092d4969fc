"""Questions asked of the platform matrices: GPU names, drivers, architectures, images.

Every function here takes a `Matrices` (from `envbuild.matrix.load()`), reads only its rows and
compares versions with `packaging`, so the same answer comes back for the same data.
Answers about drivers come with a small record (`DriverRule`, `DriverCuda`) that says
which rule applied and where it comes from, for messages and `--json` output.
"""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field

from packaging.version import Version

from envbuild.core import values
from envbuild.core.versions import parse_version
from envbuild.matrix import Matrices, load
from envbuild.matrix import gpu_match
from envbuild.matrix.tables import BaseImage, CudaRelease, DriverArchitecture, Gpu, MinorCompat


_AWS_ECR = re.compile(r"^(763104351884\.dkr\.ecr\.)([a-z0-9-]+)(\.amazonaws\.com/)")


# --- versions --------------------------------------------------------------------------
def pythons(m: Matrices) -> tuple[str, ...]:
    """The CPython feature releases envbuild knows (pythons.yaml), oldest first."""
    return tuple(row.version for row in m.pythons)


def version(text: str | None) -> Version | None:
    """`text` as a packaging Version, or None when it is missing or malformed."""
    if text is None:
        return None
    try:
        return parse_version(str(text))
    except ValueError:
        return None


def major_minor(text: str) -> str | None:
    """ "12.4.1" -> "12.4"; None when `text` is not a version with a minor part."""
    v = version(text)
    if v is None or len(v.release) < 2:
        return None
    return values.major_minor(v)


def same_release_prefix(a: Version, b: Version) -> bool:
    """True when the shorter release is a prefix of the longer: 12 ~ 12.4 ~ 12.4.1."""
    n = min(len(a.release), len(b.release))
    return a.release[:n] == b.release[:n]


# --- GPUs ----------------------------------------------------------------------------------
def gpu_key(text: str) -> str:
    """Normal form of a GPU name: case, spaces, dashes and a leading NVIDIA/GeForce/Tesla ignored."""
    return gpu_match.exact_key(text)


@dataclass
class _Answers:
    """Answers about one loaded matrices, kept with them (each built on first use)."""

    gpu_index: gpu_match.GpuIndex | None = None  # when the data carries no compiled one
    gpu_candidates: dict[str, tuple[Gpu, ...]] = field(default_factory=dict)  # a GPU as written -> its rows
    releases_by_prefix: dict[tuple[int, ...], list[CudaRelease]] | None = None  # (12,), (12, 4) -> rows, oldest first


def _answers(m: Matrices) -> _Answers:
    return m.derived(_new_answers)


def _new_answers(_m: Matrices) -> _Answers:
    return _Answers()


def _gpu_index(m: Matrices) -> gpu_match.GpuIndex:
    index = m.gpu_index
    if index is not None and index.version == m.version and index.rows == len(m.gpus):
        return index  # compiled with the data
    answers = _answers(m)
    if answers.gpu_index is None:
        answers.gpu_index = gpu_match.build_index(m.version, m.gpus)
    return answers.gpu_index


def gpu_candidates(m: Matrices, text: str) -> list[Gpu]:
    """Rows `text` may name: one when it names one GPU, several (with different compute
    capabilities) when it is ambiguous, none when the table does not know it. Memoised per
    loaded matrices: a fleet's file, its joint request and its targets name each GPU."""
    answers = _answers(m).gpu_candidates
    found = answers.get(text)
    if found is None:
        found = answers[text] = tuple(gpu_match.candidates(_gpu_index(m), m.gpus, text))
    return list(found)


def find_gpu(m: Matrices, text: str) -> Gpu | None:
    """The GPU row named by `text`, in any spelling nvidia-smi or users write (see
    `envbuild.matrix.gpu_match`); None when the name is unknown or ambiguous."""
    rows = gpu_candidates(m, text)
    return rows[0] if len(rows) == 1 else None


def gpu_model(m: Matrices, gpu: Gpu) -> Gpu:
    """The model row a board row is a variant of, found by the board's name without its board
    words ("NVIDIA A100-SXM4-80GB", "NVIDIA A100-80GB" -> "NVIDIA A100"); the row itself when
    it is a model. Tables keyed by model (MIG profiles, cloud instances) are read through it."""
    key = gpu_match.loose_key(gpu.name)
    return next((g for g in m.gpus if g is not gpu and gpu_match.exact_key(g.name) == key), gpu)


def mig_parent(m: Matrices, gpu: Gpu | None) -> Gpu | None:
    """The GPU row whose MIG profiles (matrices/mig.yaml) `gpu` offers: itself, or its model
    (`gpu_model`); None when MIG does not run on it. Which of the parent's profiles a board
    offers is then its memory's."""
    if gpu is None:
        return None
    parents = {p.parent for p in m.mig_profiles}
    return next((g for g in (gpu, gpu_model(m, gpu)) if g.name in parents), None)


def gpu_names(m: Matrices) -> list[str]:
    """Every name and alias, for "did you mean" suggestions."""
    return [name for gpu in m.gpus for name in (gpu.name, *gpu.aliases)]


def spec_gpu_check(name: str) -> tuple[bool, str | None]:
    """Whether the GPU matrix knows `name`; if not, a hint: the GPUs an ambiguous name may
    mean (never a guess among them), or the nearest name it knows."""
    m = load()
    rows = gpu_candidates(m, name)
    if len(rows) == 1:
        return True, None
    if rows:
        either = " or ".join(f"{g.name} ({g.compute_capability})" for g in rows)
        return False, f"it may be {either}: name one, or give its compute capability"
    names = {gpu_key(n): n for n in gpu_names(m)}
    close = difflib.get_close_matches(gpu_key(name), list(names), n=1, cutoff=0.6)
    return False, f"did you mean {names[close[0]]!r}?" if close else None


def parse_compute_capability(text: str) -> str | None:
    """ "8.6" / "sm_86" / "sm86" -> "8.6"; None when `text` is not a compute capability
    (a number alone is not one here: "3090" names a GPU)."""
    try:
        return str(values.ComputeCapability.parse(text, digits_alone=False))
    except ValueError:
        return None


def is_compute_capability(text: str) -> bool:
    """True for "8.6"-style compute capabilities (and "sm_86")."""
    return parse_compute_capability(text) is not None


def sm_of(cc: str) -> str:
    """ "8.6" -> "86", the form CUDA's sm_XX and the arch table use."""
    return str(values.ComputeCapability.parse(cc).sm)


def gpus_with_cc(m: Matrices, cc: str) -> list[Gpu]:
    """GPU rows with compute capability `cc`."""
    return [g for g in m.gpus if g.compute_capability == cc]


# --- CUDA and drivers --------------------------------------------------------------------
@dataclass(frozen=True)
class DriverRule:
    """Why a CUDA version needs a given driver."""

    cuda: str
    driver: str | None  # minimum driver version; None = unknown
    rule: str  # one sentence, for messages
    source: str
    inferred: bool = False
    secondary: bool = False
    minor_compat: bool = False  # the minimum comes from minor-version compatibility
    toolkit_driver: str | None = None  # driver packaged with the release: full features, PTX JIT included


@dataclass(frozen=True)
class DriverCuda:
    """The newest CUDA a driver runs."""

    driver: str
    cuda: str | None  # newest major.minor, with minor-version compatibility
    native_cuda: str | None  # newest major.minor whose packaged driver it meets (what nvidia-smi reports)
    rule: str
    source: str
    inferred: bool = False
    secondary: bool = False


def _minor_compat(m: Matrices, major: int) -> MinorCompat | None:
    return next((row for row in m.minor_compat if row.major == major), None)


def _releases(m: Matrices, cuda: Version) -> list[CudaRelease]:
    """The CUDA release rows whose version starts with `cuda`'s release (12.4 -> 12.4.0,
    12.4.1), oldest first. The rows are grouped by every prefix once per loaded matrices:
    a resolve asks this for each CUDA its builds use."""
    answers = _answers(m)
    by_prefix = answers.releases_by_prefix
    if by_prefix is None:
        by_prefix = answers.releases_by_prefix = {}
        for r in sorted((r for r in m.cuda_releases if version(r.version) is not None), key=lambda r: version(r.version)):
            release = version(r.version).release
            for n in range(1, len(release) + 1):
                by_prefix.setdefault(release[:n], []).append(r)
    return by_prefix.get(cuda.release, [])


def _windows(platform: str) -> bool:
    return platform.startswith("win")


def min_driver_for_cuda(m: Matrices, cuda: str, platform: str = "linux-64") -> tuple[str | None, DriverRule]:
    """Minimum driver that runs CUDA `cuda` on `platform`, honouring minor-version compatibility."""
    v = version(cuda)
    if v is None:
        return None, DriverRule(cuda, None, f"{cuda!r} is not a CUDA version", "")
    if platform.startswith("osx"):
        return None, DriverRule(cuda, None, "NVIDIA publishes no CUDA driver for macOS", "")
    win = _windows(platform)
    releases = _releases(m, v)
    if not releases and len(v.release) > 2:  # e.g. conda's cudatoolkit 11.0.221: judge by 11.0
        releases = _releases(m, Version(".".join(map(str, v.release[:2]))))
    packaged = [(version(d), d, r) for r in releases if (d := (r.min_driver_windows if win else r.min_driver_linux))]
    exact = len(v.release) >= 3 and any(version(r.version) == v for r in releases)
    best_packaged = min(packaged, key=lambda p: p[0]) if packaged else None
    toolkit_driver = max(packaged, key=lambda p: p[0])[1] if packaged else None
    mvc = _minor_compat(m, v.release[0])
    floor = floor_text = None
    floor_inferred = False
    if mvc is not None:
        floor_text = mvc.floor_windows if win else mvc.floor_linux
        if floor_text is None and mvc.branch_min:
            floor_text = str(mvc.branch_min)  # only the branch was read: any driver of it counts
            floor_inferred = win  # NVIDIA's branch table is read as OS-independent
        floor = version(floor_text)
    major = v.release[0]
    if floor is not None and (best_packaged is None or floor <= best_packaged[0]):
        rule = (f"CUDA {major}.x runs on any driver >= {floor_text} through minor-version compatibility "
                f"(it never crosses to CUDA {major + 1}, and PTX JIT of newer code needs the release's own driver)")
        return floor_text, DriverRule(cuda, floor_text, rule, mvc.source, inferred=floor_inferred,
                                      secondary=mvc.secondary, minor_compat=True, toolkit_driver=toolkit_driver)
    if best_packaged is not None:
        _, driver, row = best_packaged
        label = row.version if exact else ".".join(map(str, v.release[:2]))
        if major < 11:
            rule = f"CUDA {label} needs the driver it was released with, >= {driver} (no minor-version compatibility before 11.0)"
        else:
            rule = f"CUDA {label} runs on the driver it was released with, >= {driver}, older than the {major}.x minor-version floor"
        return driver, DriverRule(cuda, driver, rule, row.source, inferred=row.inferred and exact,
                                  secondary=row.secondary, toolkit_driver=toolkit_driver)
    return None, DriverRule(cuda, None, f"the matrix has no driver row for CUDA {cuda}", "")


def max_cuda_for_driver(m: Matrices, driver: str, platform: str = "linux-64") -> tuple[str | None, DriverCuda]:
    """Newest CUDA (major.minor) that `driver` runs: packaged drivers plus minor-version floors."""
    d = version(driver)
    if d is None:
        return None, DriverCuda(driver, None, None, f"{driver!r} is not a driver version", "")
    win = _windows(platform)
    native: CudaRelease | None = None
    newest: CudaRelease | None = None
    via: MinorCompat | None = None
    for row in m.cuda_releases:
        rv = version(row.version)
        need = version(row.min_driver_windows if win else row.min_driver_linux)
        if need is not None and d >= need and (native is None or rv > version(native.version)):
            native = row
    for mvc in m.minor_compat:
        floor = version((mvc.floor_windows if win else mvc.floor_linux) or (str(mvc.branch_min) if mvc.branch_min else None))
        if floor is None or d < floor:
            continue
        for row in m.cuda_releases:
            rv = version(row.version)
            if rv.release[0] == mvc.major and (newest is None or rv > version(newest.version)):
                newest, via = row, mvc
    native_mm = major_minor(native.version) if native else None
    best = native
    if newest is not None and (best is None or version(newest.version) > version(best.version)):
        best = newest
    else:
        via = None
    if best is None:
        return None, DriverCuda(driver, None, None, f"driver {driver} is older than every CUDA release in the matrix", "")
    cuda = major_minor(best.version)
    if via is not None:
        rule = (f"driver {driver} runs CUDA {via.major}.x up to {cuda} through minor-version compatibility"
                + (f"; with every feature (PTX JIT included) up to CUDA {native_mm}" if native_mm else ""))
        branch_only = win and not via.floor_windows  # NVIDIA's branch table read as OS-independent
        return cuda, DriverCuda(driver, cuda, native_mm, rule, via.source, inferred=branch_only, secondary=via.secondary)
    rule = f"driver {driver} is at least the driver released with CUDA {best.version}"
    return cuda, DriverCuda(driver, cuda, native_mm, rule, best.source, secondary=best.secondary)


# --- architectures -----------------------------------------------------------------------------
def _arch_row(m: Matrices, cuda: str):
    v = version(major_minor(cuda) or cuda)
    if v is None:
        return None
    for row in m.cuda_arch:
        if version(row.cuda_min) <= v <= version(row.cuda_max):
            return row
    return None


def toolkit_sms(m: Matrices, cuda: str) -> tuple[str, ...] | None:
    """Real architectures ("86", ...) the CUDA `cuda` toolkit compiles for; None = no row."""
    row = _arch_row(m, cuda)
    return row.sms if row else None


def toolkit_arch_row(m: Matrices, cuda: str):
    """The CudaArchSupport row covering `cuda` (for its source), or None."""
    return _arch_row(m, cuda)


def _sm(sm_or_cc: str) -> str:
    cc = parse_compute_capability(sm_or_cc)
    return sm_of(cc) if cc and "." in sm_or_cc else sm_or_cc.lower().removeprefix("sm_")


def _rows_with(m: Matrices, sm_or_cc: str):
    sm = _sm(sm_or_cc)
    return sorted((r for r in m.cuda_arch if sm in r.sms), key=lambda r: version(r.cuda_min))


def min_cuda_for_sm(m: Matrices, sm: str) -> str | None:
    """First CUDA toolkit that compiles for `sm` ("90", "sm_90" or "9.0"); None = none does."""
    rows = _rows_with(m, sm)
    return rows[0].cuda_min if rows else None


def last_cuda_for_sm(m: Matrices, sm: str) -> str | None:
    """Last CUDA toolkit that compiles for `sm`; None when the newest one still does (or none ever did)."""
    rows = _rows_with(m, sm)
    newest = max(m.cuda_arch, key=lambda r: version(r.cuda_max), default=None)
    if not rows or rows[-1] is newest:
        return None
    return rows[-1].cuda_max


# --- which Linux driver branches drive a GPU ------------------------------------------------------
def driver_architecture(m: Matrices, cc: str) -> DriverArchitecture | None:
    """The `architectures` row (matrices/cuda_driver.yaml) that lists compute capability
    `cc`; None for the integrated GPUs of Tegra SoCs, whose drivers come with Linux for Tegra."""
    return next((r for r in m.driver_architectures if cc in r.compute_capabilities), None)


# --- base images ---------------------------------------------------------------------------------
def _matches_version(wanted: str | None, have: str | None) -> bool:
    if wanted is None:
        return True
    a, b = version(wanted), version(have)
    return a is not None and b is not None and same_release_prefix(a, b)


def is_sagemaker(image: BaseImage) -> bool:
    """True for AWS DLC SageMaker variants (their tags say so)."""
    return image.family == "dlc" and "sagemaker" in image.ref.rsplit(":", 1)[-1]


def base_images(
    m: Matrices,
    family: str | None = None,
    cuda: str | None = None,
    flavour: str | None = None,
    framework: str | None = None,
    platform: str | None = None,
    framework_version: str | None = None,
    python: str | None = None,
    sagemaker: bool | None = None,
) -> list[BaseImage]:
    """Catalog rows matching every given filter (versions match on their common prefix: "12" ~ "12.4.1")."""
    out = []
    for image in m.base_images:
        if family and image.family != family:
            continue
        if flavour and image.flavour != flavour:
            continue
        if framework and (image.framework or "").lower() != framework.lower():
            continue
        if platform and platform not in image.platforms:
            continue
        if sagemaker is not None and is_sagemaker(image) != sagemaker:
            continue
        if not (_matches_version(cuda, image.cuda) and _matches_version(framework_version, image.framework_version)
                and _matches_version(python, image.python)):
            continue
        out.append(image)
    return out


def dlc_ref_in_region(ref: str, region: str) -> str:
    """An AWS DLC ref moved to another region (the catalog writes us-east-1)."""
    return _AWS_ECR.sub(lambda mt: f"{mt.group(1)}{region}{mt.group(3)}", ref)


# --- the in-image installer ------------------------------------------------------------------
def installer_python_min(m: Matrices, installer: str):
    """The `installer_python` row for `installer` (conda | pip): the oldest python3 the
    in-image installer runs on in that mode, or None when the table has no row for it."""
    return next((r for r in m.installer_pythons if r.installer == installer), None)


def installer_runs_on(m: Matrices, installer: str, python: str | None) -> bool:
    """Can the in-image installer in mode `installer` run on a base whose python3 is
    `python`? An unknown Python (None) is not refused: nothing says it is too old."""
    row = installer_python_min(m, installer)
    if row is None or python is None:
        return True
    return parse_version(major_minor(python) or python) >= parse_version(row.python_min)
