"""JAX: one matrix row per release, with the CUDA majors its plugin wheels are built for."""
from __future__ import annotations

from envbuild.frameworks.base import Framework, Pins


class Jax(Framework):
    name = "jax"
    aliases = ("jaxlib",)
    cuda_in_name = ((r"^jax-cuda(\d+)-(?:plugin|pjrt)$", "major"),)  # jax-cuda12-plugin
    table = "jax"
    pip_names = ("jax",)
    pip_name_prefixes = ("jax-cuda",)  # jax-cuda12-plugin, jax-cuda12-pjrt
    conda_packages = ("jaxlib",)
    has_cpu_builds = True
    variant_records = ("jaxlib",)

    def builds(self, m, minors):
        from envbuild.frameworks.build import Build, _pythons
        from envbuild.versions import parse_version

        out = []
        for r in m.jax:
            floors = dict(r.cuda_min)
            for major in r.cuda_majors:
                extra = next((e for e in r.pip_extras if e.startswith(f"cuda{major}") and "local" not in e), None)
                extra = extra or next((e for e in r.pip_extras if e.startswith(f"cuda{major}")), f"cuda{major}")
                for minor in (m for m in minors if parse_version(m).release[0] == major):
                    out.append(Build(
                        framework=self.name, version=r.version, installer="pip", cuda=minor, variant=f"jax[{extra}]",
                        row=r, pythons=_pythons(r.python), python_text=r.python, cudnn_min=r.cudnn_min,
                        cuda_min=floors.get(major), driver_min=r.driver_min_linux,
                        # `cuda`, `cuda11_cudnn86` (before 0.4.7) and `*_local` wheels load the system CUDA
                        bundles_runtime="local" not in extra and "cudnn" not in extra and extra != "cuda",
                        pip_extra=extra,
                        package="jax", ranged=True,
                    ))
        return out

    def pins(self, b, label=None):
        from envbuild.versions import read_local_label

        extra = b.pip_extra
        cudnn = read_local_label(label).cudnn if label else None
        if cudnn:  # `+cuda11.cudnn86` asks for the cuDNN 8.6 wheel: its extra, where the release has one
            wanted = f"cuda{b.cuda_major}_cudnn{cudnn.replace('.', '')}"
            extra = wanted if wanted in b.row.pip_extras else extra
        return Pins(pip=(f"jax[{extra}]=={b.version}",))

    def wheel_groups(self, table, b):
        jax = table.exact("jax", b.version)
        pins = dict(jax[0].pins) if jax else {}
        extra = b.pip_extra or f"cuda{b.cuda_major}"
        wanted = pins.get(extra) or next((p for k, p in pins.items() if k.startswith(f"cuda{b.cuda_major}")), None)
        if wanted:
            named = [tuple(x.split("==", 1)) for x in wanted.split()]
        else:  # the extra's pins were not read: the same-numbered artefacts stand in
            named = [("jaxlib", b.version), (f"jax-cuda{b.cuda_major}-plugin", b.version)]
        pinned = [table.exact(n, v) for n, v in named]
        if not jax or not all(p for p in pinned):
            # a pinned artefact the index does not hold (jaxlib+cuda wheels of Google's bucket
            # before the plugins): not judged here, the matrix's Python range applies
            return [], False
        return [jax] + pinned, False

    def index_releases(self, m):
        return {"jax": {r.version for r in m.jax}}

    def index_projects(self, m):
        """jaxlib and the CUDA plugins (and their PJRT runtimes) the releases' extras pin."""
        majors = {major for r in m.jax for major in r.cuda_majors}
        return {"jaxlib"} | {f"jax-cuda{mj}-{kind}" for mj in majors for kind in ("plugin", "pjrt")}

    def matrix_columns(self, rows, archs, marks):
        return (["version", "cuda majors", "cuda", "pip extras", "python", "cudnn >=", "driver >=", ""],
                [[r.version, ",".join(map(str, r.cuda_majors)) or "-", ",".join(f">={c}" for _, c in r.cuda_min) or "?",
                  ",".join(r.pip_extras) or "-", r.python or "?", r.cudnn_min or "?", r.driver_min_linux or "?",
                  marks(r).strip()] for r in rows])


PLUGIN = Jax()
