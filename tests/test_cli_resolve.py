"""`envbuild resolve`: the flag contract, flags over a spec file, the --json schema,
exit codes (0 ok, 1 conflict, 2 bad input) and the human report."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from envbuild.cli import build_parser
from envbuild.core.model import (
    CONFLICT_KINDS,
    BaseImageChoice,
    Conflict,
    Fact,
    Fix,
    FrameworkRequest,
    Resolution,
    ResolvedFramework,
    ResolvedGpu,
    ResolvedStack,
    Spec,
    Warning,
)
from envbuild.commands._spec import spec_from_args  # as commands read flags: with the GPU matrix and --host
from envbuild.output.report import fix_flags, render
from envbuild.spec import load_spec

from cli_support import in_process

ROOT = Path(__file__).resolve().parent.parent
CONTRACT_EXAMPLE = [
    "--framework", "pytorch==1.7.1+cu101", "--gpu", "RTX 3090", "--driver", "450.80.02",
    "--python", "3.8", "--installer", "pip", "--json",
]
CLASSIC = """\
name: classic-conda-pytorch-1.6
frameworks: {pytorch: "1.6.0"}
cuda: "11.0.221"
python: "3.8"
installer: conda
"""


def _cli(*args: str) -> subprocess.CompletedProcess:
    return in_process("resolve", *args, cwd=ROOT)


def _spec(*argv: str) -> Spec:
    return spec_from_args(build_parser().parse_args(["resolve", *argv]))


# --- the flag contract (no resolver needed) ----------------------------------------------
def test_contract_example_parses_to_the_spec_it_says():
    spec = _spec(*CONTRACT_EXAMPLE)
    assert spec.frameworks == (FrameworkRequest("pytorch", "1.7.1+cu101"),)
    assert spec.gpus == ("RTX 3090",)
    assert (spec.driver, spec.python, spec.installer, spec.platform) == ("450.80.02", "3.8", "pip", "linux-64")
    assert spec.source is None


def test_every_flag_reaches_the_spec():
    spec = _spec(
        "--framework", "pytorch==2.1.2", "--framework", "cupy>=13", "--cuda", "12.1", "--cudnn", "8.9",
        "--driver", "535.104.05", "--gpu", "A100-80GB", "--gpu", "8.6", "--python", "3.10",
        "--installer", "conda", "--platform", "linux-aarch64", "--base", "nvidia/cuda:12.1.1-runtime-ubuntu22.04",
        "--strict",
    )
    assert spec.frameworks == (FrameworkRequest("pytorch", "==2.1.2"), FrameworkRequest("cupy", ">=13"))
    assert (spec.cuda, spec.cudnn, spec.driver, spec.python) == ("12.1", "8.9", "535.104.05", "3.10")
    assert spec.gpus == ("A100-80GB", "8.6")
    assert (spec.installer, spec.platform, spec.strict) == ("conda", "linux-aarch64", True)
    assert spec.base_image == "nvidia/cuda:12.1.1-runtime-ubuntu22.04"
    assert _spec("--framework", "jax", "--base", "rapids").base == "rapids"


def test_flags_override_the_file(tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_text(
        'frameworks: {torch: "1.6.0", cupy: ">=12"}\ncuda: "11.0.221"\npython: "3.8"\ninstaller: conda\n'
        'target: {driver: "450.80.02", gpus: [V100, A100]}\nbase_image: "nvidia/cuda:11.0.3-runtime-ubuntu20.04"\n'
    )
    spec = _spec(str(path), "--framework", "pytorch==1.7.1", "--cuda", "10.2", "--gpu", "T4", "--base", "pytorch")
    # pytorch replaced in place (whatever alias the file used); cupy kept
    assert spec.frameworks == (FrameworkRequest("pytorch", "==1.7.1"), FrameworkRequest("cupy", ">=12"))
    assert spec.cuda == "10.2"
    assert spec.gpus == ("T4",)  # --gpu replaces the list
    assert (spec.python, spec.installer, spec.driver) == ("3.8", "conda", "450.80.02")  # untouched
    assert (spec.base, spec.base_image) == ("pytorch", None)  # a family flag drops the file's image
    assert spec.source == str(path)
    # without flags the file is read as is
    assert load_spec(path) == _spec(str(path))


def test_same_framework_twice_on_the_command_line_is_refused():
    from envbuild.infra.errors import UserError

    with pytest.raises(UserError, match="pytorch is pinned twice"):
        _spec("--framework", "pytorch==2.1.0", "--framework", "torch==2.0.0")
    # the same pin twice is harmless
    assert len(_spec("--framework", "torch==2.1.0", "--framework", "pytorch==2.1.0").frameworks) == 1


def test_host_flag_reads_this_machine():
    import shutil

    from envbuild.infra.errors import EnvironmentProblem

    if shutil.which("nvidia-smi") is None:
        # No driver here: an environment problem (exit 3), said in one line.
        with pytest.raises(EnvironmentProblem, match="no NVIDIA driver"):
            _spec("--framework", "pytorch", "--host")
        result = _cli("--framework", "pytorch", "--host")
        assert result.returncode == 3 and result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
        return
    spec = _spec("--framework", "pytorch", "--host")
    assert spec.driver and spec.gpus
    # explicit flags win over what the host says
    assert _spec("--framework", "pytorch", "--host", "--driver", "450.80.02", "--gpu", "V100").gpus == ("V100",)
    assert _cli("--framework", "pytorch", "--host").returncode in (0, 1)


# --- the human report (a Resolution built here, no resolver needed) -----------------------
def _resolution() -> Resolution:
    spec = Spec(frameworks=(FrameworkRequest("pytorch", "1.6.0"),), cuda="11.0.221", installer="conda",
                driver="450.80.02", gpus=("RTX 3090",), source="classic.yaml")
    conflict = Conflict(
        kind="framework_cuda_mismatch",
        message="pytorch 1.6.0 on conda is built only for cudatoolkit 9.2, 10.1, 10.2; you asked for 11.0.221.",
        facts=(Fact("pytorch 1.6.0 conda variants: cudatoolkit 9.2, 10.1, 10.2", "pytorch.org previous versions"),),
        fixes=(
            Fix("use cudatoolkit 10.2", {"cuda": "10.2"}),
            Fix("use pytorch 1.7.1, built for cudatoolkit 11.0", {"frameworks.pytorch": "1.7.1"}),
            Fix("install the pip wheel", {"installer": "pip", "cuda": None}),
            Fix("a fourth fix is never shown", {"cuda": "9.2"}),
        ),
    )
    stack = ResolvedStack(
        frameworks=(ResolvedFramework("pytorch", "1.6.0", "conda", "10.2", conda_specs=("pytorch==1.6.0", "cudatoolkit=10.2"),
                                      archs=("sm_37", "sm_50", "sm_60", "sm_70", "sm_75", "compute_75")),),
        cuda="10.2", cudnn=None, python="3.8", driver="450.80.02", max_driver_cuda="11.0",
        gpus=(ResolvedGpu("NVIDIA GeForce RTX 3090", "8.6", False),), platform="linux-64", installer="conda",
        channels=("pytorch",), base_image=BaseImageChoice("nvidia/cuda:10.2-runtime-ubuntu18.04", "cuda", "runtime",
                                                          "10.2", None, None, "ubuntu18.04", "hub", "conda brings the toolkit"),
    )
    warning = Warning("ptx_jit", "RTX 3090 (8.6) runs pytorch 1.6.0 only through PTX JIT", ())
    return Resolution(spec, "conflict", stack, (conflict,), (warning,), "abc123")


def test_report_puts_conflicts_first_with_at_most_three_fixes():
    text = render(_resolution())
    lines = text.splitlines()
    assert lines[0].startswith("CONFLICT [framework_cuda_mismatch] pytorch 1.6.0 on conda")
    assert "because pytorch 1.6.0 conda variants" in lines[1] and "pytorch.org previous versions" in lines[1]
    assert "fix 1: use cudatoolkit 10.2  [--cuda 10.2]" in text
    assert "fix 2: use pytorch 1.7.1, built for cudatoolkit 11.0  [--framework pytorch==1.7.1]" in text
    assert "fix 3:" in text and "fix 4" not in text and "never shown" not in text
    assert text.index("CONFLICT") < text.index("Resolved stack") < text.index("Checks") < text.index("ptx_jit:")
    assert "CONFLICT  framework build -> CUDA  see above" in text
    assert "ok        CUDA -> driver           driver 450.80.02 runs CUDA <= 11.0" in text
    assert "ok        GPU -> kernels           NVIDIA GeForce RTX 3090 (8.6)" in text
    assert "sm_37..sm_75 + compute_75 (PTX)" in text
    assert "driver 450.80.02 runs CUDA <= 11.0" in text
    assert lines[-1] == "verdict: conflict (1 conflict, 1 warning) for classic.yaml"
    assert "\033[" not in text


def test_report_says_what_was_not_checked():
    from dataclasses import replace

    resolution = _resolution()
    bare = replace(resolution, spec=replace(resolution.spec, driver=None, gpus=()))
    text = render(bare)
    assert "skipped   CUDA -> driver           not checked: no target driver (give --driver or --host)" in text
    assert "skipped   GPU -> kernels           not checked: no target GPU (give --gpu or --host)" in text


def test_report_colour_only_when_asked():
    assert "\033[31mCONFLICT\033[0m" in render(_resolution(), colour=True)


def test_fix_flags_are_command_line_flags():
    assert fix_flags(Fix("x", {"gpus": ["RTX 3090"], "driver": "525.60.13"})) == "--gpu 'RTX 3090' --driver 525.60.13"
    assert fix_flags(Fix("x", {"frameworks.cupy": ">=13"})) == "--framework 'cupy>=13'"


# --- the command end to end (real resolver and matrices) ----------------------------------
JSON_KEYS = {"verdict", "judged_for", "spec_hash", "matrix_version", "resolved", "conflicts", "unchecked", "checks",
             "warnings"}


def _check_json_shape(data: dict) -> None:
    assert set(data) == JSON_KEYS
    assert data["verdict"] in ("ok", "unverified", "conflict") and data["judged_for"] in ("host", "image")
    assert len(data["spec_hash"]) == 64 and data["matrix_version"]
    for conflict in data["conflicts"]:
        assert set(conflict) == {"kind", "message", "facts", "fixes"}
        assert conflict["kind"] in CONFLICT_KINDS and conflict["message"]
        for fact in conflict["facts"]:
            assert set(fact) == {"text", "source", "inferred", "secondary"} and fact["source"]
        for fix in conflict["fixes"]:
            assert set(fix) == {"description", "changes"}
    for warning in data["warnings"]:
        assert set(warning) == {"kind", "message", "facts", "fixes"}
    for item in data["unchecked"]:
        assert set(item) == {"links", "message", "nearest"} and item["links"] and item["message"]
    for check in data["checks"]:
        assert set(check) == {"link", "label", "status", "detail"}
        assert check["status"] in ("ok", "conflict", "unchecked", "skipped")
    # every conflict is the failure of a checked link: the check lines never all say ok
    assert any(c["status"] == "conflict" for c in data["checks"]) == bool(data["conflicts"])
    # and every link left unchecked has its line, which never says ok
    unchecked = {link for item in data["unchecked"] for link in item["links"]}
    assert {c["link"] for c in data["checks"] if c["status"] == "unchecked"} == unchecked - {
        c["link"] for c in data["checks"] if c["status"] in ("conflict", "skipped")}
    if data["verdict"] == "ok":
        assert not data["conflicts"] and not data["unchecked"] and data["resolved"]
    elif data["verdict"] == "unverified":
        assert not data["conflicts"] and data["unchecked"] and data["resolved"]
    else:
        assert data["conflicts"]
    if data["resolved"] is not None:
        assert {"frameworks", "cuda", "python", "driver", "gpus", "platform", "installer", "base_image"} <= set(data["resolved"])


def test_contract_example_end_to_end():
    # torch 1.7.1+cu101 has no kernels for the RTX 3090 (sm_86 needs CUDA >= 11.1 builds).
    result = _cli(*CONTRACT_EXAMPLE)
    assert result.returncode == 1, result.stderr
    data = json.loads(result.stdout)
    _check_json_shape(data)
    assert data["verdict"] == "conflict"
    assert "gpu_arch_unsupported" in {c["kind"] for c in data["conflicts"]}


def test_classic_conflict_and_its_flag_fix(tmp_path):
    path = tmp_path / "classic.yaml"
    path.write_text(CLASSIC)
    result = _cli(str(path), "--json")
    assert result.returncode == 1, result.stderr
    data = json.loads(result.stdout)
    _check_json_shape(data)
    assert [c["kind"] for c in data["conflicts"]] == ["framework_cuda_mismatch"]
    # the same file with a flag override resolves
    fixed = _cli(str(path), "--cuda", "10.2", "--json")
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    fixed_data = json.loads(fixed.stdout)
    _check_json_shape(fixed_data)
    assert fixed_data["resolved"]["cuda"] == "10.2"
    assert fixed_data["spec_hash"] != data["spec_hash"]


def test_json_is_exactly_to_json(tmp_path):
    from envbuild.resolver import resolve

    path = tmp_path / "classic.yaml"
    path.write_text(CLASSIC)
    result = _cli(str(path), "--json")
    assert json.loads(result.stdout) == json.loads(json.dumps(resolve(load_spec(path)).to_json()))


def test_human_output_and_exit_codes(tmp_path):
    path = tmp_path / "classic.yaml"
    path.write_text(CLASSIC)
    bad = _cli(str(path))
    assert bad.returncode == 1
    assert bad.stdout.startswith("CONFLICT [framework_cuda_mismatch]")
    assert "fix 1:" in bad.stdout and bad.stdout.rstrip().splitlines()[-1].startswith("verdict: conflict")
    assert "\033[" not in bad.stdout  # not a tty: no colour
    good = _cli(str(path), "--cuda", "10.2")
    assert good.returncode == 0, good.stdout + good.stderr
    assert "Resolved stack" in good.stdout and good.stdout.rstrip().splitlines()[-1].startswith("verdict: ok")
    assert _cli(str(path), "--cuda", "ten").returncode == 2


def test_a_package_name_that_carries_a_cuda_resolves_on_that_cuda():
    # cupy-cuda102 is published for CUDA 10.2 only: the stack is that package on CUDA 10.2,
    # not another CuPy package on the newest CUDA the driver runs
    out = json.loads(_cli("--framework", "cupy-cuda102", "--gpu", "V100", "--driver", "470.82.01", "--json").stdout)
    assert out["verdict"] == "ok"
    assert out["resolved"]["cuda"] == "10.2"
    assert out["resolved"]["frameworks"][0]["pip_requirements"] == ["cupy-cuda102==12.*"]
    # cupy-cuda12x asks for CUDA 12, which driver 470 cannot run: a conflict with its fix,
    # where the name used to be swapped silently for cupy-cuda11x
    answer = _cli("--framework", "cupy-cuda12x", "--gpu", "V100", "--driver", "470.82.01", "--json")
    out = json.loads(answer.stdout)
    assert answer.returncode == 1 and out["verdict"] == "conflict"
    assert [c["kind"] for c in out["conflicts"]] == ["driver_too_old"]
