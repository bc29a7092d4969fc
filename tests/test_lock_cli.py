"""`envbuild lock` on the command line: spec file -> real resolver -> real solve -> files."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from cli_support import in_process
from lock_channels import repodata_channels

SPEC = """\
name: train-a100
frameworks: {{pytorch: "{version}"}}
cuda: "{cuda}"
python: "{python}"
target: {{driver: "535.104.05", gpus: ["A100-80GB"], platform: linux-64}}
installer: conda
channels: [./channels/pytorch, ./channels/nvidia, ./channels/main]
"""


def envbuild(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return in_process(*args, cwd=cwd)


@pytest.fixture
def project(tmp_path) -> Path:
    repodata_channels(tmp_path / "channels")
    return tmp_path


def _spec(project: Path, version="2.1.2", cuda="12.1", python="3.10") -> Path:
    path = project / "spec.yaml"
    path.write_text(SPEC.format(version=version, cuda=cuda, python=python))
    return path


def test_lock_writes_the_gpu_lock_and_check_passes(project):
    _spec(project)
    done = envbuild("lock", "spec.yaml", "-o", "lock", cwd=project)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "pytorch 2.1.2 (py3.10_cuda12.1_cudnn8.9.2_0)" in done.stdout
    data = yaml.safe_load((project / "lock/conda-lock.yml").read_text())
    builds = {p["name"]: p["build"] for p in data["package"]}
    assert builds["torchvision"] == "py310_cu121" and builds["pytorch-cuda"] == "ha16c6d3_5"
    assert data["metadata"]["sources"] == ["spec.yaml"]  # the name only: the lock must not depend on where it is written

    check = envbuild("lock", "spec.yaml", "-o", "lock", "--check", cwd=project)
    assert check.returncode == 0 and "up to date" in check.stdout


def test_check_fails_after_the_spec_changes(project):
    spec = _spec(project)
    assert envbuild("lock", "spec.yaml", "-o", "lock", cwd=project).returncode == 0
    spec.write_text(spec.read_text().replace('driver: "535.104.05"', 'driver: "550.54.14"'))
    check = envbuild("lock", "spec.yaml", "-o", "lock", "--check", cwd=project)
    assert check.returncode == 1
    assert "the spec changed" in check.stdout


def test_unlockable_request_prints_the_conflict_and_writes_nothing(project):
    _spec(project, python="3.11")  # the channels hold no pytorch 2.1.2 build for Python 3.11
    done = envbuild("lock", "spec.yaml", "-o", "lock", "--json", cwd=project)
    assert done.returncode == 1, done.stdout + done.stderr
    out = json.loads(done.stdout)
    assert out["verdict"] == "conflict" and out["files"] == []
    assert out["conflicts"][0]["kind"] == "python_unsupported"
    assert out["conflicts"][0]["fixes"][0]["changes"] == {"python": "3.10"}
    assert not (project / "lock" / "conda-lock.yml").exists()
    assert "Traceback" not in done.stderr


def test_verbose_adds_the_solver_tree(project):
    _spec(project, python="3.11")
    quiet = envbuild("lock", "spec.yaml", "-o", "lock", cwd=project)
    loud = envbuild("lock", "spec.yaml", "-o", "lock", "--verbose", cwd=project)
    assert quiet.returncode == loud.returncode == 1
    assert "python_unsupported" in quiet.stdout and "nothing was written" in quiet.stdout
    assert "Cannot solve the request" in loud.stdout and "Cannot solve the request" not in quiet.stdout


def test_bad_channel_folder_is_one_line(project):
    spec = _spec(project)
    spec.write_text(spec.read_text().replace("./channels/main", "./channels/nope"))
    done = envbuild("lock", "spec.yaml", "-o", "lock", cwd=project)
    assert done.returncode == 2
    assert done.stderr.startswith("envbuild: error:") and "channels/nope" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_two_platforms_on_the_command_line(project):
    _spec(project)
    done = envbuild("lock", "spec.yaml", "-o", "lock", "--platform", "linux-64", "--platform", "linux-aarch64",
                    cwd=project)
    # each platform is locked from its own resolution: the matrices publish pytorch 2.1.2 for
    # conda on linux-64 only, so linux-aarch64 is refused before any solve, not a CPU lock
    assert done.returncode == 1, done.stdout + done.stderr
    assert "[platform_unsupported]" in done.stdout and "linux-aarch64" in done.stdout
    assert "nothing was written" in done.stdout and not (project / "lock").exists()
