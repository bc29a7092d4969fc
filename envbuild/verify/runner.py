"""Run the probe in a container of the image, with the host's GPUs, and collect its report.

The probe file is copied into the container (so the report always has this envbuild's
format, whatever probe the image carries), the image's labels and what the caller expects
(`Expectations`, derived from a resolved spec) are passed in, and the matrices' peak
figures and driver floors as facts (`ProbeFacts`, read by the caller).
When Docker cannot give the container a GPU (no NVIDIA runtime or CDI on this host), the
probe still runs without one: its static checks pass or fail on their merits and its GPU
checks fail with "no GPU visible", so the verdict is never a silent pass.
"""
from __future__ import annotations

import io
import json
import tarfile
import time
from dataclasses import dataclass, field
from typing import Any

from envbuild.infra.errors import EnvironmentProblem, UserError
from envbuild.infra.paths import PROBE_FILE
from envbuild.output import say
from envbuild.verify import probe_api

PROBE_DIR = "/tmp/envbuild-probe"
# /bin/sh -c replaces the image's entrypoint (NVIDIA's prints a banner on stdout)
PROBE_COMMAND = 'exec "$(command -v python3 || command -v python)" %s/probe.py --json' % PROBE_DIR


@dataclass
class Report:
    image: str
    probe: dict[str, Any]  # the probe's JSON report
    gpu_request: str | None  # what was asked of Docker ("all", "2", "0,1") or None when run without GPU
    runner_checks: list[dict[str, Any]] = field(default_factory=list)
    elapsed_s: float = 0.0

    @property
    def checks(self) -> list[dict[str, Any]]:
        return with_signatures(self.runner_checks + list(self.probe.get("checks", [])))

    @property
    def failed_required(self) -> list[str]:
        return [c["name"] for c in self.checks if c["status"] == "fail" and c.get("required", True)]

    @property
    def ok(self) -> bool:
        return not self.failed_required and bool(self.probe.get("checks"))

    @property
    def exit_code(self) -> int:
        return 0 if self.ok else 1

    def properties(self) -> dict[str, str]:
        """What the checks ran on: image, GPUs, driver (JUnit testsuite properties)."""
        info = self.probe
        gpus = "; ".join(f"{g.get('name')} (cc {g.get('compute_capability') or '?'})" for g in info.get("gpus") or [])
        values = {"image": self.image, "gpu_request": self.gpu_request or "none", "gpus": gpus or "none",
                  "driver": info.get("driver") or "none", "driver_max_cuda": info.get("driver_max_cuda") or "none",
                  "image_cuda": info.get("image_cuda") or "none", "host": info.get("host") or "",
                  "probe_version": str(info.get("probe_version") or "")}
        return {k: str(v) for k, v in values.items() if v}

    def to_json(self) -> dict[str, Any]:
        counts = {s: sum(1 for c in self.checks if c["status"] == s) for s in probe_api.STATUSES}
        return {
            "verdict": "pass" if self.ok else "fail",
            "image": self.image,
            "gpu_request": self.gpu_request,
            "ok": self.ok,
            "summary": dict(counts, ok=self.ok, failed_required=self.failed_required),
            "elapsed_s": round(self.elapsed_s, 2),
            "checks": self.checks,
            "probe": {k: v for k, v in self.probe.items() if k not in ("checks", "verdict")},  # the verdict is above
        }


GENERIC_SIGNATURE = "check_failed"  # a failure no known signature explains


def with_signatures(checks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each check with a machine-readable `signature`: the recognised failure (see
    docs/verify.md) for a failed or warning check, null for a passing or skipped one.
    GPU checks that failed only because no GPU was passed in share the reason the
    runner found for that (e.g. `no_gpu_runtime`), else `no_device`."""
    run_level = next((c.get("data", {}).get("signature") or (probe_api.recognise_failure(
        " ".join(str(c.get(k) or "") for k in ("details", "cause"))) or {}).get("name")
        for c in checks if c["name"] == "runner.gpu_request" and c["status"] == "fail"), None)
    out = []
    for c in checks:
        signature = None
        if c["status"] in ("fail", "warn"):
            signature = (c.get("data") or {}).get("signature")
            if not signature:
                found = probe_api.recognise_failure(" ".join(str(c.get(k) or "") for k in ("details", "cause")))
                signature = found["name"] if found else None
            if not signature and probe_api.NO_GPU in str(c.get("details") or ""):
                signature = run_level or "no_device"
            if not signature and c["status"] == "fail":
                signature = GENERIC_SIGNATURE
        out.append(dict(c, signature=signature))
    return out


def run_verify(image: str, gpus: str | None = "all", expect: Expectations | None = None, *, facts: ProbeFacts,
               client=None, timeout: int = 900, perf: bool = True, progress=None, static: bool = False) -> Report:
    """Verify IMAGE on this host's GPUs.

    gpus: "all", a count ("2"), comma-separated device indices or UUIDs ("0,1"), or None to
    run without a GPU. expect: what the image should hold; None uses the image's envbuild
    labels only. facts: what the matrices tell the probe (`envbuild.pipeline.probe_facts()`).
    static: only the probe's checks that need no GPU (the container gets none).
    Raises EnvironmentProblem when the Docker engine is unreachable, UserError for an
    unknown image; every other problem becomes a failed check in the report.
    """
    started = time.time()
    docker_client = client or _docker_client()
    img = _get_image(docker_client, image)
    labels = dict(img.labels or {})
    payload = {"expect": expect.to_probe() if expect else {}, "facts": facts.to_probe(), "labels": labels}
    runner_checks: list[dict[str, Any]] = []
    if static:
        gpus = None
    request = _device_requests(gpus) if gpus else None
    result = _run_probe(docker_client, image, payload, request, timeout, perf, progress, static)
    if request is not None and result["start_error"]:
        sig = probe_api.recognise_failure(result["start_error"], {"cuda": labels.get("io.envbuild.cuda")})
        runner_checks.append(probe_api.check(
            "runner.gpu_request", "fail", "Docker could not start the container with GPUs: %s" %
            probe_api.first_line(result["start_error"]),
            "%s (%s)" % (sig["cause"], sig["name"]) if sig else "the container runtime refused the GPU request",
            sig["fix"] if sig else "check `docker run --gpus all IMAGE nvidia-smi` on this host"))
        result = _run_probe(docker_client, image, payload, None, timeout, perf, progress, static)
        gpus = None
    if result["start_error"]:
        raise EnvironmentProblem(f"could not run a container of {image}: {probe_api.first_line(result['start_error'])}")
    report_json = probe_api.report_from_output(result["stdout"])
    if report_json is None:
        tail = (result["stderr"] or result["stdout"] or "").strip()[-500:]
        no_python = "not found" in tail or result["exit"] == 127
        runner_checks.append(probe_api.check(
            "runner.probe", "fail", "the probe produced no report (exit %s): %s" % (result["exit"], tail or "no output"),
            "the image has no Python interpreter" if no_python else "the probe crashed",
            "install python3 in the image (the probe needs only its standard library)" if no_python
            else "run `python3 /opt/envbuild/probe.py` in the image to see the error"))
        report_json = {"checks": [], "summary": {"ok": False}}
    return Report(image=image, probe=report_json, gpu_request=str(gpus) if gpus else None,
                  runner_checks=runner_checks, elapsed_s=time.time() - started)


def _docker_client():
    try:
        import docker

        client = docker.from_env(timeout=120)
        client.ping()
        return client
    except Exception as exc:  # noqa: BLE001 - any failure to reach the engine is the same problem
        raise EnvironmentProblem(f"cannot reach the Docker engine: {exc}",
                                 hint="start dockerd (or set DOCKER_HOST) and retry") from None


def _get_image(client, image: str):
    import docker.errors

    try:
        return client.images.get(image)
    except docker.errors.ImageNotFound:
        pass
    try:
        return client.images.pull(image)
    except docker.errors.APIError as exc:
        raise UserError(f"image {image!r} is neither local nor pullable: {exc.explanation or exc}",
                        where="IMAGE", hint="build it with `envbuild image`, or check the name and registry login") from None


def _device_requests(gpus: str):
    import docker.types

    text = str(gpus).strip()
    if text == "all":
        return [docker.types.DeviceRequest(count=-1, capabilities=[["gpu"]])]
    if text.isdigit():
        return [docker.types.DeviceRequest(count=int(text), capabilities=[["gpu"]])]
    ids = [part.strip() for part in text.split(",") if part.strip()]
    if not ids:
        raise UserError(f"--gpus {gpus!r} names no GPU", where="--gpus", hint="use all, a count, or indices/UUIDs like 0,1")
    return [docker.types.DeviceRequest(device_ids=ids, capabilities=[["gpu"]])]


def _probe_archive() -> bytes:
    data = PROBE_FILE.read_bytes()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        folder = tarfile.TarInfo(PROBE_DIR.strip("/").split("/")[-1])
        folder.type, folder.mode = tarfile.DIRTYPE, 0o755
        tar.addfile(folder)
        info = tarfile.TarInfo(folder.name + "/probe.py")
        info.size, info.mode = len(data), 0o644
        tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _wait(container, timeout: int, progress) -> dict:
    """Wait for the probe's container, reporting the time it has run (its GPU children run
    in parallel inside; the slowest, often a framework import or the GEMMs, decides)."""
    import requests

    started = time.monotonic()
    task = progress.task("verification probe running", unit="s") if progress else None
    try:
        while True:
            left = timeout - (time.monotonic() - started)
            try:
                return container.wait(timeout=max(1, min(2, left)))
            except (requests.exceptions.ReadTimeout, requests.exceptions.ConnectionError):
                if left <= 2:
                    raise
                if task:
                    task.update(time.monotonic() - started)
    finally:
        if task:
            task.done()


def _run_probe(client, image: str, payload: dict, device_requests, timeout: int, perf: bool,
               progress=None, static: bool = False) -> dict[str, Any]:
    import docker.errors

    command = PROBE_COMMAND + ("" if perf else " --no-perf") + (" --static" if static else "")
    say.detail(f"running the probe in a container of {image} ({'with' if device_requests else 'without'} GPUs): "
               f"/bin/sh -c '{command}'")
    container = None
    try:
        container = client.containers.create(
            image, entrypoint=["/bin/sh", "-c"], command=[command], detach=True,
            environment={"ENVBUILD_PROBE_INPUT": json.dumps(payload)}, device_requests=device_requests)
        container.put_archive("/tmp", _probe_archive())
        container.start()
        status = _wait(container, timeout, progress)
        return {"start_error": None, "exit": status.get("StatusCode"),
                "stdout": container.logs(stdout=True, stderr=False).decode(errors="replace"),
                "stderr": container.logs(stdout=False, stderr=True).decode(errors="replace")}
    except docker.errors.APIError as exc:
        return {"start_error": str(exc.explanation or exc), "exit": None, "stdout": "", "stderr": ""}
    except Exception as exc:  # noqa: BLE001 - e.g. a read timeout while waiting
        return {"start_error": None, "exit": None, "stdout": "", "stderr": f"{type(exc).__name__}: {exc}"}
    finally:
        if container is not None:
            try:
                container.remove(force=True)
            except docker.errors.APIError:
                pass


# --- what the probe is told ----------------------------------------------------------------------
@dataclass(frozen=True)
class ProbeFacts:
    """What the probe cannot know and envbuild's matrices say (probe.py `facts`): peak
    figures, minor-version driver floors, data-center GPUs, GPU aliases. The caller reads
    them (`envbuild.pipeline.probe_facts`), so verification reads no table."""

    peaks: tuple[dict[str, Any], ...] = ()
    minor_compat_floors: dict[str, str] = field(default_factory=dict)  # CUDA major -> driver floor
    datacenter_gpus: tuple[str, ...] = ()
    gpu_aliases: dict[str, list[str]] = field(default_factory=dict)

    @classmethod
    def from_probe(cls, facts: dict[str, Any]) -> ProbeFacts:
        return cls(tuple(facts.get("peaks") or ()), dict(facts.get("minor_compat_floors") or {}),
                   tuple(facts.get("datacenter_gpus") or ()), dict(facts.get("gpu_aliases") or {}))

    def to_probe(self) -> dict[str, Any]:
        return {"peaks": list(self.peaks), "minor_compat_floors": dict(self.minor_compat_floors),
                "datacenter_gpus": list(self.datacenter_gpus), "gpu_aliases": dict(self.gpu_aliases)}


@dataclass(frozen=True)
class ExpectedFramework:
    name: str
    version: str
    cuda: str | None = None


@dataclass(frozen=True)
class Expectations:
    """What the probe should find in the image: the stack a spec resolved to. Derived from
    a Resolution by the caller (`envbuild.pipeline.expectations`)."""

    cuda: str | None = None
    sms: tuple[str, ...] = ()  # compiled architectures the GPUs need, "80", "90"
    gpus: tuple[str, ...] = ()
    frameworks: tuple[ExpectedFramework, ...] = ()

    def to_probe(self) -> dict[str, Any]:
        """The probe's `expect` input (probe.py: cuda, sms, gpus, frameworks{name: {version, cuda}})."""
        return {"cuda": self.cuda, "sms": list(self.sms), "gpus": list(self.gpus),
                "frameworks": {f.name: {"version": f.version, "cuda": f.cuda} for f in self.frameworks}}
