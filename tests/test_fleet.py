"""Fleet files and `envbuild resolve --fleet`: per-target answers, MIG slices, memory fit,
and one-line bad input. The fleet resolver is the real resolver over the real matrices."""
from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml

from envbuild.cli import main
from envbuild.fleet import load_fleet
from envbuild.fleet.validate import TARGET_KEYS
from envbuild.infra.errors import UserError
from envbuild.targets import COMMON_KEYS, KINDS, module

ROOT = Path(__file__).resolve().parent.parent
FLEET = ROOT / "tests" / "data" / "fleets" / "fleet.yaml"
SCHEMA = json.loads((ROOT / "schema" / "fleet.schema.json").read_text())


def _cli(*args: str) -> subprocess.CompletedProcess:
    """The command line in this process (the same `main` the console script runs; the
    matrices load once for the whole module instead of once per call)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return subprocess.CompletedProcess(args, code, out.getvalue(), err.getvalue())


def test_console_script_answers_the_same():
    done = subprocess.run([sys.executable, "-m", "envbuild", "resolve", "--framework", "pytorch", "--fleet", str(FLEET),
                           "--target", "h100", "--json"], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0 and json.loads(done.stdout)["targets"][0]["name"] == "h100"


def _fleet(tmp_path, text: str) -> str:
    path = tmp_path / "fleet.yaml"
    path.write_text(text)
    return str(path)


def test_example_fleet_loads_and_matches_the_schema():
    jsonschema.validate(yaml.safe_load(FLEET.read_text()), SCHEMA)
    fleet = load_fleet(str(FLEET))
    mig = fleet.target("a100-mig")
    assert (mig.mig, mig.gpu_memory_gib, mig.memory_from) == ("3g.40gb", 40, "MIG profile 3g.40gb")
    assert fleet.target("v100-slurm").scheduler == {"kind": "slurm", "partition": "gpu", "gres_type": "v100", "account": "ml"}


def test_schema_keys_match_the_validator_and_the_target_modules():
    target = SCHEMA["$defs"]["target"]["properties"]
    assert set(target) == set(TARGET_KEYS)
    kinds = {s["properties"]["kind"]["const"]: s for s in target["scheduler"]["oneOf"]}
    assert set(kinds) == set(KINDS)
    for kind, sub in kinds.items():
        mod = module(kind)
        assert set(sub["properties"]) - {"kind", *COMMON_KEYS} == set(mod.KEYS), kind
        assert set(COMMON_KEYS) <= set(sub["properties"]), kind
        assert set(sub["required"]) - {"kind"} == set(mod.REQUIRED), kind


@pytest.mark.parametrize("body, where, words", [
    ("targets:\n  a:\n    gpu: A100-80GB\n    mig: 2g.40gb\n    scheduler: {kind: k8s}\n", ":4:", ["no MIG profile '2g.40gb'", "3g.40gb", "7g.80gb"]),
    ("targets:\n  a:\n    gpu: V100\n    mig: 1g.10gb\n    scheduler: {kind: k8s}\n", ":4:", ["has no MIG profiles", "NVIDIA A100"]),
    # an A100 that knows its memory offers only its own table: 1g.5gb is a 40 GB profile
    ("targets:\n  a:\n    gpu: A100-80GB\n    mig: 1g.5gb\n    scheduler: {kind: k8s}\n", ":4:",
     ["NVIDIA A100-80GB has no MIG profile '1g.5gb'", "1g.10gb, 1g.20gb, 2g.20gb, 3g.40gb, 4g.40gb, 7g.80gb"]),
    ("targets:\n  a:\n    gpu: A100-40GB\n    mig: 3g.40gb\n    scheduler: {kind: k8s}\n", ":4:", ["3g.20gb", "7g.40gb"]),
    ("targets:\n  a:\n    gpu: A100\n    scheduler: {kind: pbs}\n", ":4:", ["unknown scheduler kind 'pbs'", "k8s, slurm"]),
    ("targets:\n  a:\n    gpu: A100\n    scheduler: {kind: slurm}\n", ":4:", ["needs 'partition'"]),
    ("targets:\n  a:\n    gpu: A1000000\n    scheduler: {kind: k8s}\n", ":3:", ["unknown GPU"]),
    ("targets:\n  a:\n    gpu: A10X\n    scheduler: {kind: k8s}\n", ":3:", ["unknown GPU 'A10X'", "did you mean 'A10'?"]),
    ("targets:\n  a:\n    gpu: A100\n    gpu_memory: lots\n    scheduler: {kind: k8s}\n", ":4:", ["malformed gpu_memory"]),
    ("targets:\n  Big_Name:\n    gpu: A100\n    scheduler: {kind: k8s}\n", ":2:", ["lowercase"]),
])
def test_bad_fleet_files_are_one_line_exit_2(tmp_path, body, where, words):
    path = _fleet(tmp_path, body)
    done = _cli("resolve", "--framework", "pytorch", "--fleet", path)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("envbuild: error: ") and where in lines[0], lines
    for word in words:
        assert word in lines[0]
    with pytest.raises(UserError):  # the schema and the validator agree where the schema can tell
        load_fleet(path)


def test_unknown_target_name_is_bad_input():
    done = _cli("resolve", "--framework", "pytorch", "--fleet", str(FLEET), "--target", "h10")
    assert done.returncode == 2
    assert done.stderr.strip() == "envbuild: error: --target: unknown target 'h10' (did you mean 'h100'?)"


def test_resolve_fleet_json_one_stack_for_all_targets():
    done = _cli("resolve", "--framework", "pytorch", "--fleet", str(FLEET), "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    data = json.loads(done.stdout)
    assert data["verdict"] == "ok"
    assert [t["name"] for t in data["targets"]] == ["v100-slurm", "a100-mig", "g5", "h100", "l4-flyte"]
    assert all(t["verdict"] == "ok" and t["conflicts"] == [] for t in data["targets"])
    # the chosen CUDA runs on the oldest driver (470 = CUDA 11.4 natively, 11.x by minor-version compatibility)
    assert data["resolved"]["cuda"].startswith("11.")
    assert {g["compute_capability"] for g in data["resolved"]["gpus"]} == {"7.0", "8.0", "8.6", "9.0", "8.9"}


def test_memory_misfit_names_targets_and_profiles_that_fit(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text("frameworks: {pytorch: null}\nresources: {gpus: 1, gpu_memory: 48GiB}\n")
    done = _cli("resolve", str(spec), "--fleet", str(FLEET), "--json")
    assert done.returncode == 1
    targets = {t["name"]: t for t in json.loads(done.stdout)["targets"]}
    assert [n for n, t in targets.items() if t["verdict"] == "ok"] == ["h100"]
    mig = targets["a100-mig"]["conflicts"][0]
    assert mig["kind"] == "gpu_memory_insufficient"
    assert "48 GiB" in mig["message"] and "3g.40gb" in mig["message"] and "40 GiB" in mig["message"]
    fixes = [f["description"] for f in mig["fixes"]]
    assert fixes == ["run on a target with enough memory: h100", "use a larger MIG profile on a100-mig: 7g.80gb"]
    # text: one table, then the conflicts; only the selected targets count
    text = _cli("resolve", str(spec), "--fleet", str(FLEET), "--target", "h100", "--target", "g5")
    assert text.returncode == 1
    lines = text.stdout.splitlines()
    assert lines[0].split() == ["TARGET", "GPU", "DRIVER", "VERDICT", "REASON"]
    assert lines[1].startswith("h100") and " ok" in lines[1] and lines[2].startswith("g5") and "conflict" in lines[2]
    assert any(line.startswith("CONFLICT g5 [gpu_memory_insufficient]") for line in lines)
    assert _cli("resolve", str(spec), "--fleet", str(FLEET), "--target", "h100").returncode == 0


def test_no_joint_stack_says_which_targets_force_which_choice(tmp_path):
    # Kepler (3.7) is gone from CUDA 12 builds, Blackwell (12.0) needs CUDA 12.8: no single torch serves both
    path = _fleet(tmp_path, "targets:\n  k80:\n    gpu: K80\n    driver: 470.82.01\n    scheduler: {kind: k8s}\n"
                            "  b:\n    gpu: RTX 5090\n    driver: 570.86.10\n    scheduler: {kind: k8s}\n")
    done = _cli("resolve", "--framework", "pytorch", "--fleet", path)
    assert done.returncode == 1
    assert "no single stack works on all selected targets:" in done.stdout
    assert "k80 alone: pytorch" in done.stdout and "b alone: pytorch" in done.stdout


def test_mig_floor_driver_is_a_conflict(tmp_path):
    path = _fleet(tmp_path, "targets:\n  h:\n    gpu: H100\n    mig: 1g.10gb\n    driver: 520.61.05\n    scheduler: {kind: k8s}\n")
    done = _cli("resolve", "--framework", "pytorch", "--fleet", path, "--json")
    assert done.returncode == 1
    conflicts = json.loads(done.stdout)["targets"][0]["conflicts"]
    assert any(c["kind"] == "driver_too_old" and "MIG 1g.10gb" in c["message"] and "525.85.12" in c["message"] for c in conflicts)


def test_a_board_that_knows_its_memory_is_its_own_mig_parent(tmp_path):
    # nvidia-smi's names of the A100 and H100 boards: the parent's profiles of the board's memory,
    # without gpu_memory in the fleet file, and the parent's MIG driver floor
    fleet = load_fleet(_fleet(tmp_path, (
        "targets:\n"
        "  sxm:\n    gpu: NVIDIA A100-SXM4-80GB\n    mig: 3g.40gb\n    scheduler: {kind: k8s}\n"
        "  pcie:\n    gpu: NVIDIA A100-PCIE-40GB\n    mig: 3g.20gb\n    scheduler: {kind: k8s}\n"
        "  nvl:\n    gpu: NVIDIA H100 NVL\n    mig: 1g.12gb\n    driver: 520.61.05\n    scheduler: {kind: k8s}\n")))
    assert [(t.mig, t.gpu_memory_gib) for t in fleet.targets] == [("3g.40gb", 40), ("3g.20gb", 20), ("1g.12gb", 12)]
    done = _cli("resolve", "--framework", "pytorch", "--fleet", str(tmp_path / "fleet.yaml"), "--target", "nvl", "--json")
    conflicts = json.loads(done.stdout)["targets"][0]["conflicts"]
    assert any(c["kind"] == "driver_too_old" and "NVIDIA H100" in c["message"] and "525.85.12" in c["message"]
               for c in conflicts)


def test_tables_keyed_by_the_model_read_a_board_through_it(tmp_path):
    # an A100-80GB target finds the AWS instances and the Flyte accelerator of the A100 model, at its size
    from envbuild.targets import flyte
    from envbuild.targets.job import Job

    fleet = load_fleet(_fleet(tmp_path, (
        "targets:\n  big:\n    gpu: A100-80GB\n    scheduler: {kind: batch, job_queue: q}\n"
        "  sxm:\n    gpu: NVIDIA A100-SXM4-40GB\n    scheduler: {kind: flyte}\n")))
    big, sxm = (Job(name=t.name, image="r/i@sha256:" + "0" * 64, target=t, gpus=8) for t in fleet.targets)
    assert big.instance_types() == ["p4de.24xlarge"]  # 80 GB: not the 40 GB p4d
    assert sxm.instance_types() == ["p4d.24xlarge", "p4de.24xlarge"]  # a 40 GB job fits either
    assert flyte.accelerator(big) == ("A100_80GB", None) and flyte.accelerator(sxm) == ("A100", None)


def test_a_jetson_or_grace_target_declared_linux_64_is_a_platform_conflict(tmp_path):
    # GH200 is an H100 (9.0, data center) on a Grace CPU: it must not share the x86 H100's answer
    path = _fleet(tmp_path, "targets:\n  h100:\n    gpu: H100\n    driver: 550.54.15\n    scheduler: {kind: k8s}\n"
                            "  gh:\n    gpu: GH200\n    driver: 550.54.15\n    scheduler: {kind: k8s}\n"
                            "  orin:\n    gpu: Jetson AGX Orin\n    driver: 540.4.0\n    platform: linux-aarch64\n"
                            "    scheduler: {kind: k8s}\n")
    done = _cli("resolve", "--framework", "pytorch", "--fleet", path, "--json")
    assert done.returncode == 1
    targets = {t["name"]: t for t in json.loads(done.stdout)["targets"]}
    assert targets["h100"]["verdict"] == "ok" and targets["orin"]["verdict"] == "ok"
    (conflict,) = targets["gh"]["conflicts"]
    assert conflict["kind"] == "platform_unsupported"
    assert conflict["message"].startswith("NVIDIA GH200 is the GPU of the GH200 Grace Hopper Superchip, attached to an "
                                          "Arm (aarch64) Grace CPU, so linux-64 builds cannot run on it")


def test_a_32_bit_arm_target_is_a_conflict_that_names_its_own_board(tmp_path):
    # Tegra K1 and Jetson TK1 share compute capability 3.2 and host platform, but not the
    # sentence on what they are part of: each report keeps its own
    path = _fleet(tmp_path, "targets:\n  a100:\n    gpu: A100\n    driver: 550.54.15\n    scheduler: {kind: k8s}\n"
                            "  tk1:\n    gpu: Jetson TK1\n    driver: 550.54.15\n    scheduler: {kind: k8s}\n"
                            "  k1:\n    gpu: Tegra K1\n    driver: 550.54.15\n    scheduler: {kind: k8s}\n")
    done = _cli("resolve", "--framework", "pytorch", "--fleet", path, "--json")
    assert done.returncode == 1
    targets = {t["name"]: t for t in json.loads(done.stdout)["targets"]}
    assert targets["a100"]["verdict"] == "ok"
    for name, gpu in (("tk1", "Jetson TK1"), ("k1", "Tegra K1")):
        (conflict,) = targets[name]["conflicts"]
        alone = _cli("resolve", "--framework", "pytorch", "--gpu", gpu, "--json")
        assert targets[name]["verdict"] == "conflict" and conflict["kind"] == "platform_unsupported"
        assert "32-bit Arm" in conflict["message"] and conflict["fixes"] == []
        assert [conflict] == json.loads(alone.stdout)["conflicts"]


def test_targets_sharing_a_gpu_class_are_each_named_in_their_own_report(tmp_path):
    # one resolve serves GPUs of one class (same compute capability and host platforms; a
    # data-center GPU and a desktop one of the same capability share it), but each target's
    # sentences name its own GPU, as resolving it alone does
    gpus = {"agx": "Jetson AGX Orin", "nano": "Jetson Orin Nano", "k20": "Tesla K20", "k40": "Tesla K40",
            "gtx780ti": "GeForce GTX 780 Ti"}
    path = _fleet(tmp_path, yaml.safe_dump({"targets": {
        name: {"gpu": gpu, "driver": "580.65.06", "scheduler": {"kind": "k8s"}} for name, gpu in gpus.items()}}))
    done = _cli("resolve", "--framework", "pytorch==2.5.1", "--fleet", path, "--json")
    assert done.returncode == 1
    targets = {t["name"]: t for t in json.loads(done.stdout)["targets"]}
    for name, gpu in gpus.items():
        alone = _cli("resolve", "--framework", "pytorch==2.5.1", "--gpu", gpu, "--driver", "580.65.06", "--json")
        expected = [c["message"] for c in json.loads(alone.stdout)["conflicts"]]
        assert expected and [c["message"] for c in targets[name]["conflicts"]] == expected


def test_the_text_report_leaves_out_only_the_joint_fixes_it_never_shows(tmp_path):
    # the oldest driver decides the joint request: its conflict has verified fixes, which
    # the JSON report carries and the text report does not print
    from envbuild.fleet.resolve import render_text, resolve_fleet
    from envbuild.spec import spec_from_mapping

    path = _fleet(tmp_path, "targets:\n  old:\n    gpu: A100\n    driver: 470.82.01\n    scheduler: {kind: k8s}\n"
                            "  new:\n    gpu: A100\n    driver: 535.104.05\n    scheduler: {kind: k8s}\n")
    spec = spec_from_mapping({"frameworks": {"pytorch": "==2.1.2"}, "cuda": "12.1"})
    targets = load_fleet(path).select([])
    full, lean = resolve_fleet(spec, targets), resolve_fleet(spec, targets, joint_fixes=False)
    assert [c.kind for c in full.joint[0].conflicts] == ["driver_too_old"]
    assert full.joint[0].conflicts[0].fixes and not lean.joint[0].conflicts[0].fixes
    assert render_text(lean) == render_text(full)
    assert [r.conflicts for r in lean.targets] == [r.conflicts for r in full.targets]  # each target keeps its fixes
    done = _cli("resolve", "--framework", "pytorch==2.1.2", "--cuda", "12.1", "--fleet", path, "--json")
    joint = json.loads(done.stdout)["joint"][0]["conflicts"][0]
    assert joint["fixes"][0] == {"description": "upgrade the host driver to >= 525.60.13", "changes": {"driver": "525.60.13"}}


def test_the_fleet_command_pauses_the_collector_only_for_itself():
    # `resolve --fleet` turns the cyclic collector off for its work; called in-process (not
    # as the console entry, whose process exits next) `main` turns it back on
    import gc

    assert gc.isenabled()
    with contextlib.redirect_stdout(io.StringIO()):
        main(["resolve", "--framework", "pytorch", "--fleet", "tests/data/fleets/fleet.yaml"])
    assert gc.isenabled()
    gc.disable()
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            main(["resolve", "--framework", "pytorch", "--fleet", "tests/data/fleets/fleet.yaml"])
        assert not gc.isenabled()  # a caller that had it off keeps it off
    finally:
        gc.enable()
