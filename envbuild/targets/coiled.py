"""Coiled: a software environment made from the image, and a GPU cluster on instance
types that carry the target's GPU (matrices/cloud_instances.yaml).

Every value is written as a Python literal (repr of a checked str, int or list of str)."""
from __future__ import annotations

from functools import partial

from envbuild.core import fields
from envbuild.infra.errors import UserError
from envbuild.targets.job import Job

KIND = "coiled"
SUFFIX = ".py"
MAX_WORKERS = 1000
KEYS = {
    "region": (partial(fields.cloud_region, what="scheduler.region"), "cloud region, e.g. us-east-1"),
    "workers": (partial(fields.count, what="scheduler.workers", maximum=MAX_WORKERS), "number of GPU workers (default 1)"),
    "workspace": (partial(fields.plain_name, what="scheduler.workspace"), "Coiled workspace"),
}
REQUIRED: tuple[str, ...] = ()


def _call(**kwargs) -> str:
    return ", ".join(f"{key}={value!r}" for key, value in kwargs.items())


def render(job: Job) -> str:
    cfg = job.scheduler
    types = job.instance_types()
    if job.target and not types:
        raise UserError(f"no cloud instance type carries {job.target.gpu} with {job.gpus} GPU(s)",
                        where=job.target.where, hint="matrices/cloud_instances.yaml lists T4, A10G, L4, V100, A100 and H100 instances")
    cluster = {"name": job.name, "software": job.name, "n_workers": int(cfg.get("workers", 1))}
    if types:
        cluster["worker_vm_types"] = list(types[:3])
    else:
        cluster["worker_gpu"] = int(job.gpus)
    environment = {"name": job.name, "container": job.image}
    for key in ("region", "workspace"):
        if cfg.get(key):
            cluster[key] = cfg[key]
    if cfg.get("workspace"):
        environment["workspace"] = cfg["workspace"]
    doc = f"{job.name}: {job.image} on Coiled GPU workers (written by envbuild export coiled)."
    return f'''{doc!r}
import subprocess

import coiled


def run_on_worker():
    for argv in {job.steps()!r}:
        subprocess.run(argv, check=True)


if __name__ == "__main__":
    coiled.create_software_environment({_call(**environment)})
    cluster = coiled.Cluster({_call(**cluster)})
    client = cluster.get_client()
    client.run(run_on_worker)
'''
