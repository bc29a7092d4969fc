"""TensorFlow: one matrix row per tested configuration (release, CUDA, cuDNN) of the pip wheel."""
from __future__ import annotations

from packaging.version import Version

from envbuild.frameworks.base import Framework, Install, LockNames, Pins, Refresh, Spelling, View
from envbuild.frameworks.build import Build, _pythons


class TensorFlowView(View):
    def columns(self, rows, archs, marks):
        spelled = PLUGIN.spelled_out_archs
        return (["version", "cuda", "cudnn", "python", "pip extra", "windows gpu", "archs (sm; ptx = PTX)"],
                [[r.version, r.cuda, r.cudnn or "?", r.python or "?", r.pip_extra or "-", "yes" if r.windows_gpu else "no",
                  archs(spelled(r.archs) if r.archs else None) + marks(r)] for r in rows])


class TensorFlowRefresh(Refresh):
    def releases(self, m):
        plan: dict[str, set[str]] = {}
        for r in m.tensorflow:
            plan.setdefault(_wheel_name(r.version), set()).add(r.version)
        return plan

    def newest(self, m):
        return {"tensorflow": {r.version for r in m.tensorflow}}


class TensorFlow(Framework):
    name = "tensorflow"
    order = 2
    # tf-nightly publishes the nightlies (2.N.0.devYYYYMMDD) of the coming 2.N release
    spelling = Spelling(aliases=("tf", "tensorflow-gpu", "tf-nightly", "tf-nightly-gpu"), cpu_only=("tensorflow-cpu",))
    table = "tensorflow"
    # TensorFlow's .bazelrc: "`compute_XY` enables PTX embedding in addition to SASS"
    ptx_entry_has_sass = True
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
        for r in m.tensorflow:
            if not r.cuda:
                continue
            out.append(Build(
                framework=self.name, version=r.version, installer="pip", cuda=r.cuda,
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

    def windows_problem(self, b):
        if b.row.windows_gpu:
            return None
        return (f"tensorflow {b.version} has no native-Windows GPU build (the last was 2.10); "
                f"use WSL2 (platform linux-64) or tensorflow < 2.11", "windows_gpu: false")


def _wheel_name(version: str) -> str:
    """The GPU wheel's name: `tensorflow-gpu` before 2.1, `tensorflow` (CPU and GPU) after."""
    return "tensorflow" if Version(version) >= Version("2.1") else "tensorflow-gpu"


PLUGIN = TensorFlow()
