"""docs/tutorial.md runs as written: its ```sh blocks, in order, in one bash shell in an
empty folder, against the services scripts/services.sh starts (the registry on
127.0.0.1:5555 that holds the stand-in bases, the single-node Slurm with Podman) and the real
PyPI. The machine has no GPU, so `envbuild init --host` reads a recorded `nvidia-smi` of an
H100 node (tests/data/nvidia_smi) put first on PATH, as the page says. What the page
produces is then checked: the spec, the lock, the pushed image, the reports against their
schemas."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from conftest import _need
from test_ci_output import ROOT, validate

pytestmark = pytest.mark.docker
TUTORIAL = ROOT / "docs" / "tutorial.md"
SMI = ROOT / "tests" / "data" / "nvidia_smi"
REGISTRY = "127.0.0.1:5555"  # what the page names


def sh_blocks(text: str) -> list[str]:
    return re.findall(r"^```sh\n(.*?)^```$", text, re.S | re.M)


def recorded_nvidia_smi(folder: Path) -> Path:
    """An `nvidia-smi` that prints what a real H100 node's printed."""
    folder.mkdir()
    script = folder / "nvidia-smi"
    script.write_text("#!/bin/sh\n"
                      f'case "$*" in *--query-gpu*) cat {SMI / "h100_r580_query.csv"} ;; '
                      f'*) cat {SMI / "h100_r580_plain.txt"} ;; esac\n')
    script.chmod(0o755)
    return folder


def test_the_page_has_the_steps_it_promises():
    blocks = sh_blocks(TUTORIAL.read_text())
    text = "\n".join(blocks)
    for step in ("envbuild init --host", "envbuild resolve", "envbuild lock", "envbuild wheelhouse",
                 "envbuild image", "envbuild verify", "envbuild export", "sbatch"):
        assert step in text, step
    assert blocks[0].strip() == "envbuild init --host"


@pytest.fixture()
def shell_env(tmp_path, services) -> dict[str, str]:
    if services["ENVBUILD_TEST_REGISTRY"] != REGISTRY:
        pytest.fail(f"docs/tutorial.md pushes to {REGISTRY}; the services run the registry on "
                    f"{services['ENVBUILD_TEST_REGISTRY']}: start them with the default port")
    slurm_conf = _need("ENVBUILD_TEST_SLURM_CONF")
    envbuild = shutil.which("envbuild")
    assert envbuild, "the envbuild console script is on PATH (pip install -e .)"
    fake = recorded_nvidia_smi(tmp_path / "gpu-node-bin")
    keep = {k: v for k, v in os.environ.items() if not k.startswith("ENVBUILD_") or k.startswith("ENVBUILD_TEST")}
    return {**keep, "PATH": f"{fake}:{Path(envbuild).parent}:{os.environ['PATH']}", "SLURM_CONF": slurm_conf}


def test_the_tutorial_runs_as_written(tmp_path, shell_env, docker_client):
    work = tmp_path / "work"
    work.mkdir()
    script = "set -euo pipefail\n" + "".join(
        f"echo '>>> block {i}' >&2\n{block}" for i, block in enumerate(sh_blocks(TUTORIAL.read_text()), 1))
    done = subprocess.run(["bash", "-c", script], cwd=work, env=shell_env, capture_output=True, text=True,
                          timeout=1500)
    assert done.returncode == 0, f"the tutorial stopped:\n{done.stderr[-4000:]}\n{done.stdout[-2000:]}"
    assert "Traceback" not in done.stderr + done.stdout

    # 1: the spec is the host's, found without naming it
    spec = yaml.safe_load((work / "envbuild.yaml").read_text())
    assert spec["target"]["driver"] == "580.159.04" and spec["target"]["gpus"] == ["NVIDIA H100 80GB HBM3"]
    assert spec["frameworks"] == {"cupy": "13.*"}
    assert "envbuild: using spec ./envbuild.yaml (found in this folder)" in done.stderr
    # 2: a hashed pip lock from PyPI
    lock = (work / "lock" / "requirements.lock").read_text()
    assert re.search(r"^cupy-cuda11x==13\.\d+\.\d+ \\$", lock, re.M) and "--hash=sha256:" in lock
    # 3: the image, pushed, holds the locked CuPy (imported without a GPU: CuPy loads CUDA lazily)
    reference, by_digest = (work / "pushed.txt").read_text().split()
    assert reference.startswith(f"{REGISTRY}/tutorial/cupy:") and re.fullmatch(
        rf"{REGISTRY}/tutorial/cupy@sha256:[0-9a-f]{{64}}", by_digest)
    ran = subprocess.run(["docker", "run", "--rm", reference, "python3", "-c", "import cupy; print(cupy.__version__)"],
                         capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0 and ran.stdout.startswith("13."), ran.stderr
    assert "verdict: PASS (static checks only: the GPU checks did not run)" in done.stdout
    # 5: the fleet verification and the job's probe report, each as its schema says
    report = json.loads((work / "verify.json").read_text())
    validate("verify", report)
    assert report["verdict"] == "pass" and report["targets"][0]["state"] == "COMPLETED"
    out = (work / "job.out").read_text()
    probe_report = json.loads(out[out.index("{"):])
    validate("probe", probe_report)
    assert probe_report["verdict"] == "pass" and probe_report["mode"] == "static"
    assert any(c["name"] == "static.libraries" and "cupy" in c["details"] for c in probe_report["checks"])
    # piped, the polled Slurm state ends with its last state
    states = [line for line in done.stderr.splitlines() if line.startswith("verify: ")]
    assert states and states[-1] == "verify: 1/1 done (envbuild-verify-a100: completed)", states
    subprocess.run(["podman", "rmi", "--ignore", reference], capture_output=True, timeout=120)
