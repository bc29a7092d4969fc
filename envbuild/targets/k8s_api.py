"""Submitting the k8s Jobs of `envbuild verify --fleet` through a kube context.

The context is read from the kubeconfig files (KUBECONFIG, else ~/.kube/config) without the
`kubernetes` client, so a machine with no context gets the manifests and no import; with a
context, the client (the `envbuild[k8s]` extra) creates one Job per target, waits, reads the
pod's log and deletes the Job. An API server that cannot be reached or refuses a request
ends the run with exit 3 and the server's own message, after deleting the Jobs it created.
"""
from __future__ import annotations

import copy
import json
import os
import re
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import yaml

from envbuild.infra import atomic
from envbuild.infra.errors import EnvironmentProblem, UserError

REQUEST_TIMEOUT = (10, 60)  # seconds to connect, to read one answer


@dataclass(frozen=True)
class KubeContext:
    name: str
    server: str
    namespace: str
    kubeconfig: str  # the files, joined as KUBECONFIG joins them


def _kubeconfig_files() -> list[Path]:
    listed = os.environ.get("KUBECONFIG")
    paths = [Path(p).expanduser() for p in listed.split(os.pathsep) if p] if listed else [Path("~/.kube/config").expanduser()]
    return [p for p in paths if p.is_file()]


def context_to_use(requested: str | None) -> KubeContext | None:
    """The requested context, else the current one; None when no kubeconfig names one."""
    contexts: dict[str, dict] = {}
    clusters: dict[str, dict] = {}
    current = None
    files = _kubeconfig_files()
    for path in files:  # merged as kubectl does: the first file to set a name wins
        try:
            data = yaml.safe_load(path.read_text()) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise UserError(f"cannot read kubeconfig {path}: {str(exc).splitlines()[0]}", where="k8s",
                            hint="fix the file, or point KUBECONFIG elsewhere")
        for entry in data.get("contexts") or []:
            contexts.setdefault(entry.get("name"), entry.get("context") or {})
        for entry in data.get("clusters") or []:
            clusters.setdefault(entry.get("name"), entry.get("cluster") or {})
        current = current or data.get("current-context")
    name = requested or current
    if not name:
        return None
    if name not in contexts:
        where = ", ".join(str(p) for p in files) or "no kubeconfig (KUBECONFIG or ~/.kube/config)"
        raise UserError(f"no kube context {name!r} in {where}", where="--kube-context",
                        hint=f"one of: {', '.join(sorted(contexts))}" if contexts else "create one with `kubectl config set-context`")
    ctx = contexts[name]
    server = (clusters.get(ctx.get("cluster")) or {}).get("server") or "(no server)"
    return KubeContext(name=name, server=server, namespace=ctx.get("namespace") or "default",
                       kubeconfig=os.pathsep.join(str(p) for p in files))


def run_jobs(items, ctx: KubeContext, workdir: Path, progress, *, timeout: float, poll: float) -> dict[str, dict]:
    """items: (Job, manifest dict) pairs. Returns {job name: result} as slurm.submit does."""
    try:
        from kubernetes import client, config
    except ImportError:
        raise EnvironmentProblem(f"submitting Jobs to kube context {ctx.name!r} needs the kubernetes client", where="k8s",
                                 hint="pip install 'envbuild[k8s]'; or unset the context to get the manifests") from None
    settings = client.Configuration()
    try:
        # the files named explicitly: the client reads KUBECONFIG once, when it is imported
        config.load_kube_config(config_file=ctx.kubeconfig, context=ctx.name, client_configuration=settings)
    except config.ConfigException as exc:
        raise EnvironmentProblem(f"kube context {ctx.name!r} cannot be used: {exc}", where="k8s") from None
    settings.retries = 0  # a refused connection is an answer: no silent retries
    api = client.ApiClient(settings)
    batch, core = client.BatchV1Api(api), client.CoreV1Api(api)
    suffix = uuid.uuid4().hex[:5]  # a second run must not collide with Jobs the first left behind
    created: dict[str, tuple[str, str]] = {}  # job name -> (namespace, name in the cluster)
    submitted: dict[str, dict] = {}
    try:
        for job, body in items:
            body = copy.deepcopy(body)
            namespace = body["metadata"].get("namespace") or ctx.namespace
            body["metadata"].update(name=f"{job.name[:57].rstrip('-')}-{suffix}", namespace=namespace)
            _call(ctx, f"create Job {body['metadata']['name']} in namespace {namespace}",
                  batch.create_namespaced_job, namespace, body)
            created[job.name] = (namespace, body["metadata"]["name"])
            submitted[job.name] = body
        for key, body in submitted.items():  # what was submitted, once every Job was accepted
            atomic.write_text(workdir / f"{key}.yaml", yaml.safe_dump(body, sort_keys=False))
        results = _wait(batch, core, ctx, created, workdir, progress, timeout, poll)
    finally:
        for namespace, name in created.values():  # background: the pods go with the Job
            try:
                batch.delete_namespaced_job(name, namespace, propagation_policy="Background",
                                            _request_timeout=REQUEST_TIMEOUT)
            except Exception:  # noqa: BLE001 - the run's own outcome matters more than the clean-up
                progress.line(f"k8s: could not delete Job {namespace}/{name}; delete it with kubectl")
    return results


def _wait(batch, core, ctx, created, workdir, progress, timeout, poll) -> dict[str, dict]:
    states = {key: "PENDING" for key in created}
    deadline = time.monotonic() + timeout
    while True:
        for key, (namespace, name) in created.items():
            if states[key] in ("COMPLETE", "FAILED"):
                continue
            status = _call(ctx, f"read Job {namespace}/{name}", batch.read_namespaced_job_status, name, namespace).status
            states[key] = "COMPLETE" if status.succeeded else "FAILED" if status.failed else "RUNNING" if status.active else "PENDING"
            if states[key] in ("PENDING", "RUNNING") and _stuck(core, ctx, namespace, name):
                states[key] = "FAILED"  # the container cannot start: waiting would only end at the deadline
        progress.status(f"verify: {sum(s in ('COMPLETE', 'FAILED') for s in states.values())}/{len(states)} done ("
                 + ", ".join(f"{k}: {s.lower()}" for k, s in states.items()) + ")")
        if all(s in ("COMPLETE", "FAILED") for s in states.values()):
            break
        if time.monotonic() > deadline:
            states = {k: s if s in ("COMPLETE", "FAILED") else f"NOT DONE after {timeout:g} s" for k, s in states.items()}
            break
        time.sleep(poll)
    results = {}
    for key, (namespace, name) in created.items():
        log, why = _pod_output(core, ctx, namespace, name)
        results[key] = {"scheduler_job": f"{namespace}/{name}", "state": states[key], "printed": log,
                        "manifest": str(workdir / f"{key}.yaml"),
                        "output": f"kubectl logs -n {namespace} job/{name} (deleted after the run)",
                        "tail": "" if states[key] == "COMPLETE" else (log[-2000:] + why)}
    return results


# Reasons a pod's container waits that do not clear up on their own within a verify run.
STUCK = {"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "CreateContainerConfigError", "CreateContainerError"}


def _stuck(core, ctx, namespace: str, job_name: str) -> bool:
    pods = _call(ctx, f"list the pods of Job {namespace}/{job_name}", core.list_namespaced_pod, namespace,
                 label_selector=f"job-name={job_name}").items
    return any(c.state and c.state.waiting and c.state.waiting.reason in STUCK
               for p in pods for c in (p.status.init_container_statuses or []) + (p.status.container_statuses or []))


def _pod_output(core, ctx, namespace: str, job_name: str) -> tuple[str, str]:
    """The log of the Job's newest pod, and why its container is not running (image pull errors)."""
    pods = _call(ctx, f"list the pods of Job {namespace}/{job_name}", core.list_namespaced_pod, namespace,
                 label_selector=f"job-name={job_name}").items
    if not pods:
        return "", "\nno pod was created"
    pod = max(pods, key=lambda p: p.metadata.creation_timestamp or 0)
    why = ""
    for c in (pod.status.init_container_statuses or []) + (pod.status.container_statuses or []):
        waiting = c.state and c.state.waiting
        if waiting and waiting.reason:
            why += f"\n{c.name}: {waiting.reason}: {waiting.message or ''}".rstrip(": ")
    try:
        # the raw bytes: the client turns a log that is all JSON into a Python repr
        # (kubernetes-client/python#811), and 36.x returns str(bytes) (#2596)
        response = core.read_namespaced_pod_log(pod.metadata.name, namespace, container="main",
                                                _preload_content=False, _request_timeout=REQUEST_TIMEOUT)
        log = response.data.decode("utf-8", errors="replace")
    except Exception:  # noqa: BLE001 - a container that never started has no log; `why` says so
        log = ""
    return log, why


def _call(ctx: KubeContext, doing: str, method, *args, **kwargs):
    """One API request; what goes wrong becomes one exit-3 line naming the server."""
    import urllib3
    from kubernetes.client.exceptions import ApiException

    try:
        return method(*args, _request_timeout=REQUEST_TIMEOUT, **kwargs)
    except ApiException as exc:
        message = exc.reason or ""
        try:
            message = json.loads(exc.body).get("message") or message
        except (TypeError, ValueError, AttributeError):
            pass
        raise EnvironmentProblem(f"the API server at {ctx.server} (context {ctx.name}) refused to {doing}: "
                                 f"{exc.status} {exc.reason}: {message}", where="k8s") from None
    except (urllib3.exceptions.HTTPError, OSError) as exc:  # refused, TLS, timeouts: the server was not reached
        reason = getattr(exc, "reason", None) or exc
        match = re.search(r"\[Errno -?\d+\][^'\")]*|certificate verify failed[^'\")]*|timed out", str(reason))
        raise EnvironmentProblem(f"cannot reach the API server at {ctx.server} (context {ctx.name}): "
                                 f"{match.group(0).strip() if match else type(reason).__name__ + ': ' + str(reason)}",
                                 where="k8s", hint="check the cluster is up and the kubeconfig's server address") from None
