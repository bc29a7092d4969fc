"""`envbuild matrix`: answers, JSON shape and one-line errors, through the real CLI."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from envbuild import frameworks, matrix
from envbuild.cli import main


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["matrix", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def _json(capsys, *argv: str) -> dict:
    code, out, err = _run(capsys, *argv, "--json")
    assert code == 0, err
    return json.loads(out)


def _error(capsys, *argv: str) -> str:
    code, out, err = _run(capsys, *argv)
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("envbuild: error: ")
    return lines[0]


def test_gpu_by_name(capsys):
    data = _json(capsys, "gpu", "A10G")
    assert data["gpu"]["compute_capability"] == "8.6" and data["gpu"]["secondary"] is True
    assert data["sm"] == "sm_86" and data["cuda_min"] == "11.1" and data["cuda_last"] is None
    assert data["matrix_version"] == matrix.load().version
    code, out, _ = _run(capsys, "gpu", "nvidia geforce rtx-3090")
    assert code == 0 and "GeForce RTX 3090: compute capability 8.6" in out


def test_gpu_by_compute_capability(capsys):
    data = _json(capsys, "gpu", "8.6")
    assert {"GeForce RTX 3090", "NVIDIA A10"} <= set(data["gpus"])
    old = _json(capsys, "gpu", "sm_37")
    assert old["cuda_last"] == "11.8"


def test_unknown_gpu_suggests(capsys):
    line = _error(capsys, "gpu", "A10X")
    assert "unknown GPU 'A10X'" in line and "did you mean" in line and "'A10G'" in line


def test_cuda_driver_and_architectures(capsys):
    data = _json(capsys, "cuda", "11.0")
    assert data["min_driver"]["driver"] == "450.36.06" and data["min_driver"]["minor_compat"] is False
    assert "80" in data["sms"] and "86" not in data["sms"]
    data = _json(capsys, "cuda", "12.4")
    assert data["min_driver"]["driver"] == "525.60.13" and data["min_driver"]["minor_compat"] is True
    code, out, _ = _run(capsys, "cuda", "13.0")
    assert code == 0 and "minimum driver: 580" in out and "sm_70" not in out and "sm_75" in out


def test_unknown_or_malformed_cuda(capsys):
    assert "did you mean" in _error(capsys, "cuda", "7.5")
    assert "malformed CUDA version '1x'" in _error(capsys, "cuda", "1x")


def test_driver(capsys):
    data = _json(capsys, "driver", "450.80.02")
    assert data["cuda"] == "11.8" and data["native_cuda"] == "11.0"
    assert _json(capsys, "driver", "570.124.06")["cuda"] == "12.9"
    assert "malformed driver version" in _error(capsys, "driver", "latest")


def _need(table: str):
    if not frameworks.get(table).rows(matrix.load()):
        pytest.skip(f"matrices/{table}.yaml is not in this tree")


def test_pytorch_conda_variants(capsys):
    _need("pytorch")
    data = _json(capsys, "pytorch", "1.6.0", "--installer", "conda")
    assert {r["cuda"] for r in data["rows"]} == {"9.2", "10.1", "10.2"}
    assert all(r["installer"] == "conda" and r["version"] == "1.6.0" for r in data["rows"])


def test_pytorch_local_version_selects_the_wheel(capsys):
    _need("pytorch")
    data = _json(capsys, "pytorch", "1.7.1+cu101")
    assert [(r["installer"], r["cuda"], r["package"]) for r in data["rows"]] == [("pip", "10.1", "+cu101")]


def test_unknown_pytorch_version_suggests(capsys):
    _need("pytorch")
    line = _error(capsys, "pytorch", "2.99")
    assert "unknown pytorch version '2.99'" in line and "did you mean" in line


def test_tensorflow_tested_config(capsys):
    _need("tensorflow")
    rows = _json(capsys, "tensorflow", "2.15.0")["rows"]
    assert rows and {r["cuda"] for r in rows} == {"12.2"}


def test_rapids_cuda_majors(capsys):
    _need("rapids")
    rows = _json(capsys, "rapids", "24.02")["rows"]
    assert {r["cuda_major"] for r in rows} == {11, 12}


def test_cupy_packages_for_a_version(capsys):
    _need("cupy")
    packages = {r["package"] for r in _json(capsys, "cupy", "13.3.0")["rows"]}
    assert {"cupy-cuda11x", "cupy-cuda12x"} <= packages


def test_images_filters(capsys):
    data = _json(capsys, "images", "--family", "rapids", "--cuda", "13")
    assert data["count"] == len(data["images"]) > 0
    assert all(i["cuda"].startswith("13") and "linux-aarch64" in i["platforms"] for i in data["images"])
    data = _json(capsys, "images", "--family", "cuda", "--cuda", "12.4", "--flavour", "devel")
    assert "nvidia/cuda:12.4.1-cudnn-devel-ubuntu22.04" in {i["ref"] for i in data["images"]}
    assert "did you mean 'pytorch'" in _error(capsys, "images", "--framework", "pytorhc")


def test_bad_input_is_one_line_without_traceback():
    for argv in (["gpu", "NOPE-GPU"], ["cuda"], ["nonsense"]):
        proc = subprocess.run([sys.executable, "-m", "envbuild", "matrix", *argv], capture_output=True, text=True)
        assert proc.returncode == 2, proc.stderr
        assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_a_reader_that_stops_early_is_not_an_error():
    """`envbuild matrix pytorch --json | head -1`: no traceback, exit 0."""

    proc = subprocess.Popen([sys.executable, "-m", "envbuild", "matrix", "pytorch", "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout.readline().strip() == b"{"
    proc.stdout.close()  # what `head -1` does once it has its line
    stderr = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 0, stderr
    assert "Traceback" not in stderr and stderr == ""


def test_gpu_inside_one_kind_of_host_says_so(capsys):
    code, out, _ = _run(capsys, "gpu", "Jetson Nano")
    assert code == 0
    assert "  part of: the integrated GPU of an Arm (aarch64) Jetson module; runs only linux-aarch64 builds\n" in out
    assert "part of" not in _run(capsys, "gpu", "A100")[1]


def test_driver_takes_the_branch_form_as_resolve_does(capsys):
    assert _json(capsys, "driver", "R580")["driver"] == "580"
    assert "expected something like 535.104.05 or R580" in _error(capsys, "driver", "R5x")
