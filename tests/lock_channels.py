"""Local conda channels for the lock tests, built on disk.

`repodata_channels(root)` writes repodata-only channels from tests/data/lock_channels.yaml
(records shaped like the real pytorch / nvidia / main / conda-forge channels, and a
conda-forge channel holding only the split CuPy packages).
`archive_channel(root)` builds real, tiny `.tar.bz2` packages and indexes them with
`rattler.index.index_fs`, so a lock made from it can be installed with `rattler.install`.
"""
from __future__ import annotations

import hashlib
import io
import json
import tarfile
from pathlib import Path

import yaml

DATA = Path(__file__).parent / "data" / "lock_channels.yaml"
ARCH = {"linux-64": ("x86_64", "linux"), "linux-aarch64": ("aarch64", "linux"), "noarch": (None, None)}


def _record(row: dict, subdir: str) -> tuple[str, dict]:
    file_name = f"{row['n']}-{row['v']}-{row['b']}.tar.bz2"
    digest = hashlib.sha256(f"{subdir}/{file_name}".encode()).hexdigest()
    record = {
        "name": row["n"], "version": str(row["v"]), "build": str(row["b"]), "build_number": row.get("bn", 0),
        "depends": list(row.get("d", [])), "subdir": subdir, "md5": digest[:32], "sha256": digest,
        "size": 1024, "timestamp": row.get("t", 1600000000000), "license": "BSD-3-Clause",
    }
    if row.get("c"):
        record["constrains"] = list(row["c"])
    if row.get("tf"):
        record["track_features"] = row["tf"]
    if subdir == "noarch":
        record["noarch"] = row.get("noarch", "generic")
    return file_name, record


def write_channel(folder: Path, subdirs: dict[str, list[dict]]) -> Path:
    for subdir in {"noarch", *subdirs}:
        packages = dict(_record(row, subdir) for row in subdirs.get(subdir, []))
        (folder / subdir).mkdir(parents=True, exist_ok=True)
        (folder / subdir / "repodata.json").write_text(json.dumps(
            {"info": {"subdir": subdir}, "packages": packages, "packages.conda": {}, "repodata_version": 1}, indent=1))
    return folder


def repodata_channels(root: Path) -> dict[str, Path]:
    """{channel name: folder} for pytorch, nvidia, main, conda-forge, cupy-conda-forge."""
    data = yaml.safe_load(DATA.read_text())
    return {name: write_channel(root / name, subdirs) for name, subdirs in data.items()}


# --- a channel with real package archives ---------------------------------------------

# name, version, build, subdir, depends, constrains
ARCHIVE_PACKAGES = [
    ("pytorch", "2.1.2", "py3.10_cuda12.1_cudnn8.9.2_0", "linux-64",
     ["python >=3.10,<3.11.0a0", "pytorch-cuda >=12.1,<12.2", "pytorch-mutex 1.0 cuda"], []),
    ("pytorch", "2.1.2", "py3.10_cpu_0", "linux-64", ["python >=3.10,<3.11.0a0", "pytorch-mutex 1.0 cpu"], []),
    ("pytorch-cuda", "12.1", "ha16c6d3_5", "linux-64", ["cuda-cudart >=12.1,<12.2"], []),
    ("cuda-cudart", "12.1.105", "0", "linux-64", ["cuda-version >=12.1,<12.2.0a0"], []),
    ("python", "3.10.13", "h955ad1f_0", "linux-64", [], []),
    ("pytorch-mutex", "1.0", "cuda", "noarch", [], []),
    ("pytorch-mutex", "1.0", "cpu", "noarch", [], []),
    ("cuda-version", "12.1", "h1d6eff3_3", "noarch", [], ["__cuda >=12", "cudatoolkit 12.1|12.1.*"]),
]


def _add(tar: tarfile.TarFile, name: str, data: bytes, mode: int = 0o644) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mtime = 1700000000
    info.mode = mode
    tar.addfile(info, io.BytesIO(data))


PLACEHOLDER = "/opt/anaconda1anaconda2anaconda3"  # conda-build's prefix placeholder


def build_package(folder: Path, name: str, version: str, build: str, subdir: str,
                  depends: list[str], constrains: list[str], files: dict[str, str] | None = None,
                  links: dict[str, str] | None = None, scripts: dict[str, str] | None = None) -> Path:
    """A `.tar.bz2` conda package holding info/index.json, info/paths.json, info/files and
    one file, share/envbuild-test/<name>.txt, plus `files` (prefix-relative path -> text),
    `links` (prefix-relative path -> symlink target) and `scripts` (prefix-relative path ->
    executable text holding PLACEHOLDER, which the installer replaces with the prefix, as
    conda-build records for entry points)."""
    arch, platform = ARCH[subdir]
    payload_path = f"share/envbuild-test/{name}.txt"
    scripts = scripts or {}
    contents = {payload_path: f"{name} {version} {build}\n", **(files or {}), **scripts}
    links = links or {}
    index = {"name": name, "version": version, "build": build, "build_number": 0, "depends": depends,
             "constrains": constrains, "subdir": subdir, "arch": arch, "platform": platform,
             "license": "BSD-3-Clause", "timestamp": 1700000000000}
    if subdir == "noarch":
        index["noarch"] = "generic"
    entries = [{"_path": path, "path_type": "hardlink", "sha256": hashlib.sha256(text.encode()).hexdigest(),
                "size_in_bytes": len(text.encode()),
                **({"prefix_placeholder": PLACEHOLDER, "file_mode": "text"} if path in scripts else {})}
               for path, text in contents.items()]
    entries += [{"_path": path, "path_type": "softlink"} for path in links]
    paths = {"paths": sorted(entries, key=lambda e: e["_path"]), "paths_version": 1}
    target = folder / subdir / f"{name}-{version}-{build}.tar.bz2"
    target.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(target, "w:bz2") as tar:
        _add(tar, "info/index.json", json.dumps(index, indent=2).encode())
        _add(tar, "info/paths.json", json.dumps(paths, indent=2).encode())
        _add(tar, "info/files", "".join(f"{p}\n" for p in sorted([*contents, *links])).encode())
        for path, text in sorted(contents.items()):
            _add(tar, path, text.encode(), 0o755 if path in scripts else 0o644)
        for path, link_target in sorted(links.items()):
            info = tarfile.TarInfo(path)
            info.type, info.linkname, info.mtime, info.mode = tarfile.SYMTYPE, link_target, 1700000000, 0o777
            tar.addfile(info)
    return target


# PyTorch 2.4.1 for CUDA 12.4 in the pattern the pytorch and nvidia channels use (build
# strings py3.11_cuda12.4_cudnn9.1.0_0 / py3.11_cpu_0, the pytorch-cuda -> cuda-cudart ->
# cuda-version chain that ties it to the variant; the hash parts of build strings are made
# up), with the CPU twin a lock must refuse. The packages carry just enough to be real on an image: `python` is a
# venv over the base image's /usr/bin/python3 (so `python3` in the environment imports
# what the environment holds), and `pytorch` a `torch` module whose version.py states its
# version and CUDA variant the way torch's own does.
_TORCH_SITE = "lib/python3.11/site-packages/torch"


def _torch_files(cuda: str | None) -> dict[str, str]:
    return {f"{_TORCH_SITE}/__init__.py": "from torch import version\n__version__ = version.__version__\n",
            f"{_TORCH_SITE}/version.py": "from typing import Optional\n\n__version__ = '2.4.1'\n"
                                         f"cuda: Optional[str] = {cuda!r}\n"}


PYTORCH_CU124_PACKAGES = [
    ("pytorch", "2.4.1", "py3.11_cuda12.4_cudnn9.1.0_0", "linux-64",
     ["python >=3.11,<3.12.0a0", "pytorch-cuda >=12.4,<12.5", "pytorch-mutex 1.0 cuda"], [], _torch_files("12.4")),
    ("pytorch", "2.4.1", "py3.11_cpu_0", "linux-64", ["python >=3.11,<3.12.0a0", "pytorch-mutex 1.0 cpu"], [],
     _torch_files(None)),
    ("torchvision", "0.19.1", "py311_cu124", "linux-64",
     ["python >=3.11,<3.12.0a0", "pytorch 2.4.1", "pytorch-cuda 12.4.*", "pytorch-mutex 1.0 cuda"], []),
    ("torchaudio", "2.4.1", "py311_cu124", "linux-64",
     ["python >=3.11,<3.12.0a0", "pytorch 2.4.1", "pytorch-cuda 12.4.*", "pytorch-mutex 1.0 cuda"], []),
    ("pytorch-cuda", "12.4", "hc786d27_7", "linux-64", ["cuda-cudart >=12.4,<12.5"], []),
    ("cuda-cudart", "12.4.127", "0", "linux-64", ["cuda-version >=12.4,<12.5.0a0"], []),
    ("python", "3.11.9", "h955ad1f_0", "linux-64", [], [],
     {"pyvenv.cfg": "home = /usr/bin\ninclude-system-site-packages = false\nversion = 3.11\n",
      "lib/python3.11/site-packages/README.txt": "site-packages of the environment\n"},
     {"bin/python3": "/usr/bin/python3", "bin/python": "python3"}),
    ("pytorch-mutex", "1.0", "cuda", "noarch", [], []),
    ("pytorch-mutex", "1.0", "cpu", "noarch", [], []),
    ("cuda-version", "12.4", "h3060b56_3", "noarch", [], ["__cuda >=12", "cudatoolkit 12.4|12.4.*"]),
]

# A package with an entry point whose shebang is the prefix placeholder, as conda-build
# writes console scripts: installed, the script must name the environment's python.
TORCH_CHECK = ("torch-check", "1.0", "0", "linux-64", ["python >=3.11,<3.12.0a0", "pytorch 2.4.1"], [], None, None,
               {"bin/torch-check": f"#!{PLACEHOLDER}/bin/python3\n"
                                   "import sys, torch\nprint(torch.__version__, torch.version.cuda, sys.prefix)\n"})


async def archive_channel(folder: Path, packages=ARCHIVE_PACKAGES) -> Path:
    """Build `packages` (default ARCHIVE_PACKAGES) into `folder` and index it (repodata.json per subdir)."""
    from rattler.index import index_fs

    for package in packages:
        build_package(folder, *package)
    (folder / "noarch").mkdir(parents=True, exist_ok=True)
    await index_fs(folder, write_zst=False, write_shards=False)
    return folder


# --- resolutions as the resolver would hand them to `lock` ----------------------------

def conda_resolution(channels, *, version="2.1.2", cuda="12.1", conda_specs=None, python="3.10",
                     driver="535.104.05", max_driver_cuda="12.2", platform="linux-64", os="ubuntu22.04",
                     cudnn=None, conda_packages=(), pip_packages=(), name="train"):
    """A Spec + ok Resolution for a conda-installed PyTorch GPU build."""
    from envbuild.core.model import (BaseImageChoice, FrameworkRequest, Resolution, ResolvedFramework,
                                ResolvedGpu, ResolvedStack, Spec)

    channels = tuple(str(c) for c in channels)
    if conda_specs is None:
        variant = f"cudatoolkit={cuda}" if cuda and cuda.split(".")[0] in ("9", "10") or cuda == "11.0" \
            else f"pytorch-cuda={cuda}"
        conda_specs = (f"pytorch=={version}=*cuda*", variant)
    spec = Spec(name=name, frameworks=(FrameworkRequest("pytorch", version),), cuda=cuda, python=python,
                driver=driver, gpus=("A100-80GB",), platform=platform, installer="conda", channels=channels,
                conda_packages=tuple(conda_packages), pip_packages=tuple(pip_packages), cudnn=cudnn)
    base = BaseImageChoice(ref=f"nvidia/cuda:{cuda}.0-runtime-{os}", family="cuda", flavour="runtime", cuda=cuda,
                           cudnn=None, python=None, os=os, source="test", why="test")
    stack = ResolvedStack(
        frameworks=(ResolvedFramework("pytorch", version, "conda", cuda, conda_specs=tuple(conda_specs)),),
        cuda=cuda, cudnn=cudnn, python=python, driver=driver, max_driver_cuda=max_driver_cuda,
        gpus=(ResolvedGpu("NVIDIA A100-SXM4-80GB", "8.0", True),), platform=platform, installer="conda",
        channels=channels, base_image=base)
    return spec, Resolution(spec=spec, verdict="ok", resolved=stack, matrix_version="test-matrix-1")


def pip_resolution(index_url, *, requirement="torch==2.1.2+cu121", cuda="12.1", python="3.10",
                   pip_packages=(), platform="linux-64"):
    from envbuild.core.model import (FrameworkRequest, Resolution, ResolvedFramework, ResolvedStack, Spec)

    spec = Spec(name="pip-train", frameworks=(FrameworkRequest("pytorch", "2.1.2"),), cuda=cuda, python=python,
                driver="535.104.05", platform=platform, installer="pip", pip_packages=tuple(pip_packages))
    stack = ResolvedStack(
        frameworks=(ResolvedFramework("pytorch", "2.1.2", "pip", cuda, pip_requirements=(requirement,),
                                      pip_index_url=index_url),),
        cuda=cuda, cudnn=None, python=python, driver="535.104.05", max_driver_cuda="12.2", gpus=(),
        platform=platform, installer="pip", channels=(), base_image=None)
    return spec, Resolution(spec=spec, verdict="ok", resolved=stack, matrix_version="test-matrix-1")
