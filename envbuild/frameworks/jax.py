"""JAX: one matrix row per release, with the CUDA majors its plugin wheels are built for."""
from __future__ import annotations

import re
from dataclasses import dataclass

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from envbuild.core.values import CudaVersion
from envbuild.core.versions import LocalLabel
from envbuild.frameworks.base import Framework, LockNames, Pins, Refresh, Spelling, View
from envbuild.frameworks.build import Build, _pythons
from envbuild.matrix import wheels as w
from envbuild.matrix.tables import Row
from envbuild.matrix.wheels import IndexFields

_CUDA_EXTRA_SKIP = ("local",)  # `jax[cuda12-local]` uses the system CUDA; same pins, not read twice
# jaxlib's local labels: `cuda111` (0.1.x, CUDA 11.1) and `cuda11.cudnn86` (CUDA 11 with cuDNN >= 8.6)
_CUDA_LABEL = re.compile(r"^cuda([7-9]\d|1\d\d)$")
_CUDA_CUDNN_LABEL = re.compile(r"^cuda(\d{1,2})[._]cudnn(\d{2,4})$")


# --- its rows: matrices/jax.yaml ---------------------------------------------------------------------
@dataclass(frozen=True)
class JaxRelease(Row):
    """A jax/jaxlib release and the CUDA and cuDNN its GPU plugins need."""

    version: str = ""  # "0.4.31"
    python: str | None = None  # ">=3.10"
    cuda_majors: tuple[int, ...] = ()  # CUDA plugin majors published for it: (12,) / (12, 13)
    pip_extras: tuple[str, ...] = ()  # ("cuda12",) / ("cuda12_pip", "cuda11_pip")
    cudnn_min: str | None = None  # "9.1"
    driver_min_linux: str | None = None  # per the installation docs of that era
    # per CUDA major, the oldest CUDA minor whose libraries the GPU build accepts (it was
    # built against that minor or states it as the floor): ((11, "11.8"), (12, "12.2")).
    # A major missing here = not read.
    cuda_min: tuple[tuple[int, str], ...] = ()


@dataclass(frozen=True)
class JaxSpelling(Spelling):
    def read_label(self, label):
        """jaxlib's labels (`_CUDA_LABEL`, `_CUDA_CUDNN_LABEL`)."""
        text = label.strip().lower()
        match = _CUDA_LABEL.match(text)
        if match:
            digits = match.group(1)
            return LocalLabel("cuda", cuda=f"{int(digits[:-1])}.{digits[-1]}")
        match = _CUDA_CUDNN_LABEL.match(text)
        if match:  # `cudnn805` = 8.0.5
            cudnn = match.group(2)
            cudnn = f"{cudnn[0]}.{cudnn[1]}" + (f".{cudnn[2:]}" if len(cudnn) > 2 else "")
            return LocalLabel("cuda", cuda=str(int(match.group(1))), cudnn=cudnn)
        return None


class JaxView(View):
    def columns(self, rows, archs, marks):
        return (["version", "cuda majors", "cuda", "pip extras", "python", "cudnn >=", "driver >=", ""],
                [[r.version, ",".join(map(str, r.cuda_majors)) or "-", ",".join(f">={c}" for _, c in r.cuda_min) or "?",
                  ",".join(r.pip_extras) or "-", r.python or "?", r.cudnn_min or "?", r.driver_min_linux or "?",
                  marks(r).strip()] for r in rows])


class JaxRefresh(Refresh):
    sdist_projects = ("jax",)  # early jax releases were published as sdists only

    def releases(self, m):
        return {"jax": {r.version for r in PLUGIN.rows(m)}}

    def projects(self, m):
        """jaxlib and the CUDA plugins (and their PJRT runtimes) the releases' extras pin."""
        majors = {major for r in PLUGIN.rows(m) for major in r.cuda_majors}
        return {"jaxlib"} | {f"jax-cuda{mj}-{kind}" for mj in majors for kind in ("plugin", "pjrt")}

    def fields(self, m, project, version, files, metadata, grouped):
        """`pins`: the artefacts each CUDA extra pins (jaxlib, the CUDA plugin and its PJRT
        runtime), which are recorded too; guessed and marked `inferred` when the metadata
        cannot be read."""
        meta, _filename = metadata([f for f, tags in files if tags is not None])
        fields, notes = {}, []
        pins = _extra_pins(m, version, meta, grouped)
        if not pins:
            pins = _extra_pins_guessed(m, version, grouped)
            fields["inferred"] = True
            notes.append(f"jax {version}: its metadata could not be read; the CUDA extras' artefacts are "
                         f"taken as the newest jaxlib / plugin releases of {version}'s series up to it")
        if pins:
            fields["pins"] = {k: " ".join(f"{n}=={v}" for n, v in sorted(p.items())) for k, p in pins.items()}
        pinned: dict[str, set[str]] = {}
        for p in pins.values():
            for n, v in p.items():
                pinned.setdefault(n, set()).add(v)
        return IndexFields(fields, tuple(notes), pinned)

    def newest(self, m):
        return {"jax": {r.version for r in PLUGIN.rows(m)}}


class Jax(Framework):
    name = "jax"
    order = 3
    spelling = JaxSpelling(aliases=("jaxlib",), cuda_in_name=((r"^jax-cuda(\d+)-(?:plugin|pjrt)$", "major"),))  # jax-cuda12-plugin
    row_type = JaxRelease
    lock = LockNames(
        pip_names=("jax",), pip_name_prefixes=("jax-cuda",),  # jax-cuda12-plugin, jax-cuda12-pjrt
        conda_packages=("jaxlib",), has_cpu_builds=True, variant_records=("jaxlib",),
        jit_ptxas=True,  # XLA compiles with the ptxas of nvidia-cuda-nvcc-cuXX
    )
    view = JaxView()
    refresh = JaxRefresh()

    def builds(self, m, minors):
        out = []
        for r in self.rows(m):
            floors = {major: CudaVersion.parse(floor) for major, floor in r.cuda_min}
            for major in r.cuda_majors:
                extra = next((e for e in r.pip_extras if e.startswith(f"cuda{major}") and "local" not in e), None)
                extra = extra or next((e for e in r.pip_extras if e.startswith(f"cuda{major}")), f"cuda{major}")
                for minor in (m for m in minors if m.major == major):
                    out.append(Build(
                        framework=self.name, version=r.version, installer="pip", cuda=minor, variant=f"jax[{extra}]",
                        row=r, pythons=_pythons(r.python), python_text=r.python, cudnn_min=r.cudnn_min,
                        cuda_min=floors.get(major), driver_min=r.driver_min_linux,
                        # `cuda`, `cuda11_cudnn86` (before 0.4.7) and `*_local` wheels load the system CUDA
                        bundles_runtime="local" not in extra and "cudnn" not in extra and extra != "cuda",
                        extras=extra,  # the pip extra that installs it: jax[cuda12]
                        package="jax", ranged=True,
                    ))
        return out

    def pins(self, b, label=None):
        extra = b.extras
        read = self.spelling.read_label(label) if label else None
        cudnn = read.cudnn if read else None
        if cudnn:  # `+cuda11.cudnn86` asks for the cuDNN 8.6 wheel: its extra, where the release has one
            wanted = f"cuda{b.cuda_major}_cudnn{cudnn.replace('.', '')}"
            extra = wanted if wanted in b.row.pip_extras else extra
        return Pins(pip=(f"jax[{extra}]=={b.version}",))

    def wheel_groups(self, table, b):
        jax = table.exact("jax", b.version)
        pins = dict(jax[0].pins) if jax else {}
        extra = b.extras or f"cuda{b.cuda_major}"
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


def _extra_pins(m, version: str, meta: str | None, grouped: dict) -> dict[str, dict[str, str]]:
    """extra -> {distribution: release}: for each CUDA extra of the row, the newest release
    on the index that jax's Requires-Dist admits (what pip installs)."""
    if not meta:
        return {}
    row = next(r for r in PLUGIN.rows(m) if r.version == version)
    out = {}
    for extra in row.pip_extras:
        if any(s in extra for s in _CUDA_EXTRA_SKIP):
            continue
        pins = {}
        for name, spec in requires_of_extra(meta, extra).items():
            found = [v for v in w.released_versions(grouped.get(name, {})) if spec.contains(v)]
            exact = [s.version for s in spec if s.operator == "=="]
            if found or exact:  # an exact pin the index lacks stays: its wheels are elsewhere
                pins[name] = str(found[-1]) if found else exact[0]
        if pins:
            plugin = next((n for n in pins if n.endswith("-plugin")), None)
            if plugin:  # the plugin pulls its PJRT runtime at the same version
                pins.setdefault(plugin.replace("-plugin", "-pjrt"), pins[plugin])
            out[extra] = pins
    return out


def _extra_pins_guessed(m, version: str, grouped: dict) -> dict[str, dict[str, str]]:
    """jax has always pinned a jaxlib (and plugin) no newer than itself, of its own series."""
    row = next(r for r in PLUGIN.rows(m) if r.version == version)
    top = Version(version)

    def newest(name: str) -> str | None:
        found = [v for v in w.released_versions(grouped.get(name, {})) if v <= top and v.release[:2] == top.release[:2]]
        return str(found[-1]) if found else None

    out = {}
    for major in row.cuda_majors:
        pins = {n: v for n in ("jaxlib", f"jax-cuda{major}-plugin", f"jax-cuda{major}-pjrt") if (v := newest(n))}
        if pins:
            out[f"cuda{major}"] = pins
    return out


def requires_of_extra(metadata: str, extra: str) -> dict:
    """What `jax[extra]` asks of the other `jax*` distributions on Linux:
    {"jaxlib": SpecifierSet("<=0.4.37,>=0.4.36"), ...}. A pin with a local tag
    (`==0.4.10+cuda12.cudnn89`, wheels outside the index) becomes its public release."""
    out: dict[str, SpecifierSet] = {}
    for req in w.requires_dist(metadata):
        name = req.name.lower().replace("_", "-")
        if not name.startswith("jax") or name == "jax":
            continue
        if req.marker is not None and not req.marker.evaluate({**w.LINUX, "extra": extra}):
            continue
        pinned = w.pinned(req.specifier)
        spec = SpecifierSet(f"=={pinned.public}") if pinned is not None else req.specifier
        out[name] = out[name] & spec if name in out else spec
    return out


PLUGIN = Jax()
