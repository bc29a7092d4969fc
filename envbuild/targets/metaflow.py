"""Metaflow: a flow module whose step runs in the image on a GPU, through `@batch` or
`@kubernetes` (`scheduler.compute`; for a fleet's Kubernetes or Batch target, what that
target is), with `@resources` stating the same needs so that a `--with` override
elsewhere keeps them.

Every value is written as a Python literal (repr of a checked str or int); the only names
the module defines are the flow class, made of the job name, and its steps."""
from __future__ import annotations

from functools import partial

from envbuild.core import fields
from envbuild.targets.job import Job

KIND = "metaflow"
SUFFIX = ".py"
COMPUTE = ("batch", "kubernetes")
KEYS = {
    "compute": (partial(fields.choice, what="metaflow compute", choices=COMPUTE), "batch (default) or kubernetes"),
    "queue": (partial(fields.batch_queue, what="scheduler.queue"), "AWS Batch job queue (compute: batch)"),
    "namespace": (partial(fields.dns_label, what="scheduler.namespace"), "Kubernetes namespace (compute: kubernetes)"),
}
REQUIRED: tuple[str, ...] = ()
# the names the module imports or defines besides the flow class
MODULE_NAMES = ("subprocess", "FlowSpec", "resources", "step", *COMPUTE)


def adopt(scheduler: dict) -> dict:
    """A step for a target that another scheduler runs: @kubernetes in its namespace on a
    Kubernetes target, @batch on its job queue on an AWS Batch one (the values were
    checked when the fleet was read)."""
    if scheduler.get("kind") == "k8s":
        return {"compute": "kubernetes", **({"namespace": scheduler["namespace"]} if scheduler.get("namespace") else {})}
    if scheduler.get("kind") == "batch":
        return {"compute": "batch", **({"queue": scheduler["job_queue"]} if scheduler.get("job_queue") else {})}
    return {}


def flow_class(job: Job, where: str = "--name") -> str:
    name = "".join(part.capitalize() for part in job.name.split("-")) + "Flow"
    return fields.python_identifier(name, where, "the flow class", taken=MODULE_NAMES)


def render(job: Job) -> str:
    cfg = job.scheduler
    compute = cfg.get("compute", "batch")
    if compute not in COMPUTE:
        raise ValueError(f"unchecked metaflow compute {compute!r}")
    flow = flow_class(job)
    memory = int(job.memory_mib)  # Metaflow counts memory in MB
    args = [f"image={job.image!r}", f"gpu={int(job.gpus)!r}", f"memory={memory!r}"]
    if compute == "batch" and cfg.get("queue"):
        args.append(f"queue={cfg['queue']!r}")
    if compute == "kubernetes" and cfg.get("namespace"):
        args.append(f"namespace={cfg['namespace']!r}")
    runs = "\n".join(f"        subprocess.run({argv!r}, check=True)" for argv in job.steps())
    doc = f"Run {job.name} in {job.image} on a GPU (written by envbuild export metaflow)."
    return f'''{doc!r}
import subprocess

from metaflow import FlowSpec, {compute}, resources, step


class {flow}(FlowSpec):
    @{compute}({", ".join(args)})
    @resources(gpu={int(job.gpus)!r}, memory={memory!r})
    @step
    def start(self):
{runs}
        self.next(self.end)

    @step
    def end(self):
        pass


if __name__ == "__main__":
    {flow}()
'''
