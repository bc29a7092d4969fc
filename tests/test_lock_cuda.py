"""The lock judges the CUDA it installs: NVIDIA's CUDA wheels held to the resolved release,
what a requirement moves and why, the installed runtime, ptxas and cuDNN checked against
the target driver, image labels that name the installed CUDA, and the probe comparing the
label with the runtime library in the image.

The rules are tested on the committed data (wheels.yaml's cuda-toolkit rows); the lock of
the bundled jax recipe, the labels of its image and the probe on NVIDIA's real runtime
wheel run against the real PyPI (`network`)."""
from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from envbuild import matrix
from envbuild.core import cuda_packages
from envbuild.core.model import ResolvedFramework
from envbuild.infra.paths import PROBE_FILE
from envbuild.lock.cuda_check import _Hold, _moved, _refusal, judge, toolkit_releases
from envbuild.resolver import resolve
from envbuild.spec import load_spec

ROOT = Path(__file__).resolve().parent.parent
M = matrix.load()
JAX = load_spec(ROOT / "recipes" / "jax.yaml")
# uv's explanation when the CUDA 12.4 wheels are asked of jax 0.4.38 (uv 0.13)
UV_NVCC = ("  × No solution found when resolving dependencies:\n  ╰─▶ Because jax-cuda12-plugin[with-cuda]==0.4.38 "
           "depends on nvidia-cuda-nvcc-cu12>=12.6.85 and nvidia-cuda-nvcc-cu12==12.4.*, we can conclude that\n"
           "      jax-cuda12-plugin[with-cuda]==0.4.38 cannot be used.\n")


def _stack(**changes):
    return dataclasses.replace(resolve(JAX).resolved, **changes)


def test_the_wheels_are_held_to_one_cuda_release():
    releases = dict(toolkit_releases(M, 12))
    assert "12.4" in releases and "12.7" not in releases  # NVIDIA published no CUDA 12.7
    held = _Hold(12, "12.4", "12.4", None).constraints(releases)
    # wheels versioned as the release are held to its minor, the other libraries to no newer
    # than that release's (a cuSPARSE newer than the nvJitLink it links fails to load)
    assert {"nvidia-cuda-runtime-cu12==12.4.*", "nvidia-cublas-cu12==12.4.*", "nvidia-nvjitlink-cu12==12.4.*",
            "nvidia-cusparse-cu12<=12.3.1.170", "nvidia-cufft-cu12<=11.2.1.3",
            "nvidia-cuda-nvcc-cu12==12.4.*"} <= set(held)
    assert _Hold(12, "12.4", None, "9.1").constraints(releases)[-1] == "nvidia-cudnn-cu12==9.1.*"
    assert not any("nvcc" in c for c in _Hold(12, "12.4", None, None).constraints(releases))


def test_a_refusal_names_the_requirement_and_what_it_admits():
    assert _refusal("nvidia-cuda-nvcc-cu12", UV_NVCC) == (
        "jax-cuda12-plugin[with-cuda]==0.4.38 depends on nvidia-cuda-nvcc-cu12>=12.6.85", ">=12.6.85")
    assert _refusal("nvidia-cuda-runtime-cu12", UV_NVCC) is None  # not named: not what failed
    mine = "Because you require nvidia-cusparse-cu12==12.5.10.65 and nvidia-cusparse-cu12<=12.3.1.170, we can conclude"
    assert _refusal("nvidia-cusparse-cu12", mine) == ("the spec asks for nvidia-cusparse-cu12==12.5.10.65", "==12.5.10.65")


def test_a_refused_wheel_moves_as_little_as_its_requirement_needs():
    releases = dict(toolkit_releases(M, 12))
    hold = _Hold(12, "12.4", "12.4", None)
    # ptxas alone, to the oldest minor the requirement admits
    assert _moved(hold, "nvidia-cuda-nvcc-cu12", ">=12.6.85", releases, set()) == dataclasses.replace(hold, ptxas="12.6")
    # a library takes the others along, to the nearest release whose wheel the requirement admits
    assert _moved(hold, "nvidia-cusparse-cu12", "==12.5.10.65", releases, set()).release == "12.9"
    assert _moved(hold, "nvidia-cusparse-cu12", "==9.9.9", releases, set()).release is None


def test_the_installed_cuda_is_judged_against_the_driver():
    stack = _stack()  # driver 550.54.15: CUDA 12.4 natively, 12.x through minor-version compatibility
    report = judge(M, stack, "linux-64", [("nvidia-cuda-runtime-cu12", "12.4.127"), ("nvidia-cuda-nvcc-cu12", "12.6.85"),
                                          ("nvidia-cudnn-cu12", "9.28.0.42")])
    assert report.installed == "12.4" and report.resolved == "12.4" and not report.conflicts
    ptxas = next(c for c in report.checks if c.link == "ptxas")
    assert ptxas.status == "warning" and ptxas.kind == "ptxas_newer_than_driver" and "serially" in ptxas.message
    assert ptxas.fixes[0].changes == {"driver": "560.28.03"}  # the driver released with CUDA 12.6
    newer = judge(M, stack, "linux-64", [("nvidia-cuda-runtime-cu12", "12.9.79")])
    assert newer.installed == "12.9" and [c.kind for c in newer.checks] == ["minor_version_compat"]
    old_driver = judge(M, _stack(driver="470.82.01"), "linux-64", [("nvidia-cuda-runtime-cu12", "12.4.127")])
    assert [c.kind for c in old_driver.conflicts] == ["driver_too_old"]


def test_a_release_that_needs_its_toolkit_driver_refuses_a_newer_ptxas():
    # jax before 0.4.8: the driver must be the one released with the installed CUDA (family_rules.yaml)
    old = ResolvedFramework("jax", "0.4.7", "pip", "12.0", pip_requirements=("jax[cuda12_pip]==0.4.7",))
    report = judge(M, _stack(frameworks=(old,), driver="525.60.13"), "linux-64", [("nvidia-cuda-nvcc-cu12", "12.1.105")])
    assert [c.kind for c in report.conflicts] == ["driver_too_old"]
    assert "no minor-version compatibility" in report.conflicts[0].message


def test_another_cudnn_major_is_a_conflict():
    report = judge(M, _stack(cudnn="8.9"), "linux-64", [("nvidia-cudnn-cu12", "9.1.0.70")])
    assert [c.kind for c in report.conflicts] == ["cudnn_mismatch"]
    assert not judge(M, _stack(cudnn="9.1"), "linux-64", [("nvidia-cudnn-cu12", "9.28.0.42")]).conflicts


def test_conda_records_say_the_installed_cuda_too():
    found = cuda_packages.components([("cuda-cudart", "12.4.127"), ("cuda-nvcc-tools", "12.4.131"), ("cudnn", "9.3.0.75")])
    assert [(c.role, c.minor) for c in found] == [("runtime", "12.4"), ("ptxas", "12.4"), ("cudnn", "9.3")]
    assert cuda_packages.installed_cuda([("cudatoolkit", "11.8.0")], None) == "11.8"
    assert cuda_packages.installed_cuda([("numpy", "2.0")], "12.1") == "12.1"  # nothing locked: the fallback


# --- against the real PyPI ------------------------------------------------------------------------
@pytest.fixture()
def pypi_only(monkeypatch):
    for key in [k for k in os.environ if k.startswith(("PIP_", "UV_"))]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)


def _envbuild(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "envbuild", *map(str, args)], capture_output=True, text=True,
                          timeout=600, cwd=cwd)


def _pins(lock_file: Path) -> dict[str, str]:
    return dict(re.findall(r"^([A-Za-z0-9._-]+)==(\S+)", lock_file.read_text(), flags=re.M))


@pytest.mark.network
def test_the_jax_recipe_locks_the_cuda_its_verdict_names(pypi_only, tmp_path):
    proc = _envbuild("lock", ROOT / "recipes" / "jax.yaml", "-o", tmp_path / "lock", "--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = json.loads(proc.stdout)
    report, = data["cuda"]
    assert report["resolved"] == report["installed"] == "12.4"
    pins = _pins(tmp_path / "lock" / "requirements.lock")
    release = dict(toolkit_releases(M, 12))["12.4"]
    # every CUDA library of the lock is the one of CUDA 12.4.1, as NVIDIA's metapackage pins them
    libraries = {n: v for n, v in pins.items() if n in release and "nvcc" not in n}
    assert {"nvidia-cuda-runtime-cu12", "nvidia-cublas-cu12", "nvidia-cusparse-cu12"} <= set(libraries)
    assert all(release[n] == v for n, v in libraries.items()), libraries
    # ptxas is the one jax's requirement forces, said with why and checked against the driver
    released, = report["released"]
    assert released["package"] == "nvidia-cuda-nvcc-cu12" and ">=12.6.85" in released["why"]
    assert pins["nvidia-cuda-nvcc-cu12"].startswith("12.6.")
    ptxas = next(c for c in report["checks"] if c["link"] == "ptxas")
    assert ptxas["status"] == "warning" and ptxas["kind"] == "ptxas_newer_than_driver"
    assert any("ptxas 12.6" in note for note in data["notes"])
    text = (tmp_path / "lock" / "requirements.lock").read_text()
    assert "# CUDA installed on linux-64: 12.4 (the resolved CUDA)" in text
    assert "# envbuild.spec_hash:" in text

    # the image's labels carry what the lock installs
    ctx = tmp_path / "context"
    made = _envbuild("dockerfile", ROOT / "recipes" / "jax.yaml", "--lock-dir", tmp_path / "lock", "-o", ctx)
    assert made.returncode == 0, made.stderr
    dockerfile = (ctx / "Dockerfile").read_text()
    assert 'io.envbuild.cuda="12.4"' in dockerfile and 'NVIDIA_REQUIRE_CUDA="cuda>=12.4 ' in dockerfile
    assert f'io.envbuild.installed.nvidia-cuda-nvcc-cu12="{pins["nvidia-cuda-nvcc-cu12"]}"' in dockerfile


@pytest.mark.network
def test_a_requirement_that_needs_newer_libraries_moves_them_together_and_says_so(pypi_only, tmp_path):
    spec = tmp_path / "jax-cusparse.yaml"
    spec.write_text(
        "name: jax-cusparse\nframeworks: {jax: '0.4.38'}\ncuda: '12.4'\ninstaller: pip\n"
        "target: {driver: '550.54.15', gpus: [H100], platform: linux-64}\n"
        # CUDA 12.9's cuSPARSE: the libraries it links against must come from 12.9 too
        "packages: {pip: ['nvidia-cusparse-cu12==12.5.10.65']}\n")
    proc = _envbuild("lock", spec, "-o", tmp_path / "lock", "--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report, = json.loads(proc.stdout)["cuda"]
    assert report["resolved"] == "12.4" and report["installed"] == "12.9"
    assert any(r["package"] == "nvidia-cusparse-cu12" and "the spec asks for" in r["why"] for r in report["released"])
    runtime = next(c for c in report["checks"] if c["link"] == "runtime")
    assert runtime["status"] == "warning" and runtime["kind"] == "minor_version_compat"
    pins = _pins(tmp_path / "lock" / "requirements.lock")
    release = dict(toolkit_releases(M, 12))["12.9"]
    assert pins["nvidia-cusparse-cu12"] == release["nvidia-cusparse-cu12"]
    assert pins["nvidia-nvjitlink-cu12"].startswith("12.9.")  # not 12.4's: cuSPARSE 12.5.10 links against it
    made = _envbuild("dockerfile", spec, "--lock-dir", tmp_path / "lock", "-o", tmp_path / "context")
    assert made.returncode == 0, made.stderr
    assert 'io.envbuild.cuda="12.9"' in (tmp_path / "context" / "Dockerfile").read_text()


@pytest.mark.network
def test_the_probe_compares_the_label_with_the_runtime_library(pypi_only, tmp_path):
    """NVIDIA's real runtime wheel in a venv: the probe (standalone, no GPU) asks its
    libcudart for the version and compares the image's CUDA label with it."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", venv], check=True, timeout=120)
    python = venv / "bin" / "python"
    subprocess.run([python, "-m", "pip", "install", "-q", "--index-url", "https://pypi.org/simple",
                    "nvidia-cuda-runtime-cu12==12.4.127"], check=True, timeout=300)
    probe = tmp_path / "probe.py"
    probe.write_bytes(PROBE_FILE.read_bytes())

    def labels_check(label: str) -> dict:
        env = {"PATH": "/usr/bin:/bin", "CUDA_VERSION": "12.9.1", "NVIDIA_REQUIRE_CUDA": f"cuda>={label}"}
        done = subprocess.run([python, probe, "--static", "--json", "--labels", json.dumps({"io.envbuild.cuda": label})],
                              capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
        return next(c for c in json.loads(done.stdout)["checks"] if c["name"] == "static.cuda_labels")

    right = labels_check("12.4")
    # the base image's CUDA_VERSION (12.9) is not what the environment loads: reported, not compared
    assert right["status"] == "pass" and right["data"]["libcudart"] == "12.4", right
    wrong = labels_check("12.9")
    assert wrong["status"] == "fail" and "libcudart 12.4" in wrong["details"] and "runtime library" in wrong["cause"]
