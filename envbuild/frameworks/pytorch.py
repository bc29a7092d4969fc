"""PyTorch: one matrix row per build (pip wheel or conda package) of one CUDA variant."""
from __future__ import annotations

from envbuild.frameworks.base import Framework, Pins


class PyTorch(Framework):
    name = "pytorch"
    aliases = ("torch", "pytorch-gpu")
    cpu_only = ("pytorch-cpu",)
    table = "pytorch"
    lists_platforms = True  # rows name each platform a build was published for
    lists_archs = True
    base_family = "pytorch"
    in_dlc = True
    pip_names = ("torch",)
    conda_packages = ("pytorch",)
    has_cpu_builds = True
    variant_records = ("pytorch", "libtorch", "torchvision", "torchaudio", "pytorch-mutex", "cpuonly")
    query_installer = True

    def builds(self, m, minors):
        from envbuild.frameworks.build import Build, _pythons
        from envbuild.versions import cuda_to_local

        out = []
        for r in m.pytorch:
            if not r.cuda:
                continue  # CPU rows are never chosen
            out.append(Build(
                framework=self.name, version=r.version, installer=r.installer, cuda=r.cuda,
                variant=r.package or (f"+{cuda_to_local(r.cuda)}" if r.installer == "pip" else f"cuda {r.cuda}"),
                row=r, pythons=_pythons(r.python), python_text=r.python, archs=r.archs, cudnn=r.cudnn,
                platforms=tuple(r.platforms), package=r.package, index_url=r.index_url,
                channels=tuple(r.channels), companions=tuple(tuple(c) for c in r.companions),
                pypi_default=r.pypi_default,
            ))
        return out

    def pins(self, b, label=None):
        from envbuild.versions import cuda_to_local

        if b.installer == "conda":
            name, _, ver = b.package.partition("=")
            if not ver:
                pin = name  # a feature package of the 1.0.0 era, e.g. `cuda80`
            else:
                pin = f"{name}=={ver}" if name == "pytorch-cuda" else f"{name}=={b.cuda}.*"
            return Pins(conda=(f"pytorch=={b.version}=*cuda*", pin) + tuple(f"{n}=={v}" for n, v in b.companions))
        local = f"+{cuda_to_local(b.cuda)}" if b.package.startswith("+") else ""
        return Pins(pip=(f"torch=={b.version}{local}",) + tuple(f"{n}=={v}{local}" for n, v in b.companions),
                    index_url=b.index_url)

    def wheel_groups(self, table, b):
        # PyPI holds one CUDA build; the others share its Pythons
        return [table.exact("torch", b.version)], not b.pypi_default

    def index_releases(self, m):
        return {"torch": {r.version for r in m.pytorch if r.installer == "pip"}}

    def matrix_columns(self, rows, archs, marks):
        return (["version", "installer", "cuda", "package", "python", "platforms", "archs (sm; ptx = PTX)"],
                [[r.version, r.installer, r.cuda, r.package or "(untagged)", r.python or "?", ",".join(r.platforms),
                  archs(r.archs) + marks(r)] for r in rows])


PLUGIN = PyTorch()
