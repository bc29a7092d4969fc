"""The probe's parsers and judgements on real nvidia-smi output, failure texts and JUnit."""
from __future__ import annotations

import glob
import json
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from envbuild.infra.paths import PROBE_FILE
from envbuild.verify import probe
from envbuild.verify.junit import write_junit

DATA = Path(__file__).parent / "data" / "nvidia_smi"


def sample(name: str) -> str:
    return (DATA / name).read_text()


# --- nvidia-smi ---------------------------------------------------------------------------
def test_modern_query_with_compute_cap():
    gpus = probe.parse_smi_csv(sample("h100_r580_query.csv"))
    assert gpus == [{
        "index": 0, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-cb83bbc4-6ee1-d2d9-ba30-a0fbda7aa73b",
        "driver": "580.159.04", "memory_mib": 81559, "compute_capability": "9.0", "pci_bus_id": "00000000:00:06.0",
    }]


def test_plain_header_gives_driver_and_max_cuda():
    assert probe.parse_smi_header(sample("h100_r580_plain.txt")) == {"driver": "580.159.04", "max_cuda": "13.0"}
    assert probe.parse_smi_header(sample("rtx4000x2_r535_plain.txt")) == {"driver": "535.129.03", "max_cuda": "12.2"}
    assert probe.parse_smi_header(sample("a100_r470_q_head.txt")) == {"driver": "470.103.01", "max_cuda": "11.4"}
    assert probe.parse_smi_header("garbage") == {"driver": None, "max_cuda": None}


def test_invalid_field_message_is_recognised():
    assert probe.smi_invalid_field(sample("r470_compute_cap_invalid.txt")) == "compute_cap"
    assert probe.smi_invalid_field(sample("r580_invalid_field.txt")) == "bogus_field"
    assert probe.smi_invalid_field(sample("h100_r580_query.csv")) is None


def test_multi_gpu_query_without_compute_cap():
    fields = [f for f in probe.SMI_FIELDS if f != "compute_cap"]
    gpus = probe.parse_smi_csv(sample("a100x4_r470_query_no_cc.csv"), fields)
    assert [g["index"] for g in gpus] == [0, 1, 2, 3]
    assert {g["name"] for g in gpus} == {"NVIDIA A100-SXM4-80GB"}
    assert all(g["compute_capability"] is None and g["driver"] == "470.103.01" for g in gpus)
    assert len({g["uuid"] for g in gpus}) == 4


def test_csv_with_wrong_column_count_is_an_error():
    with pytest.raises(ValueError, match="unexpected nvidia-smi line"):
        probe.parse_smi_csv("0, NVIDIA H100, GPU-x\n")


class ReplayedSmi:
    """Replays recorded nvidia-smi outputs for the command lines the probe runs."""

    def __init__(self, old_driver: bool):
        self.old = old_driver
        self.calls: list[list[str]] = []

    def __call__(self, cmd, timeout=30):
        self.calls.append(cmd)
        if len(cmd) == 1:
            return 0, sample("a100_r470_q_head.txt" if self.old else "h100_r580_plain.txt"), ""
        if self.old and "compute_cap" in cmd[1]:
            return 2, sample("r470_compute_cap_invalid.txt"), ""
        return 0, sample("a100x4_r470_query_no_cc.csv" if self.old else "h100_r580_query.csv"), ""


def test_old_driver_query_falls_back_without_compute_cap(tmp_path):
    fake = tmp_path / "nvidia-smi"
    fake.write_text("")
    run = ReplayedSmi(old_driver=True)
    info = probe.query_nvidia_smi(run, binary=str(fake))
    assert info["ok"] and info["missing_fields"] == ["compute_cap"]
    assert "compute_cap" in run.calls[0][1] and "compute_cap" not in run.calls[1][1]
    assert info["driver"] == "470.103.01" and info["max_cuda"] == "11.4"
    assert len(info["gpus"]) == 4 and info["gpus"][0]["compute_capability"] is None


def test_modern_driver_needs_one_query(tmp_path):
    fake = tmp_path / "nvidia-smi"
    fake.write_text("")
    run = ReplayedSmi(old_driver=False)
    info = probe.query_nvidia_smi(run, binary=str(fake))
    assert info["ok"] and info["missing_fields"] == [] and len(run.calls) == 2
    assert info["gpus"][0]["compute_capability"] == "9.0" and info["max_cuda"] == "13.0"


def test_missing_nvidia_smi_is_reported_not_raised(tmp_path):
    info = probe.query_nvidia_smi(binary=None) if not probe.shutil.which("nvidia-smi") else {"ok": False, "error": "x"}
    assert info["ok"] is False and info["error"]


# --- failure signatures ---------------------------------------------------------------------
@pytest.mark.parametrize("text,name,code", [
    ("cupy.cuda.runtime.CUDARuntimeError: cudaErrorInsufficientDriver: CUDA driver version is insufficient "
     "for CUDA runtime version", "insufficient_driver", 35),
    ("RuntimeError: CUDA error: no kernel image is available for execution on the device", "no_kernel_image", 209),
    ("CUDA_ERROR_UNSUPPORTED_PTX_VERSION: the provided PTX was compiled with an unsupported toolchain.",
     "unsupported_ptx", 222),
    ("cudaErrorCompatNotSupportedOnDevice: forward compatibility was attempted on non supported HW",
     "compat_not_supported", 804),
    ("RuntimeError: CuPy failed to load libnvrtc.so.12: OSError: libnvrtc.so.12: cannot open shared object file: "
     "No such file or directory", "nvrtc_missing", None),
    ('cupy.cuda.compiler.CompileException: /usr/include/cuda_fp16.h(4): catastrophic error: cannot open source file '
     '"vector_types.h"', "nvrtc_headers_missing", None),
    ("nvidia-container-cli: requirement error: unsatisfied condition: cuda>=12.8, please update your driver",
     "requirement_unsatisfied", None),
    ('could not select device driver "" with capabilities: [[gpu]]', "no_gpu_runtime", None),
    ("UserWarning: NVIDIA H100 80GB HBM3 with CUDA capability sm_90 is not compatible with the current PyTorch "
     "installation.", "arch_not_in_build", None),
    ("cuInit returned error code 804", "compat_not_supported", 804),
])
def test_failure_signatures_are_named(text, name, code):
    sig = probe.recognise_failure(text, {"cuda": "12.4"})
    assert sig is not None and sig["name"] == name and sig["code"] == code
    assert sig["cause"] and sig["fix"]


def test_headers_fix_names_the_devel_flavour_and_the_package_for_that_cuda():
    sig = probe.recognise_failure('cannot open source file "vector_types.h"', {"cuda": "12.4"})
    assert "devel" in sig["fix"] and "cuda-cudart-dev-12-4" in sig["fix"]


def test_unknown_error_is_not_named():
    assert probe.recognise_failure("ValueError: something else entirely") is None


# --- driver vs CUDA -----------------------------------------------------------------------------
FLOORS = {"11": "450.80.02", "12": "525.60.13"}


@pytest.mark.parametrize("image,driver,max_cuda,compat,dc,status", [
    ("12.4", "550.54.15", "12.4", None, None, "pass"),
    ("12.2", "580.159.04", "13.0", None, None, "pass"),
    ("12.4", "535.104.05", "12.2", None, None, "warn"),  # minor-version compatibility
    ("12.4", "525.20.01", "12.0", None, None, "fail"),  # below the 12.x floor
    ("13.0", "535.104.05", "12.2", None, None, "fail"),  # different major: error 35
    ("12.4", "470.103.01", "11.4", "12.4", True, "warn"),  # forward compatibility on a data-center GPU
    ("12.4", "470.103.01", "11.4", "12.4", False, "fail"),  # ... on a GeForce: error 804
    ("10.2", "418.67", "10.1", None, None, "fail"),  # before 11: each minor needs its driver
    (None, "535.104.05", "12.2", None, None, "skip"),
    ("12.4", None, None, None, None, "fail"),  # no driver visible
])
def test_driver_vs_image_cuda(image, driver, max_cuda, compat, dc, status):
    got, details, cause, fix = probe.judge_driver_cuda(image, driver, max_cuda, FLOORS, compat, dc)
    assert got == status, details
    if status == "fail":
        assert cause and fix


def test_require_cuda_parsing():
    value = "cuda>=12.4 brand=tesla,driver>=470,driver<471 brand=unknown,driver>=470,driver<471 brand=tesla,driver>=535,driver<536"
    assert probe.parse_require_cuda(value) == ("12.4", [470, 535])
    assert probe.parse_require_cuda(None) == (None, [])


@pytest.mark.parametrize("archs,sm,status", [
    (["sm_80", "sm_86", "sm_90"], 90, "pass"),
    (["sm_80"], 86, "pass"),  # SASS is binary compatible within the major
    (["sm_70", "sm_80", "compute_80"], 90, "warn"),  # PTX JIT
    (["sm_50", "sm_60", "sm_70"], 90, "fail"),
    (["sm_90"], 80, "fail"),  # newer SASS never runs on an older GPU
])
def test_compiled_architectures_vs_gpu(archs, sm, status):
    assert probe.judge_archs(archs, sm)[0] == status


def test_peak_lookup_and_judgement():
    peaks = [{"gpu": "NVIDIA H100", "names": ["H100 80GB HBM3"], "memory_bandwidth_gbs": 3350}]
    assert probe.find_peak("NVIDIA H100 80GB HBM3", peaks)["gpu"] == "NVIDIA H100"
    assert probe.find_peak("NVIDIA H100 NVL", peaks)["gpu"] == "NVIDIA H100"
    assert probe.find_peak("NVIDIA H20", peaks) is None
    assert probe.judge_perf(3007.2, 3350, "GB/s", "copy")[0] == "pass"
    assert probe.judge_perf(1200.0, 3350, "GB/s", "copy")[0] == "warn"
    assert probe.judge_perf(1200.0, None, "GB/s", "copy")[0] == "pass"


def test_labels_become_expectations():
    exp = probe.expect_from_labels({"io.envbuild.gpus": "NVIDIA A100=8.0,NVIDIA L4=8.9",
                                    "io.envbuild.frameworks": "pytorch==2.1.2+cuda12.1 cupy==13.3.0+cuda12.4"})
    assert exp == {"sms": ["80", "89"], "frameworks": {"pytorch": {"version": "2.1.2", "cuda": "12.1"},
                                                      "cupy": {"version": "13.3.0", "cuda": "12.4"}}}


# --- the whole probe without a GPU, as a standalone file ------------------------------------------
def vermin(path: Path) -> subprocess.CompletedProcess:
    """vermin's verdict on `path` against Python 3.6. Two of its findings are wrong here and
    excluded: `.decode()` is called on bytes only (vermin takes it for Python 2's str), and
    `importlib.metadata` (3.8) is imported under `except ImportError`, which leaves the
    distributions' versions unknown on older Pythons."""
    return subprocess.run(["vermin", "--target=3.6-", "--violations", "--no-tips",
                           "--exclude", "str.decode", "--exclude", "importlib.metadata", str(path)],
                          capture_output=True, text=True, timeout=120)


def test_the_probe_needs_nothing_newer_than_python_3_6(tmp_path):
    done = vermin(PROBE_FILE)
    assert done.returncode == 0 and "Minimum required versions: 3." in done.stdout, done.stdout + done.stderr
    newer = tmp_path / "probe.py"  # the same file calling one 3.7 keyword argument is refused
    newer.write_text(PROBE_FILE.read_text() + "\nsubprocess.run(['true'], capture_output=True)\n")
    done = vermin(newer)
    assert done.returncode == 1 and "subprocess.run(capture_output)' requires !2, 3.7" in done.stdout, done.stdout


def test_standalone_static_run_needs_only_the_standard_library(tmp_path):
    copy = tmp_path / "probe.py"
    copy.write_bytes(PROBE_FILE.read_bytes())
    env = {"PATH": "/usr/bin:/bin", "CUDA_VERSION": "12.4.1", "NVIDIA_REQUIRE_CUDA": "cuda>=12.4"}
    proc = subprocess.run([sys.executable, "-S", "-I", str(copy), "--static", "--json", "--expect-cuda", "12.1"],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    report = json.loads(proc.stdout)
    by_name = {c["name"]: c for c in report["checks"]}
    assert by_name["static.cuda_labels"]["status"] == "fail"  # 12.4 in the image, 12.1 expected
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert not any(n.startswith("gpu.") for n in by_name)


def python_3_6() -> str | None:
    """A Python 3.6 interpreter: python3.6 on PATH, or one that pyenv installed."""
    for python in [shutil.which("python3.6"), *sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.6*/bin/python3.6")))]:
        if python and subprocess.run([python, "-c", "pass"], capture_output=True).returncode == 0:
            return python
    return None


def test_the_probe_runs_on_python_3_6_as_on_this_python(tmp_path):
    """Where a Python 3.6 is at hand (vermin above holds the rule everywhere): the probe,
    static and full without a GPU, and one library check's child process, report on 3.6
    what they report on the Python running the tests, but for the interpreter's own line."""
    old = python_3_6()
    if old is None:
        pytest.skip("no Python 3.6 here (python3.6 on PATH or under ~/.pyenv/versions)")
    copy = tmp_path / "probe.py"
    copy.write_bytes(PROBE_FILE.read_bytes())
    env = {"PATH": "/usr/bin:/bin", "CUDA_VERSION": "12.4.1", "NVIDIA_REQUIRE_CUDA": "cuda>=12.4"}

    def run(python: str, *argv: str, stdin: str = "") -> tuple[int, str]:
        done = subprocess.run([python, "-S", "-I", str(copy), *argv], input=stdin, capture_output=True, text=True,
                              env=env, cwd=tmp_path, timeout=120)
        assert "Traceback" not in done.stderr, done.stderr
        return done.returncode, re.sub(r'"time_s": [0-9.]+', '"time_s": 0', done.stdout)

    def version(python: str) -> str:
        return subprocess.run([python, "-c", "import platform; print(platform.python_version())"],
                              capture_output=True, text=True, check=True).stdout.strip()

    def report(python: str, *argv: str) -> tuple[int, str, list]:
        code, out = run(python, *argv)
        value = json.loads(out)
        assert value.pop("python") == version(python) and value.pop("elapsed_s") >= 0
        checks = [c for c in value.pop("checks") if c["name"] != "static.python"]
        return code, json.dumps(value), checks

    assert version(old).startswith("3.6.")
    for argv in (["--json", "--static", "--expect-cuda", "12.1"], ["--json", "--expect-sm", "90"]):
        assert report(old, *argv) == report(sys.executable, *argv)
    child = run(old, "--child", "cupy", stdin="{}")  # a library check's child: cupy is not there
    assert child[0] == 0 and "ENVBUILD-PROBE-RESULT:" in child[1] and child == run(sys.executable, "--child", "cupy", stdin="{}")


# --- JUnit ------------------------------------------------------------------------------------------
def test_junit_round_trip(tmp_path):
    checks = [
        probe.check("static.libraries", "pass", "ok"),
        probe.check("gpu.nvidia_smi", "fail", probe.NO_GPU, "no driver", "run with a GPU"),
        probe.check("torch.build", "skip", "torch is not installed", required=False),
        probe.check("perf.gemm_fp32", "fail", probe.NO_GPU, required=False),
        probe.check("env.CUDA_VISIBLE_DEVICES", "warn", "'-1' hides every GPU", "hidden", "unset it", required=False),
    ]
    path = tmp_path / "out.xml"
    write_junit(path, checks, elapsed_s=1.5)
    suite = ET.parse(path).getroot().find("testsuite")
    assert suite.get("tests") == "5" and suite.get("failures") == "1" and suite.get("skipped") == "1"
    cases = {c.get("name"): c for c in suite.findall("testcase")}
    assert set(cases) == {c["name"] for c in checks}
    assert cases["gpu.nvidia_smi"].find("failure").get("message") == "no driver"
    assert probe.NO_GPU in cases["gpu.nvidia_smi"].find("failure").text
    assert cases["torch.build"].find("skipped") is not None
    assert cases["perf.gemm_fp32"].find("failure") is None  # not required: reported, not failing CI
    assert cases["env.CUDA_VISIBLE_DEVICES"].find("system-out").text.startswith("WARN")
    assert [p.name for p in tmp_path.iterdir()] == ["out.xml"]  # no temp file left behind


def test_torch_arch_list_is_read_from_the_library_without_importing_torch(tmp_path, monkeypatch):
    # A torch package laid out like a CUDA wheel: the arch list that get_arch_list() returns
    # is a NUL-terminated string constant inside lib/libtorch_python.so.
    package = tmp_path / "torch"
    (package / "lib").mkdir(parents=True)
    (package / "__init__.py").write_text("raise ImportError('the probe must not import torch here')\n")
    (package / "version.py").write_text("__version__ = '2.11.0+cu130'\ncuda: Optional[str] = '13.0'\n")
    (package / "lib" / "libtorch_python.so").write_bytes(
        b"\x7fELF" + b"\x00" * 64 + b"-gencode\x00sm_75 sm_80 sm_86 sm_90 sm_100 sm_120\x00other\x00")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert probe._torch_arch_list_file() == ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"]
    ctx = {"static": True, "expect": {"sms": ["90"]}, "gpu_present": False}
    checks = {c["name"]: c for c in probe.child_torch(ctx)}
    assert checks["torch.archs"]["status"] == "pass", checks["torch.archs"]


def test_tensorflow_compute_entries_carry_sass_as_well_as_ptx():
    # TF 2.15's wheel lists `sm_50 sm_60 sm_70 sm_75 compute_80`: an A100 runs SASS, an H100 JITs PTX.
    archs = probe.tf_arch_list(["sm_50", "sm_60", "sm_70", "sm_75", "compute_80"])
    assert probe.judge_archs(archs, 80)[0] == "pass"
    assert probe.judge_archs(archs, 86)[0] == "pass"
    assert probe.judge_archs(archs, 90)[0] == "warn"
    assert probe.judge_archs(archs, 37)[0] == "fail"
