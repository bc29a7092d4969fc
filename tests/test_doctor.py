"""`envbuild doctor` and `hostinfo.detect()` on this host, whatever it has."""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from envbuild.hostenv import hostinfo
from envbuild.infra.errors import EnvironmentProblem

from cli_support import in_process

ROOT = Path(__file__).resolve().parent.parent
HAS_DRIVER = shutil.which("nvidia-smi") is not None


def _doctor(*args: str) -> subprocess.CompletedProcess:
    return in_process("doctor", *args, cwd=ROOT)


def test_doctor_json_describes_this_host():
    proc = _doctor("--json")
    assert "Traceback" not in proc.stderr
    found = json.loads(proc.stdout)
    assert set(found) >= {"driver", "max_cuda", "gpus", "docker", "nvidia_runtime", "cdi_specs", "can_run", "ok"}
    assert proc.returncode == (0 if found["ok"] else 1)
    if not HAS_DRIVER:
        assert found["driver"] is None and found["gpus"] == [] and found["ok"] is False
        assert "no NVIDIA driver" in found["can_run"]
    else:
        assert found["driver"] and all(g["compute_capability"] for g in found["gpus"])


def test_doctor_text_names_what_is_missing():
    proc = _doctor()
    assert "Traceback" not in proc.stderr
    assert "NVIDIA driver:" in proc.stdout and "Docker engine:" in proc.stdout
    if not HAS_DRIVER:
        assert "NVIDIA driver:    not found" in proc.stdout and "cannot run GPU containers" in proc.stdout


@pytest.mark.skipif(HAS_DRIVER, reason="this host has an NVIDIA driver")
def test_detect_without_driver_raises_a_clear_environment_problem():
    with pytest.raises(EnvironmentProblem, match="no NVIDIA driver found on this host") as info:
        hostinfo.detect(check_docker=False)
    assert info.value.exit_code == 3 and "--driver" in info.value.line()


def test_compute_capability_for_old_drivers_comes_from_the_gpu_table():
    # what an R470 nvidia-smi names its GPU, which it cannot give a compute capability for
    assert hostinfo._cc_from_matrix("NVIDIA A100-SXM4-80GB") == "8.0"
    assert hostinfo._cc_from_matrix("Tesla V100-SXM2-16GB") == "7.0"
    assert hostinfo._cc_from_matrix("no such gpu") is None


@pytest.mark.docker
def test_doctor_sees_the_docker_engine(docker_client):
    found = json.loads(_doctor("--json").stdout)
    assert found["docker"]["ok"] is True and found["docker"]["error"] is None
    runtimes = docker_client.info().get("Runtimes") or {}
    assert found["nvidia_runtime"] == ("nvidia" in runtimes)
