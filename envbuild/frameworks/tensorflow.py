"""TensorFlow: one matrix row per tested configuration (release, CUDA, cuDNN) of the pip wheel."""
from __future__ import annotations

from dataclasses import dataclass

from packaging.version import Version

from envbuild.core.values import CudaVersion
from envbuild.frameworks.base import Framework, Install, LockNames, Pins, Refresh, Spelling, View
from envbuild.frameworks.build import Build, _pythons
from envbuild.matrix.tables import Row


# --- its rows: matrices/tensorflow.yaml ---------------------------------------------------------------
@dataclass(frozen=True)
class TfBuild(Row):
    """A tested TensorFlow build: Python, CUDA and cuDNN per release."""

    version: str = ""  # "2.15.0"
    python: str | None = None  # ">=3.9,<3.12"
    cuda: str = ""  # "12.2"
    cudnn: str | None = None  # "8.9"
    pip_extra: str | None = None  # "and-cuda" from 2.14 on (pip installs CUDA libraries)
    windows_gpu: bool = False  # native Windows GPU build exists (only < 2.11)
    # the Linux wheel's TF_CUDA_COMPUTE_CAPABILITIES as its build_info.py prints them:
    # ("sm_50", ..., "compute_80"). In TensorFlow's notation `sm_XY` is SASS only and
    # `compute_XY` is SASS *and* PTX of XY (unlike TorchBuild.archs). None = not read
    archs: tuple[str, ...] | None = None


class TensorFlowView(View):
    def columns(self, rows, archs, marks):
        spelled = PLUGIN.spelled_out_archs
        return (["version", "cuda", "cudnn", "python", "pip extra", "windows gpu", "archs (sm; ptx = PTX)"],
                [[r.version, r.cuda, r.cudnn or "?", r.python or "?", r.pip_extra or "-", "yes" if r.windows_gpu else "no",
                  archs(spelled(r.archs) if r.archs else None) + marks(r)] for r in rows])


class TensorFlowRefresh(Refresh):
    def releases(self, m):
        plan: dict[str, set[str]] = {}
        for r in PLUGIN.rows(m):
            plan.setdefault(_wheel_name(r.version), set()).add(r.version)
        return plan

    def newest(self, m):
        return {"tensorflow": {r.version for r in PLUGIN.rows(m)}}


class TensorFlow(Framework):
    name = "tensorflow"
    order = 2
    # tf-nightly publishes the nightlies (2.N.0.devYYYYMMDD) of the coming 2.N release
    spelling = Spelling(aliases=("tf", "tensorflow-gpu", "tf-nightly", "tf-nightly-gpu"), cpu_only=("tensorflow-cpu",))
    row_type = TfBuild
    install = Install(base_family="tensorflow", in_dlc=True)
    lock = LockNames(
        pip_name_prefixes=("tensorflow",),  # tensorflow, tensorflow-gpu
        conda_packages=("tensorflow-base", "tensorflow-gpu", "tensorflow"), has_cpu_builds=True,
        variant_records=("tensorflow", "tensorflow-base", "tensorflow-gpu"),
        jit_ptxas=True,  # XLA compiles with the ptxas of nvidia-cuda-nvcc-cuXX
    )
    view = TensorFlowView()
    refresh = TensorFlowRefresh()

    def builds(self, m, minors):
        out = []
        for r in self.rows(m):
            if not r.cuda:
                continue
            out.append(Build(
                framework=self.name, version=r.version, installer="pip", cuda=CudaVersion.parse(r.cuda),
                variant=f"tensorflow[{r.pip_extra}]" if r.pip_extra else f"CUDA {r.cuda}",
                row=r, pythons=_pythons(r.python), python_text=r.python, archs=r.archs, cudnn=r.cudnn,
                platforms=("linux-64", "win-64") if r.windows_gpu else ("linux-64",),
                # Before `[and-cuda]` (2.14) the wheel loads CUDA and cuDNN from the system.
                bundles_runtime=bool(r.pip_extra),
                package="tensorflow",
            ))
        return out

    def pins(self, b, label=None):
        extra = b.row.pip_extra
        return Pins(pip=(f"tensorflow[{extra}]=={b.version}" if extra else f"tensorflow=={b.version}",))

    def wheel_groups(self, table, b):
        return [table.exact(_wheel_name(b.version), b.version)], False

    def spelled_out_archs(self, archs):
        """TensorFlow's .bazelrc: "`compute_XY` enables PTX embedding in addition to SASS",
        so its `compute_XY` becomes `sm_XY compute_XY` (in PyTorch's lists it is the PTX alone)."""
        out: list[str] = []
        for a in archs or ():
            if a.startswith("compute_"):
                out.append("sm_" + a[len("compute_"):])
            out.append(a)
        return tuple(dict.fromkeys(out))

    def windows_problem(self, b):
        if b.row.windows_gpu:
            return None
        return (f"tensorflow {b.version} has no native-Windows GPU build (the last was 2.10); "
                f"use WSL2 (platform linux-64) or tensorflow < 2.11", "windows_gpu: false")


def _wheel_name(version: str) -> str:
    """The GPU wheel's name: `tensorflow-gpu` before 2.1, `tensorflow` (CPU and GPU) after."""
    return "tensorflow" if Version(version) >= Version("2.1") else "tensorflow-gpu"


PLUGIN = TensorFlow()
