"""AWS Batch: a RegisterJobDefinition request (the JSON `aws batch register-job-definition
--cli-input-json` takes). GPUs are a resource requirement; the compute environment behind
`job_queue` chooses the instance (the GPU's instance types are listed in the tags).

`platform: EC2` (the default) writes `containerProperties` for ECS-backed queues;
`platform: EKS` writes `eksProperties` for queues on an Amazon EKS cluster, where the
container asks for `nvidia.com/gpu`. Fargate has no GPUs ("GPUs aren't available for jobs
that are running on Fargate resources", the Batch API's ResourceRequirement), so
`FARGATE` is refused."""
from __future__ import annotations

import json
from functools import partial

from envbuild.core import fields
from envbuild.infra.errors import UserError
from envbuild.targets.job import Job

KIND = "batch"
SUFFIX = ".json"
PLATFORMS = ("EC2", "EKS")
MAX_VCPUS = 1024


def platform(value, where: str) -> str:
    name = fields.text(value, where, "scheduler.platform", limit=32).upper()
    if name == "FARGATE":
        raise UserError("AWS Batch runs no GPU job on Fargate (Fargate has no GPUs)", where=where,
                        hint="use a queue of EC2 GPU instances (platform: EC2) or of an EKS cluster (platform: EKS)")
    if name not in PLATFORMS:
        raise UserError(f"unknown platform {value!r}", where=where, hint="EC2 (ECS-backed queues, the default) or EKS")
    return name


KEYS = {
    "job_queue": (partial(fields.batch_queue, what="scheduler.job_queue"),
                  "the job queue whose compute environment has the GPU instances"),
    "vcpus": (partial(fields.count, what="scheduler.vcpus", maximum=MAX_VCPUS), "vCPUs per job (default 4)"),
    "platform": (platform, "EC2 (default: ECS-backed queues) or EKS (queues on an EKS cluster); Fargate has no GPUs"),
}
REQUIRED = ("job_queue",)


def _command(job: Job) -> list[str]:
    if len(job.steps()) > 1:  # the probe first, in the same container
        return ["/bin/sh", "-c", f"{job.shell(job.probe_command())} && exec {job.shell(list(job.command))}"]
    return job.main_command()


def request(job: Job) -> dict:
    cfg = job.scheduler
    tags = {"managed-by": "envbuild"}
    if cfg.get("job_queue"):
        tags["envbuild-job-queue"] = cfg["job_queue"]
    types = job.instance_types()
    if types:
        tags["envbuild-instance-types"] = ",".join(types)
    vcpus = cfg.get("vcpus", 4)
    body = {"jobDefinitionName": job.name, "type": "container"}
    if cfg.get("platform", "EC2") == "EKS":
        # Kubernetes quantities; Batch wants whole MiB with an Mi suffix and limits equal to requests
        limits = {"nvidia.com/gpu": str(job.gpus), "cpu": str(vcpus), "memory": f"{job.memory_mib}Mi"}
        body["eksProperties"] = {"podProperties": {"containers": [
            {"name": "main", "image": job.image, "command": _command(job), "resources": {"limits": limits},
             "env": [{"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "compute,utility"}]}]}}
    else:
        body["platformCapabilities"] = ["EC2"]
        body["containerProperties"] = {
            "image": job.image,
            "command": _command(job),
            "resourceRequirements": [
                {"type": "GPU", "value": str(job.gpus)},
                {"type": "VCPU", "value": str(vcpus)},
                {"type": "MEMORY", "value": str(job.memory_mib)},
            ],
            # The ECS GPU AMI's runtime reads these; the values envbuild images are built for.
            "environment": [{"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "compute,utility"}],
        }
    body.update({"retryStrategy": {"attempts": 1},
                 "timeout": {"attemptDurationSeconds": max(60, job.time_limit_s)},
                 "tags": tags})
    return body


def render(job: Job) -> str:
    return json.dumps(request(job), indent=2) + "\n"
