"""PyTorch: one matrix row per build (pip wheel or conda package) of one CUDA variant."""
from __future__ import annotations

import re
from dataclasses import dataclass

from packaging.version import Version

from envbuild.core.values import CudaVersion, major_minor
from envbuild.core.versions import cuda_to_local
from envbuild.frameworks.base import Framework, Install, LockNames, Pins, Refresh, Spelling, TableShape, View
from envbuild.frameworks.build import Build, _pythons
from envbuild.matrix import wheels as w
from envbuild.matrix.tables import Row
from envbuild.matrix.wheels import IndexFields

_WHEEL_TRIES = 8  # Linux wheels to try for PEP 658 metadata (a mirror may lack some)
# the package that carries the CUDA runtime of a torch wheel, and since CUDA 13 the toolkit meta-package
_CUDA_CARRIERS = re.compile(r"^(nvidia-cuda-runtime(-cu\d+)?|cuda-toolkit)$")


# --- its rows: matrices/pytorch.yaml ------------------------------------------------------------------
@dataclass(frozen=True)
class TorchBuild(Row):
    """One published GPU build of PyTorch: a version for one CUDA variant on one installer."""

    version: str = ""  # "1.6.0"
    installer: str = ""  # "pip" | "conda"
    cuda: str = ""  # CUDA variant, major.minor: "10.2"
    package: str = ""  # how the variant is named: "+cu102" (pip), "cudatoolkit=10.2" / "pytorch-cuda=11.8" (conda)
    python: str | None = None  # PEP 440 specifier of supported Pythons, ">=3.6,<3.9"; None = not read
    index_url: str | None = None  # pip: "https://download.pytorch.org/whl/cu102"
    channels: tuple[str, ...] = ()  # conda: ("pytorch",) / ("pytorch", "nvidia")
    archs: tuple[str, ...] | None = None  # ("sm_37", ..., "compute_75"); None = not read
    cudnn: str | None = None
    platforms: tuple[str, ...] = ("linux-64",)
    companions: tuple[tuple[str, str], ...] = ()  # (("torchvision", "0.7.0"), ("torchaudio", "0.6.0"))
    # pip only: a plain `pip install torch==VERSION` from PyPI (no local tag, no index URL)
    # gets this very build. Rows whose `package` is "" exist only as that untagged wheel.
    pypi_default: bool = False


class PyTorchView(View):
    query_installer = True

    def columns(self, rows, archs, marks):
        return (["version", "installer", "cuda", "package", "python", "platforms", "archs (sm; ptx = PTX)"],
                [[r.version, r.installer, r.cuda, r.package or "(untagged)", r.python or "?", ",".join(r.platforms),
                  archs(r.archs) + marks(r)] for r in rows])


class PyTorchRefresh(Refresh):
    def releases(self, m):
        return {"torch": {r.version for r in PLUGIN.rows(m) if r.installer == "pip"}}

    def fields(self, m, project, version, files, metadata, grouped):
        """The CUDA runtime the default Linux wheels pin (`cuda`, and `cuda_aarch64` where
        the matrix lists an aarch64 GPU build: older aarch64 wheels are CPU-only)."""
        fields, notes = {}, []
        rows = PLUGIN.rows(m)
        for machine, key in (("x86_64", "cuda"), ("aarch64", "cuda_aarch64")):
            if machine == "aarch64" and version not in {
                    b.version for b in rows if b.installer == "pip" and "linux-aarch64" in b.platforms}:
                continue
            meta, filename = metadata(_linux_wheels(files, machine))
            cuda = cuda_of_wheel(meta, machine) if meta else None
            if cuda:
                fields[key] = cuda
            elif files:
                wheel = "default wheel" if machine == "x86_64" else "aarch64 wheel"
                notes.append(f"torch {version}: the {wheel}'s CUDA was not read "
                             f"({'no CUDA runtime pinned in ' + filename if meta else 'its metadata could not be read'})")
        return IndexFields(fields, tuple(notes))

    def findings(self, m, rows, index_url):
        """Where `pypi_default` in pytorch.yaml disagrees with the CUDA of PyPI's Linux wheels
        (x86_64 from the `cuda` field, aarch64 from `cuda_aarch64`)."""
        out, table = [], PLUGIN.rows(m)
        for platform, key in (("linux-64", "cuda"), ("linux-aarch64", "cuda_aarch64")):
            cuda_of = {r["version"]: r[key] for r in rows if r["package"] == "torch" and r.get(key)}
            for version, cuda in sorted(cuda_of.items(), key=lambda kv: Version(kv[0])):
                builds = [b for b in table if b.installer == "pip" and b.version == version and platform in b.platforms]
                if not builds:
                    continue  # the matrix lists no GPU build of this release for the platform
                flagged = sorted({b.cuda for b in builds if b.pypi_default}, key=Version)
                if flagged == [cuda]:
                    continue
                have = "flags none" if not flagged else f"flags CUDA {', '.join(flagged)}"
                known = "" if any(b.cuda == cuda for b in builds) else f" (no CUDA {cuda} row exists)"
                out.append(f"pytorch.yaml pypi_default: torch {version} {platform} on {index_url} is the CUDA {cuda} "
                           f"build{known}; the matrix {have}")
        return out

    def newest(self, m):
        return {"torch": {r.version for r in PLUGIN.rows(m)}}


class PyTorch(Framework):
    name = "pytorch"
    order = 1
    spelling = Spelling(aliases=("torch", "pytorch-gpu"), cpu_only=("pytorch-cpu",))
    row_type = TorchBuild
    shape = TableShape(lists_platforms=True, lists_archs=True)  # rows name each platform and arch built
    install = Install(base_family="pytorch", in_dlc=True)
    lock = LockNames(
        pip_names=("torch",), conda_packages=("pytorch",), has_cpu_builds=True,
        variant_records=("pytorch", "libtorch", "torchvision", "torchaudio", "pytorch-mutex", "cpuonly"),
        cpu_selectors=("cpuonly",),
        cpu_dependencies=("pytorch-mutex 1.0 cpu",),  # the pytorch channel's CPU builds depend on it
        cuda_selectors=("pytorch-cuda",),  # pytorch-cuda=12.1 selects the pytorch channel's CUDA 12.1 builds
    )
    view = PyTorchView()
    refresh = PyTorchRefresh()

    def builds(self, m, minors):
        out = []
        for r in self.rows(m):
            if not r.cuda:
                continue  # CPU rows are never chosen
            cuda = CudaVersion.parse(r.cuda)
            out.append(Build(
                framework=self.name, version=r.version, installer=r.installer, cuda=cuda,
                variant=r.package or (f"+{cuda_to_local(cuda)}" if r.installer == "pip" else f"cuda {r.cuda}"),
                row=r, pythons=_pythons(r.python), python_text=r.python, archs=r.archs, cudnn=r.cudnn,
                platforms=tuple(r.platforms), package=r.package, index_url=r.index_url,
                channels=tuple(r.channels),
                pypi_default=r.pypi_default,
            ))
        return out

    def pins(self, b, label=None):
        if b.installer == "conda":
            name, _, ver = b.package.partition("=")
            if not ver:
                pin = name  # a feature package of the 1.0.0 era, e.g. `cuda80`
            else:
                pin = f"{name}=={ver}" if name == "pytorch-cuda" else f"{name}=={b.cuda}.*"
            return Pins(conda=(f"pytorch=={b.version}=*cuda*", pin) + tuple(f"{n}=={v}" for n, v in b.row.companions))
        local = f"+{cuda_to_local(b.cuda)}" if b.package.startswith("+") else ""
        return Pins(pip=(f"torch=={b.version}{local}",) + tuple(f"{n}=={v}{local}" for n, v in b.row.companions),
                    index_url=b.index_url)

    def wheel_groups(self, table, b):
        # PyPI holds one CUDA build; the others share its Pythons
        return [table.exact("torch", b.version)], not b.pypi_default


def _linux_wheels(files: list, machine: str) -> list[dict]:
    """The Linux wheels for `machine` among a release's (file, tags), cp311 first."""
    linux = [f for f, tags in files if tags and any("linux" in t.platform and t.platform.endswith(machine) for t in tags)]
    linux.sort(key=lambda f: ("cp311" not in f["filename"], f["filename"]))
    return linux[:_WHEEL_TRIES]


def cuda_of_wheel(metadata: str, machine: str = "x86_64") -> str | None:
    """CUDA major.minor of a Linux torch wheel for `machine` from the runtime it pins
    (`nvidia-cuda-runtime-cu12==12.4.127` -> "12.4", `cuda-toolkit[...]==13.0.2` -> "13.0");
    None when it pins none (before 1.13 the wheel carried CUDA inside; a CPU-only build)."""
    env = {**w.LINUX, "platform_machine": machine, "extra": ""}
    for req in w.requires_dist(metadata):
        if not _CUDA_CARRIERS.match(req.name.lower()):
            continue
        if req.marker is not None and not req.marker.evaluate(env):
            continue
        pinned = w.pinned(req.specifier)
        if pinned is not None:
            return major_minor(pinned)
    return None


PLUGIN = PyTorch()
