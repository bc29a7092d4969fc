"""`envbuild verify` end to end on the local Docker engine, on a host without a GPU.

A stand-in image (the Debian + python3 base under a real CUDA base name) gets envbuild's
labels, the CUDA environment variables of an nvidia/cuda image and the probe; verifying it
must pass every static check, fail every GPU check with "no GPU visible", exit non-zero,
and write JSON and JUnit that agree - never a traceback.
"""
from __future__ import annotations

import json
import subprocess
import uuid
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from browser import look_at
from cli_support import in_process
from envbuild.infra.paths import PROBE_FILE
from envbuild.verify.probe_api import NO_GPU

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.docker


def _build(client, base_image: str, labels: dict[str, str], require_cuda: str) -> str:
    dockerfile = f"""FROM {base_image}
ENV CUDA_VERSION=12.4.1 NVIDIA_REQUIRE_CUDA="{require_cuda}" \\
    NVIDIA_VISIBLE_DEVICES=all NVIDIA_DRIVER_CAPABILITIES=compute,utility
COPY probe.py /opt/envbuild/probe.py
LABEL {" ".join(f'{k}="{v}"' for k, v in labels.items())}
"""
    import image_support

    tag = f"envbuild-test/verify-{uuid.uuid4().hex[:10]}:latest"
    return image_support.build_image(client, tag, {"Dockerfile": dockerfile.encode(),
                                                   "probe.py": PROBE_FILE.read_bytes()})


@pytest.fixture
def built(docker_client, base_image):
    tags = []

    def make(labels, require_cuda="cuda>=12.4 brand=tesla,driver>=470,driver<471"):
        tags.append(_build(docker_client, base_image, labels, require_cuda))
        return tags[-1]

    yield make
    for tag in tags:
        docker_client.images.remove(tag, force=True)


def _verify(*args: str) -> subprocess.CompletedProcess:
    return in_process("verify", *args, cwd=ROOT)


def test_verify_without_gpu_reports_static_pass_and_gpu_fail(built, tmp_path, browser):
    image = built({"io.envbuild.cuda": "12.4", "io.envbuild.gpus": "NVIDIA A100=8.0",
                   "io.envbuild.probe": "/opt/envbuild/probe.py"})
    report_path, junit_path, page = tmp_path / "report.json", tmp_path / "junit.xml", tmp_path / "report.html"
    proc = _verify(image, "--json", str(report_path), "--junit", str(junit_path), "--html", str(page))
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    assert "verdict: FAIL" in proc.stdout

    report = json.loads(report_path.read_text())
    status = {c["name"]: c for c in report["checks"]}
    for name in ("static.python", "static.libraries", "static.cuda_labels", "env.NVIDIA_VISIBLE_DEVICES",
                 "env.NVIDIA_DRIVER_CAPABILITIES", "env.CUDA_VISIBLE_DEVICES"):
        assert status[name]["status"] == "pass", status[name]
    assert status["static.cuda_labels"]["data"] == {"label": "12.4", "NVIDIA_REQUIRE_CUDA": "12.4", "CUDA_VERSION": "12.4"}
    for name in ("gpu.nvidia_smi", "gpu.cuda_init", "gpu.driver_cuda"):
        assert status[name]["status"] == "fail" and status[name]["required"], status[name]
        assert NO_GPU in status[name]["details"]
        assert status[name]["fix"]
    for name in ("perf.d2d_bandwidth", "perf.gemm_fp32", "perf.gemm_tf32", "perf.gemm_bf16"):
        assert status[name]["status"] == "fail" and not status[name]["required"]
    for name in ("cupy.devices", "torch.build", "tensorflow.build", "jax.build", "cudf.build"):
        assert status[name]["status"] == "skip"  # not installed in the stand-in
    if "runner.gpu_request" in status:  # this Docker engine has no NVIDIA runtime
        assert "no_gpu_runtime" in status["runner.gpu_request"]["cause"]
    assert report["ok"] is False
    assert set(report["summary"]["failed_required"]) >= {"gpu.nvidia_smi", "gpu.cuda_init", "gpu.driver_cuda"}

    suite = ET.parse(junit_path).getroot().find("testsuite")
    cases = {c.get("name"): c for c in suite.findall("testcase")}
    assert set(cases) == set(status)
    failed = {n for n, c in cases.items() if c.find("failure") is not None}
    assert failed == set(report["summary"]["failed_required"])
    assert {n for n, c in cases.items() if c.find("skipped") is not None} == {n for n, c in status.items()
                                                                              if c["status"] == "skip"}
    assert NO_GPU in cases["gpu.nvidia_smi"].find("failure").text

    # the page shows each check of the JSON with its status and signature
    view = look_at(browser, page)
    rows = view.evaluate("[...document.querySelectorAll('#checks tbody tr')].map(r => [...r.cells].map(c => c.innerText.trim()))")
    assert [(r[0].split(" ", 1)[1], r[1].split(" ")[0], r[2] or None) for r in rows] == [
        (c["status"], c["name"], c["signature"]) for c in report["checks"]]


def test_verify_catches_labels_that_disagree_with_the_image(built, tmp_path):
    image = built({"io.envbuild.cuda": "12.1"})  # NVIDIA_REQUIRE_CUDA and CUDA_VERSION say 12.4
    proc = _verify(image, "--gpus", "0", "--json", "-", "--no-perf")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    report = json.loads(proc.stdout)
    labels = next(c for c in report["checks"] if c["name"] == "static.cuda_labels")
    assert labels["status"] == "fail" and "12.1" in labels["details"] and "12.4" in labels["details"]
    assert not any(c["name"].startswith("perf.") for c in report["checks"])


def test_verify_unknown_image_is_one_clear_line(docker_client, registry):
    proc = _verify(f"{registry}/envbuild-test/does-not-exist:{uuid.uuid4().hex[:8]}")
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("envbuild: error: IMAGE: image ") and "envbuild image" in lines[0]
