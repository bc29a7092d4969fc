"""Flyte: a task that runs in the image with GPUs requested and, when the GPU has a
flytekit accelerator constant, pinned to that accelerator (an A100 MIG slice by
`A100.partitioned("<profile>")`, flytekit's own way to name a partition).

Every value is written as a Python literal (repr of a checked str or int); the task's
function name is the job name with `-` as `_`, checked to be a Python name."""
from __future__ import annotations

from functools import partial

from envbuild.core import fields
from envbuild.infra.errors import UserError
from envbuild.targets.job import Job

KIND = "flyte"
SUFFIX = ".py"
KEYS = {
    "project": (partial(fields.plain_name, what="scheduler.project"), "Flyte project"),
    "domain": (partial(fields.plain_name, what="scheduler.domain"), "Flyte domain"),
}
REQUIRED: tuple[str, ...] = ()
# GPU matrix name -> flytekit.extras.accelerators constant (flytekit's own names)
ACCELERATORS = {
    "NVIDIA T4": "T4", "NVIDIA V100": "V100", "NVIDIA A10G (AWS g5)": "A10G", "NVIDIA L4": "L4", "NVIDIA L40S": "L40S",
    "NVIDIA A100": "A100", "NVIDIA H100": "H100", "NVIDIA H200": "H200",
}
MIG_CAPABLE = ("A100", "A100_80GB")  # flytekit's accelerators with partitions (MultiInstanceGPUAccelerator)
# the names the module imports or defines besides the task
MODULE_NAMES = ("subprocess", "Resources", "task", *ACCELERATORS.values(), "A100_80GB")


def accelerator(job: Job) -> tuple[str, str | None] | None:
    """(flytekit constant, MIG partition or None), or None when flytekit has no constant."""
    row, model = job.gpu_row(), job.gpu_model()
    name = ACCELERATORS.get(row.name) or ACCELERATORS.get(model.name) if row else None
    target = job.target
    big = bool(row and (row.memory_gb or 0) >= 70)  # a board that states its memory (A100-80GB)
    if name == "A100" and target and (big or (target.gpu_memory_gib or 0) >= 70) and not target.mig:
        name = "A100_80GB"
    if name and target and target.mig:
        parent = "A100_80GB" if name == "A100" and (big or (target.gpu_memory_gib and "80" in str(target.gpu))) else name
        if parent not in MIG_CAPABLE:
            raise UserError(f"flytekit names MIG partitions only of the A100; {target.describe_gpu()} has none",
                            where=target.where, hint="export this target for k8s, or use a target without mig")
        return parent, target.mig
    return (name, None) if name else None


def render(job: Job) -> str:
    acc = accelerator(job)
    func = fields.python_identifier(job.name.replace("-", "_"), "--name", "the task name", taken=MODULE_NAMES)
    imports = "from flytekit import Resources, task"
    memory = fields.memory_text(job.memory_mib, binary_suffix=True)
    args = [f"container_image={job.image!r}", f"requests=Resources(gpu={str(job.gpus)!r}, mem={memory!r})",
            f"limits=Resources(gpu={str(job.gpus)!r})"]
    if acc:
        constant, partition = acc
        imports += f"\nfrom flytekit.extras.accelerators import {constant}"
        args.append(f"accelerator={constant}.partitioned({partition!r})" if partition else f"accelerator={constant}")
    doc = f"{job.name}: {job.image} as a Flyte task (written by envbuild export flyte)."
    return f'''{doc!r}
import subprocess

{imports}


@task({", ".join(args)})
def {func}() -> str:
    out = []
    for argv in {job.steps()!r}:
        out.append(subprocess.run(argv, check=True, capture_output=True, text=True).stdout)
    return "".join(out)
'''
