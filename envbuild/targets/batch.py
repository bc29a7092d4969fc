"""AWS Batch: a RegisterJobDefinition request (the JSON `aws batch register-job-definition
--cli-input-json` takes). GPUs are a resource requirement; the compute environment behind
`job_queue` chooses the instance (the GPU's instance types are listed in the tags)."""
from __future__ import annotations

import json

from envbuild.targets.job import Job

KIND = "batch"
SUFFIX = ".json"
KEYS = {
    "job_queue": (str, "the job queue whose compute environment has the GPU instances"),
    "vcpus": (int, "vCPUs per job (default 4)"),
    "platform": (str, "EC2 (default) or EKS-backed queues: EC2"),
}
REQUIRED = ("job_queue",)


def request(job: Job) -> dict:
    cfg = job.scheduler
    tags = {"managed-by": "envbuild"}
    if cfg.get("job_queue"):
        tags["envbuild-job-queue"] = cfg["job_queue"]
    types = job.instance_types()
    if types:
        tags["envbuild-instance-types"] = ",".join(types)
    command = job.main_command()
    if job.verify_first and job.command:  # the probe first, in the same container
        command = ["/bin/sh", "-c", f"{job.shell(job.probe_command())} && exec {job.shell(list(job.command))}"]
    return {
        "jobDefinitionName": job.name,
        "type": "container",
        "platformCapabilities": ["EC2"],
        "containerProperties": {
            "image": job.image,
            "command": command,
            "resourceRequirements": [
                {"type": "GPU", "value": str(job.gpus)},
                {"type": "VCPU", "value": str(cfg.get("vcpus", 4))},
                {"type": "MEMORY", "value": str(job.memory_gib * 1024)},
            ],
            # The ECS GPU AMI's runtime reads these; the values envbuild images are built for.
            "environment": [{"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "compute,utility"}],
        },
        "retryStrategy": {"attempts": 1},
        "timeout": {"attemptDurationSeconds": max(60, job.time_seconds())},
        "tags": tags,
    }


def render(job: Job) -> str:
    return json.dumps(request(job), indent=2) + "\n"
