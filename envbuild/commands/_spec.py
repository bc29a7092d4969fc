"""The spec a command works on, read with what only the layers above specs know: the GPU
matrix that checks GPU names, and this machine's driver and GPUs for --host."""
from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import Any

from envbuild import matrix, spec
from envbuild.core.model import Spec
from envbuild.hostenv.hostinfo import detect
from envbuild.matrix.lookup import find_gpu, spec_gpu_check
from envbuild.spec import cli_args


def spec_from_args(args: argparse.Namespace, *, for_image: bool = False) -> Spec:
    """`for_image`: the command builds or runs an image, so the stack is judged as an image
    build whatever the spec names (model.Spec.for_image)."""
    spec = cli_args.spec_from_args(args, gpu_check=spec_gpu_check, host=host_target)
    return dataclasses.replace(spec, for_image=True) if for_image else spec


def load_spec(path: str | Path, *, for_image: bool = False) -> Spec:
    loaded = spec.load_spec(path, gpu_check=spec_gpu_check)
    return dataclasses.replace(loaded, for_image=True) if for_image else loaded


def host_target() -> tuple[str | None, list[str]]:
    """This machine's driver and its GPUs as a spec names them (no driver: EnvironmentProblem, exit 3)."""
    host = detect(require_driver=True, check_docker=False)
    return getattr(host, "driver", None), [gpu_text(g) for g in getattr(host, "gpus", None) or ()]


def gpu_text(gpu: Any) -> str:
    """A detected GPU as the spec names it: the name nvidia-smi printed when the GPU matrix
    knows it (keeps facts such as data-center class), else its compute capability."""
    if isinstance(gpu, (tuple, list)):  # (name, compute capability or None)
        name, cc = (list(gpu) + [None, None])[:2]
    else:
        name, cc = getattr(gpu, "name", gpu), getattr(gpu, "compute_capability", None)
    if name:
        if find_gpu(matrix.load(), str(name)) is not None or not cc:
            return str(name)
    return str(cc)
