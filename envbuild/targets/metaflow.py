"""Metaflow: a flow module whose step runs in the image on a GPU, through `@batch` or
`@kubernetes` (`scheduler.compute`), with `@resources` stating the same needs so that a
`--with` override elsewhere keeps them."""
from __future__ import annotations

from envbuild.targets.job import Job

KIND = "metaflow"
SUFFIX = ".py"
KEYS = {
    "compute": (str, "batch (default) or kubernetes"),
    "queue": (str, "AWS Batch job queue (compute: batch)"),
    "namespace": (str, "Kubernetes namespace (compute: kubernetes)"),
}
REQUIRED: tuple[str, ...] = ()


def flow_class(job: Job) -> str:
    return "".join(part.capitalize() for part in job.name.split("-")) + "Flow"


def render(job: Job) -> str:
    cfg = job.scheduler
    compute = cfg.get("compute", "batch")
    if compute not in ("batch", "kubernetes"):
        from envbuild.errors import UserError

        raise UserError(f"unknown metaflow compute {compute!r}", where=job.target.where if job.target else "compute",
                        hint="batch or kubernetes")
    args = [f"image={job.image!r}", f"gpu={job.gpus}", f"memory={job.memory_gib * 1024}"]
    if compute == "batch" and cfg.get("queue"):
        args.append(f"queue={cfg['queue']!r}")
    if compute == "kubernetes" and cfg.get("namespace"):
        args.append(f"namespace={cfg['namespace']!r}")
    steps = ([job.probe_command()] if job.verify_first and job.command else []) + [job.main_command()]
    runs = "\n".join(f"        subprocess.run({argv!r}, check=True)" for argv in steps)
    return f'''"""Run {job.name} in {job.image} on a GPU (written by envbuild export metaflow)."""
import subprocess

from metaflow import FlowSpec, {compute}, resources, step


class {flow_class(job)}(FlowSpec):
    @{compute}({", ".join(args)})
    @resources(gpu={job.gpus}, memory={job.memory_gib * 1024})
    @step
    def start(self):
{runs}
        self.next(self.end)

    @step
    def end(self):
        pass


if __name__ == "__main__":
    {flow_class(job)}()
'''
