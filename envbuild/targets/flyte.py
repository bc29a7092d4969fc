"""Flyte: a task that runs in the image with GPUs requested and, when the GPU has a
flytekit accelerator constant, pinned to that accelerator (MIG slices by partition)."""
from __future__ import annotations

from envbuild.targets.job import Job

KIND = "flyte"
SUFFIX = ".py"
KEYS = {
    "project": (str, "Flyte project"),
    "domain": (str, "Flyte domain"),
}
REQUIRED: tuple[str, ...] = ()
# GPU matrix name -> flytekit.extras.accelerators constant (flytekit's own names)
ACCELERATORS = {
    "NVIDIA T4": "T4", "NVIDIA V100": "V100", "NVIDIA A10G (AWS g5)": "A10G", "NVIDIA L4": "L4",
    "NVIDIA A100": "A100", "NVIDIA H100": "H100", "NVIDIA A10": "A10", "NVIDIA H200": "H200",
}


def accelerator(job: Job) -> str | None:
    row = job.gpu_row()
    name = ACCELERATORS.get(row.name) if row else None
    if name == "A100" and job.target and job.target.gpu_memory_gib and job.target.gpu_memory_gib >= 70 and not job.target.mig:
        name = "A100_80GB"
    if name and job.target and job.target.mig:
        parent = "A100_80GB" if job.target.gpu_memory_gib and "80" in str(job.target.gpu) else name
        name = f"{parent}.partition_{job.target.mig.replace('.', '_')}"
    return name


def render(job: Job) -> str:
    acc = accelerator(job)
    imports = "from flytekit import Resources, task"
    args = [f"container_image={job.image!r}", f"requests=Resources(gpu={str(job.gpus)!r}, mem={str(job.memory_gib) + 'Gi'!r})",
            f"limits=Resources(gpu={str(job.gpus)!r})"]
    if acc:
        imports += f"\nfrom flytekit.extras.accelerators import {acc.split('.')[0]}"
        args.append(f"accelerator={acc}")
    steps = ([job.probe_command()] if job.verify_first and job.command else []) + [job.main_command()]
    func = job.name.replace("-", "_")
    return f'''"""{job.name}: {job.image} as a Flyte task (written by envbuild export flyte)."""
import subprocess

{imports}


@task({", ".join(args)})
def {func}() -> str:
    out = []
    for argv in {steps!r}:
        out.append(subprocess.run(argv, check=True, capture_output=True, text=True).stdout)
    return "".join(out)
'''
