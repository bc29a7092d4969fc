"""Coiled: a software environment made from the image, and a GPU cluster on instance
types that carry the target's GPU (matrices/cloud_instances.yaml)."""
from __future__ import annotations

from envbuild.errors import UserError
from envbuild.targets.job import Job

KIND = "coiled"
SUFFIX = ".py"
KEYS = {
    "region": (str, "cloud region, e.g. us-east-1"),
    "workers": (int, "number of GPU workers (default 1)"),
    "workspace": (str, "Coiled workspace"),
}
REQUIRED: tuple[str, ...] = ()


def render(job: Job) -> str:
    cfg = job.scheduler
    types = job.instance_types()
    if job.target and not types:
        raise UserError(f"no cloud instance type carries {job.target.gpu} with {job.gpus} GPU(s)",
                        where=job.target.where, hint="matrices/cloud_instances.yaml lists T4, A10G, L4, V100, A100 and H100 instances")
    cluster = [f"name={job.name!r}", f"software={job.name!r}", f"n_workers={cfg.get('workers', 1)}"]
    if types:
        cluster.append(f"worker_vm_types={types[:3]!r}")
    else:
        cluster.append("worker_gpu=" + str(job.gpus))
    for key in ("region", "workspace"):
        if cfg.get(key):
            cluster.append(f"{key}={cfg[key]!r}")
    env_args = [f"name={job.name!r}", f"container={job.image!r}"]
    if cfg.get("workspace"):
        env_args.append(f"workspace={cfg['workspace']!r}")
    steps = ([job.probe_command()] if job.verify_first and job.command else []) + [job.main_command()]
    return f'''"""{job.name}: {job.image} on Coiled GPU workers (written by envbuild export coiled)."""
import subprocess

import coiled


def run_on_worker():
    for argv in {steps!r}:
        subprocess.run(argv, check=True)


if __name__ == "__main__":
    coiled.create_software_environment({", ".join(env_args)})
    cluster = coiled.Cluster({", ".join(cluster)})
    client = cluster.get_client()
    client.run(run_on_worker)
'''
