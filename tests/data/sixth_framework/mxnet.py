"""Apache MXNet: one matrix row per GPU wheel (mxnet-cuXYZ) of a release."""
from __future__ import annotations

from dataclasses import dataclass

from envbuild.core.values import CudaVersion
from envbuild.frameworks.base import Framework, LockNames, Pins, Spelling, View
from envbuild.frameworks.build import Build, _pythons
from envbuild.matrix.tables import Row


# --- its rows: matrices/mxnet.yaml ---------------------------------------------------------------
@dataclass(frozen=True)
class MxnetBuild(Row):
    """One GPU wheel of an MXNet release."""

    version: str = ""  # "1.9.1"
    cuda: str = ""  # the CUDA variant, major.minor: "11.2"
    package: str = ""  # the wheel's name: "mxnet-cu112"
    python: str | None = None  # PEP 440 specifier of supported Pythons; None = not read


class MxnetView(View):
    def columns(self, rows, archs, marks):
        return (["version", "cuda", "package", "python", ""],
                [[r.version, r.cuda, r.package, r.python or "?", marks(r).strip()] for r in rows])


class Mxnet(Framework):
    name = "mxnet"
    order = 6
    spelling = Spelling(cuda_in_name=((r"^mxnet-cu(\d{2,3})$", "variant"),))  # mxnet-cu112
    row_type = MxnetBuild
    lock = LockNames(pip_name_prefixes=("mxnet-cu",))
    view = MxnetView()

    def builds(self, m, minors):
        return [Build(framework=self.name, version=r.version, installer="pip", cuda=CudaVersion.parse(r.cuda), variant=r.package,
                      row=r, pythons=_pythons(r.python), python_text=r.python, package=r.package,
                      bundles_runtime=False)  # the wheel loads the system's CUDA libraries
                for r in self.rows(m)]

    def pins(self, b, label=None):
        return Pins(pip=(f"{b.package}=={b.version}",))


PLUGIN = Mxnet()
