"""The host driver against the GPU itself: a driver branch drives only the architectures of
its time (envbuild/resolver/gpu_driver.py, matrices/cuda_driver.yaml `architectures`)."""
from __future__ import annotations

import dataclasses
import json

import pytest

from envbuild import matrix
from envbuild.core.model import FrameworkRequest, Spec
from envbuild.fleet import load_fleet
from envbuild.fleet.resolve import resolve_fleet
from envbuild.resolver import resolve

M = matrix.load()
# the same data without the architectures table: what envbuild judged before it had one
UNRULED = dataclasses.replace(M, driver_architectures=())
TEGRA = {"3.2", "5.3", "6.2", "7.2", "8.7", "11.0"}


def torch(gpu: str, driver: str, platform: str = "linux-64") -> Spec:
    return Spec(frameworks=(FrameworkRequest("pytorch", None),), gpus=(gpu,), driver=driver, platform=platform)


@pytest.mark.parametrize("gpu, driver, arch, branch, move_to", [
    ("Tesla K10", "580.65.06", "Kepler", 470, "470.239.06"),
    ("Tesla K80", "535.104.05", "Kepler", 470, "470.239.06"),
    ("Tesla V100", "595.71.05", "Volta", 580, "580.126.18"),
    ("GTX 1080 Ti", "610.43.02", "Pascal", 580, "580.126.18"),
])
def test_a_driver_newer_than_the_last_branch_of_the_architecture_does_not_see_the_gpu(gpu, driver, arch, branch, move_to):
    assert resolve(torch(gpu, driver), UNRULED).usable  # what envbuild said before: ok
    r = resolve(torch(gpu, driver), M)
    first = r.conflicts[0]
    assert first.kind == "gpu_arch_unsupported"
    assert f"is a {arch} GPU" in first.message and f"the R{branch} driver branch is the last that drives {arch}" in first.message
    assert f"driver {driver} does not see it at all" in first.message
    assert "cuda-toolkit-driver-and-architecture-matrix" in first.facts[0].source
    assert first.fixes[0].changes == {"driver": move_to}
    assert resolve(torch(gpu, move_to), M).usable  # the fix was verified, and is true


@pytest.mark.parametrize("gpu, driver, need", [
    ("H100", "470.57.02", "520.56.06"),  # no R515 tag of the open kernel modules lists an H100
    ("RTX 4090", "515.65.01", "520.61.05"),  # Ada came with CUDA 11.8 and its R520 driver
    ("B200", "560.35.03", "570.86.15"),  # Blackwell from R570
])
def test_a_driver_older_than_the_first_branch_of_the_architecture_does_not_see_the_gpu(gpu, driver, need):
    # minor-version compatibility lets the old driver run a cu118 / cu12x build: before the
    # rule, envbuild said ok
    assert resolve(torch(gpu, driver), UNRULED).usable
    r = resolve(torch(gpu, driver), M)
    (c,) = [c for c in r.conflicts if "does not see it at all" in c.message]
    assert c.kind == "driver_too_old" and c.message.endswith(f"so upgrade the driver to >= {need}")
    assert " is an Ada GPU " in c.message if gpu == "RTX 4090" else " is a " in c.message
    assert "open-gpu-kernel-modules" in c.facts[0].source
    assert c.fixes[0].changes == {"driver": need}
    assert resolve(torch(gpu, need), M).usable


def test_an_architecture_whose_first_branch_was_not_read_is_not_judged_by_it():
    # the open kernel modules list Ampere from their first tag: when GA102 came to the
    # drivers is not read, so an RTX 3090 on R450 is judged by its builds alone
    assert resolve(torch("RTX 3090", "450.80.02"), M) == resolve(torch("RTX 3090", "450.80.02"), UNRULED)


def test_the_branch_decides_not_the_release():
    # GeForce RTX 4090 came out with Linux driver 520.56.06, before CUDA 11.8's 520.61.05
    assert resolve(torch("RTX 4090", "520.56.06"), M).usable


def test_integrated_and_windows_gpus_are_not_judged():
    # a Jetson's driver comes with Linux for Tegra; Windows numbers its drivers apart (R470 is 47x.xx)
    assert resolve(torch("Jetson Nano", "590.44.01", "linux-aarch64"), M) == \
        resolve(torch("Jetson Nano", "590.44.01", "linux-aarch64"), UNRULED)
    assert resolve(torch("Tesla K80", "474.44", "win-64"), M) == resolve(torch("Tesla K80", "474.44", "win-64"), UNRULED)


def test_every_discrete_gpu_has_exactly_one_architecture_row():
    listed = [cc for row in M.driver_architectures for cc in row.compute_capabilities]
    assert len(listed) == len(set(listed))
    known = {g.compute_capability for g in M.gpus}
    assert set(listed) <= known
    assert {g.compute_capability for g in M.gpus} - set(listed) == TEGRA
    for row in M.driver_architectures:
        for branch, driver in ((row.first_branch, row.first_driver_linux), (row.last_branch, row.last_driver_linux)):
            assert (branch is None) == (driver is None)
            if branch is not None:
                assert int(driver.split(".")[0]) == branch


def test_a_fleet_judges_each_host_with_its_own_driver(tmp_path):
    # The joint request pairs every GPU with the oldest driver: a Kepler host on R470 and an
    # H100 host on R535 are each fine, and the joint must not say the H100 needs R520.
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text("targets:\n"
                     "  old: {gpu: Tesla K80, driver: 470.239.06, scheduler: {kind: slurm, partition: a}}\n"
                     "  new: {gpu: H100, driver: 535.104.05, scheduler: {kind: slurm, partition: b}}\n"
                     "  v100: {gpu: Tesla V100, driver: 595.71.05, scheduler: {kind: slurm, partition: c}}\n")
    targets = load_fleet(str(fleet)).select([])
    spec = Spec(frameworks=(FrameworkRequest("pytorch", None),))
    result = resolve_fleet(spec, targets)
    by_name = {r.target.name: r for r in result.targets}
    assert not any("does not see it" in c.message for j in result.joint for c in j.conflicts)
    assert by_name["old"].verdict == "ok" and by_name["new"].verdict == "ok"
    (c,) = by_name["v100"].conflicts
    assert c.kind == "gpu_arch_unsupported" and "R580" in c.message


def test_the_command_line_says_it_in_one_conflict_with_its_fix():
    import contextlib
    import io

    from envbuild.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = main(["resolve", "--framework", "pytorch", "--gpu", "Tesla K80", "--driver", "535.104.05", "--json"])
    (c,) = json.loads(out.getvalue())["conflicts"]
    assert code == 1 and c["kind"] == "gpu_arch_unsupported"
    assert c["fixes"] == [{"description": "use a driver of the R470 branch, 470.239.06", "changes": {"driver": "470.239.06"}}]


@pytest.mark.parametrize("gpu, line", [
    ("Tesla K80", "Linux drivers that drive it: R470 (e.g. 470.239.06) and older"),
    ("H100", "Linux drivers that drive it: R520 (e.g. 520.56.06) and newer"),
    ("7.0", "Linux drivers that drive it: R580 (e.g. 580.126.18) and older"),
    ("Jetson Nano", "Linux drivers: come with Linux for Tegra (the branch rules do not apply)"),
])
def test_matrix_gpu_names_the_driver_branches(gpu, line):
    import contextlib
    import io

    from envbuild.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["matrix", "gpu", gpu]) == 0
    assert f"  {line}\n" in out.getvalue()


def test_a_fix_clears_the_gpus_driver_floor_and_the_builds_together():
    # an RTX 5090 (sm_120) needs R570; pytorch 2.9 for CUDA 13 needs R580
    spec = Spec(frameworks=(FrameworkRequest("pytorch", "2.9.*"),), gpus=("RTX 5090",), driver="560.35.03",
                cuda="13.0")
    r = resolve(spec, M)
    assert [c.kind for c in r.conflicts] == ["driver_too_old", "driver_too_old"]
    gpu_floor = r.conflicts[0]
    assert "R570" in gpu_floor.message
    # one move replaces the other: said once, not "upgrade to >= 570.86.16, and upgrade to >= 580"
    assert [(f.description, f.changes) for f in gpu_floor.fixes][0] == ("upgrade the host driver to >= 580", {"driver": "580"})
    (c,) = resolve(torch("GB10", "535.104.05"), M).conflicts
    assert [(f.description, f.changes) for f in c.fixes] == [
        ("build for linux-aarch64, and upgrade the host driver to >= 580.94.13",
         {"platform": "linux-aarch64", "driver": "580.94.13"})]


def test_matrix_driver_says_which_architectures_a_driver_drives():
    # what a platform team asks before a driver upgrade: which of our GPUs would it drop?
    import contextlib
    import io

    from envbuild.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["matrix", "driver", "595.71.05", "--json"]) == 0
    rows = {r["compute_capability"]: r for r in json.loads(out.getvalue())["architectures"]}
    assert not rows["7.0"]["drives"] and rows["7.0"]["why"] == "last branch R580"
    assert rows["7.5"]["drives"] and rows["12.0"]["drives"]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["matrix", "driver", "470.57.02"]) == 0
    text = out.getvalue()
    assert "Kepler (3.0, 3.5, 3.7)" in text.split("does not drive")[0]
    assert "Hopper (9.0): from R520 (e.g. 520.56.06)" in text
    assert "Fermi (2.0, 2.1): last branch R390" in text


def test_a_gpu_given_by_its_compute_capability_is_named_once():
    (c,) = resolve(torch("3.7", "535.104.05"), M).conflicts
    assert c.message.startswith("GPU of compute capability 3.7 is Kepler, and the R470 driver branch")
