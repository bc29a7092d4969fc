"""Test material for fleet builds: the three-target fleet of a platform team (a V100
partition on an R520 driver, an A100 node pool, H100 MIG slices), a spec whose PyTorch no
single CUDA serves on all three, a local conda channel of real (tiny) PyTorch 2.5.1
archives for CUDA 11.8 and 12.4 (named and wired as the pytorch and nvidia channels'), and
the stand-in base under the two nvidia/cuda names the plan's stacks choose."""
from __future__ import annotations

import asyncio
from pathlib import Path

import yaml

from lock_channels import PYTORCH_CU124_PACKAGES, build_package

VERSION = "2.5.1"
CUDAS = {"11.8": ("11.8.89", "cuda-cudart >=11.8,<12.0"), "12.4": ("12.4.127", "cuda-cudart >=12.4,<12.5")}
# the bases the resolver chooses for the two stacks (matrices/base_images.yaml)
BASES = ("nvidia/cuda:12.4.1-cudnn-runtime-ubuntu22.04", "nvidia/cuda:11.8.0-cudnn8-runtime-ubuntu22.04")
_SITE = "lib/python3.11/site-packages/torch"


def _torch(cuda: str | None) -> dict[str, str]:
    return {f"{_SITE}/__init__.py": "from torch import version\n__version__ = version.__version__\n",
            f"{_SITE}/version.py": f"from typing import Optional\n\n__version__ = {VERSION!r}\ncuda: Optional[str] = {cuda!r}\n"}


def packages() -> list[tuple]:
    rows = [
        ("pytorch", VERSION, "py3.11_cpu_0", "linux-64", ["python >=3.11,<3.12.0a0", "pytorch-mutex 1.0 cpu"], [],
         _torch(None)),
        # the python venv over the base's python3, and the mutexes, as the PyTorch 2.4.1 channel has them
        *(row for row in PYTORCH_CU124_PACKAGES if row[0] in ("python", "pytorch-mutex")),
    ]
    for cuda, (cudart, dep) in CUDAS.items():
        tag = cuda.replace(".", "")
        rows += [
            ("pytorch", VERSION, f"py3.11_cuda{cuda}_cudnn9.1.0_0", "linux-64",
             ["python >=3.11,<3.12.0a0", f"pytorch-cuda >={cuda},<{cuda[:-1]}{int(cuda[-1]) + 1}",
              "pytorch-mutex 1.0 cuda"], [], _torch(cuda)),
            ("torchvision", "0.20.1", f"py311_cu{tag}", "linux-64",
             ["python >=3.11,<3.12.0a0", f"pytorch {VERSION}", f"pytorch-cuda {cuda}.*", "pytorch-mutex 1.0 cuda"], []),
            ("torchaudio", VERSION, f"py311_cu{tag}", "linux-64",
             ["python >=3.11,<3.12.0a0", f"pytorch {VERSION}", f"pytorch-cuda {cuda}.*", "pytorch-mutex 1.0 cuda"], []),
            ("pytorch-cuda", cuda, f"h{tag}_7", "linux-64", [dep], []),
            ("cuda-cudart", cudart, "0", "linux-64", [f"cuda-version >={cuda},<{cuda[:-1]}{int(cuda[-1]) + 1}.0a0"], []),
            ("cuda-version", cuda, f"h{tag}_3", "noarch", [], [f"__cuda >={cuda.split('.')[0]}",
                                                               f"cudatoolkit {cuda}|{cuda}.*"]),
        ]
    return rows


def channel(folder: Path) -> Path:
    from rattler.index import index_fs

    if not (folder / "linux-64" / "repodata.json").exists():
        for row in packages():
            build_package(folder, *row)
        (folder / "noarch").mkdir(parents=True, exist_ok=True)
        asyncio.run(index_fs(folder, write_zst=False, write_shards=False))
    return folder


FLEET = {"targets": {
    "v100": {"gpu": "V100", "driver": "520.61.05",
             "scheduler": {"kind": "slurm", "partition": "gpu", "gres_type": "v100", "runtime": "podman",
                           "mem": "500M", "time": "00:05:00", "runner_labels": ["self-hosted", "gpu-v100"]}},
    "a100": {"gpu": "A100", "driver": "550.54.15",
             "scheduler": {"kind": "slurm", "partition": "gpu", "gres_type": "a100", "runtime": "podman",
                           "mem": "500M", "time": "00:05:00", "runner_labels": ["self-hosted", "gpu-a100"]}},
    # MIG on an H100 needs CUDA 12: the stack the V100's driver forces does not serve it
    "h100-mig": {"gpu": "H100", "mig": "1g.10gb", "driver": "550.54.15",
                 "scheduler": {"kind": "slurm", "partition": "gpu", "gres_type": "a100", "runtime": "podman",
                               "mem": "500M", "time": "00:05:00", "runner_labels": ["self-hosted", "h100-mig"]}},
}}


def write_inputs(folder: Path, repository: str) -> tuple[Path, Path]:
    """spec.yaml and fleet.yaml in `folder` (the channel beside them)."""
    folder.mkdir(parents=True, exist_ok=True)
    chan = channel(folder / "channel")
    spec = {"name": "fleet-train", "frameworks": {"pytorch": None}, "python": "3.11", "installer": "conda",
            "channels": [chan.as_uri()], "image": {"repository": repository}}
    (folder / "spec.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    (folder / "fleet.yaml").write_text(yaml.safe_dump(FLEET, sort_keys=False))
    return folder / "spec.yaml", folder / "fleet.yaml"


def stand_in_bases(docker_client, base_image: str, mirror: str, names=BASES) -> None:
    """The stand-in base tagged and pushed as each of `names` under `mirror` (a registry path)."""
    image = docker_client.images.get(base_image)
    for name in names:
        repository, tag = name.rsplit(":", 1)
        image.tag(f"{mirror}/{repository}", tag)
        docker_client.images.push(f"{mirror}/{repository}", tag)
