"""Kubernetes: a batch/v1 Job that asks the NVIDIA device plugin for GPUs.

Nodes are chosen by the labels GPU Feature Discovery puts on them (compute capability,
and `nvidia.com/gpu.product` when the fleet names it); the `nvidia.com/gpu` taint that
GPU node pools carry is tolerated. A MIG target asks for `nvidia.com/mig-<profile>`, the
resource the device plugin's `mixed` strategy exposes. The probe runs first as an init
container, so a pod whose image does not work on the node fails before the workload.
"""
from __future__ import annotations

from functools import partial

import yaml

from envbuild.core import fields
from envbuild.infra import atomic
from envbuild.targets import k8s_api
from envbuild.targets.job import Job

KIND = "k8s"
SUFFIX = ".yaml"
KEYS = {
    "namespace": (partial(fields.dns_label, what="scheduler.namespace"), "the namespace the Job is created in"),
    "node_selector": (fields.node_selector, "extra node labels, e.g. {nvidia.com/gpu.product: NVIDIA-A100-SXM4-80GB}"),
    "tolerations": (fields.tolerations, "extra tolerations, as in a pod spec"),
    "context": (partial(fields.text, what="scheduler.context"),
                "kube context `envbuild verify --fleet` submits with (default: the current one)"),
}
REQUIRED: tuple[str, ...] = ()
GPU_TAINT = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def manifest(job: Job) -> dict:
    cfg = job.scheduler
    target = job.target
    resource = f"nvidia.com/mig-{target.mig}" if target and target.mig else "nvidia.com/gpu"
    limits = {resource: str(job.gpus), "memory": fields.memory_text(job.memory_mib, binary_suffix=True)}  # quantities are strings
    selector: dict[str, str] = {}
    cc = job.compute_capability()
    if cc:
        major, minor = cc.split(".")
        selector.update({"nvidia.com/gpu.compute.major": major, "nvidia.com/gpu.compute.minor": minor})
    if target and target.mig:
        selector["nvidia.com/mig.strategy"] = "mixed"
    selector.update(cfg.get("node_selector") or {})
    pod: dict = {"restartPolicy": "Never", "tolerations": [GPU_TAINT] + list(cfg.get("tolerations") or [])}
    if selector:
        pod["nodeSelector"] = selector
    container = {"name": "main", "image": job.image, "command": job.main_command(),
                 "resources": {"limits": limits}}
    if len(job.steps()) > 1:
        pod["initContainers"] = [{"name": "envbuild-verify", "image": job.image, "command": job.probe_command(),
                                  "resources": {"limits": dict(limits)}}]
    pod["containers"] = [container]
    metadata = {"name": job.name, "labels": {"app.kubernetes.io/managed-by": "envbuild"}}
    if cfg.get("namespace"):
        metadata["namespace"] = cfg["namespace"]
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata,
            "spec": {"backoffLimit": 0, "activeDeadlineSeconds": job.time_limit_s,
                     "template": {"metadata": {"labels": {"app.kubernetes.io/managed-by": "envbuild"}}, "spec": pod}}}


def render(job: Job) -> str:
    return yaml.safe_dump(manifest(job), sort_keys=False)


def submit(jobs: list[Job], workdir, progress, *, timeout: float = 900, context: str | None = None,
           poll: float = 2.0) -> dict[str, dict]:
    """With a kube context, one Job per target through the API server: wait, read the pod's
    log, delete the Job. Without one, write the manifests and say how to apply them."""
    contexts = [context] + [j.scheduler.get("context") for j in jobs]
    chosen = k8s_api.context_to_use(next((c for c in contexts if c), None))
    if chosen is None:
        return _write_manifests(jobs, workdir, progress)
    return k8s_api.run_jobs([(job, manifest(job)) for job in jobs], chosen, workdir, progress, timeout=timeout, poll=poll)


def _write_manifests(jobs: list[Job], workdir, progress) -> dict[str, dict]:
    paths = []
    for job in jobs:
        path = workdir / f"{job.name}.yaml"
        atomic.write_text(path, render(job))
        paths.append(path)
    files = " ".join(f"-f {p}" for p in paths)
    progress.line(f"no kube context: wrote {len(paths)} manifest(s); apply them with `kubectl apply {files}`, "
             f"then read each report with `kubectl logs job/<name>`")
    return {job.name: {"status": "submitted-manually", "manifest": str(p)} for job, p in zip(jobs, paths)}
