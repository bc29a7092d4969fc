"""`envbuild lock`, conda path: real py-rattler solves against local channels shaped like
the real pytorch / nvidia / main / conda-forge channels, real conda-lock files."""
from __future__ import annotations

import dataclasses
import subprocess
from pathlib import Path

import pytest
import yaml

from envbuild.lock import loop
from envbuild.lock.api import LockConflict, lock
from envbuild.lock.check import check
from envbuild.lock.install import install
from lock_channels import archive_channel, conda_resolution, repodata_channels

LOCKFILES = ("conda-lock.yml", "conda-linux-64.lock", "conda-linux-aarch64.lock", "requirements.lock")


@pytest.fixture(scope="module")
def channels(tmp_path_factory) -> dict[str, Path]:
    return repodata_channels(tmp_path_factory.mktemp("channels"))


@pytest.fixture
def anaconda(channels):
    """The channel list users write for the pytorch channel: pytorch, nvidia, defaults."""
    return [channels["pytorch"], channels["nvidia"], channels["main"]]


def _conflict(spec, resolution, out, platforms=None):
    with pytest.raises(LockConflict) as info:
        lock(spec, resolution, platforms, out)
    assert not [p for p in out.glob("*") if p.name in LOCKFILES], "a refused lock must write nothing"
    return info.value.conflicts


def _locked(path: Path, platform: str = "linux-64") -> dict[str, str]:
    """name -> build of a conda-lock.yml for one platform."""
    data = yaml.safe_load(path.read_text())
    return {p["name"]: p["build"] for p in data["package"] if p["platform"] == platform}


def test_classic_pytorch_16_with_cudatoolkit_110_is_a_conflict(anaconda, tmp_path):
    spec, resolution = conda_resolution(anaconda, version="1.6.0", cuda="11.0", python="3.8")
    (conflict,) = _conflict(spec, resolution, tmp_path)
    assert conflict.kind == "framework_cuda_mismatch"
    assert "cudatoolkit >=10.2,<10.3" in conflict.message and "cudatoolkit=11.0" in conflict.message
    assert "\n" not in conflict.message and "├" not in conflict.message  # one sentence, no solver tree
    assert [f.changes for f in conflict.fixes] == [{"cuda": "10.2"}]


def test_the_offered_fix_locks_the_cuda_build(anaconda, tmp_path):
    spec, resolution = conda_resolution(anaconda, version="1.6.0", cuda="10.2", python="3.8")
    result = lock(spec, resolution, None, tmp_path)
    builds = _locked(tmp_path / "conda-lock.yml")
    assert builds["pytorch"] == "py3.8_cuda10.2.89_cudnn7.6.5_0"
    assert builds["cudatoolkit"] == "hfd86e86_1"
    assert [p.name for p in result.files] == ["conda-lock.yml", "conda-linux-64.lock"]


def test_missing_gpu_variant_fails_instead_of_locking_the_cpu_build(anaconda, tmp_path):
    # The pytorch channel has only CPU builds of 2.1.2 for linux-aarch64.
    spec, resolution = conda_resolution(anaconda, platform="linux-aarch64")
    (conflict,) = _conflict(spec, resolution, tmp_path)
    assert conflict.kind == "framework_cuda_mismatch"
    assert "only CPU builds of pytorch" in conflict.message and "linux-aarch64" in conflict.message


def test_an_unpinned_framework_spec_still_never_locks_cpu(channels, tmp_path):
    # Without the nvidia channel the CUDA builds cannot be installed; a careless solve
    # happily returns the CPU build instead. The lock must refuse it.
    spec, resolution = conda_resolution([channels["pytorch"], channels["main"]], conda_specs=("pytorch==2.1.2",))
    conflicts = _conflict(spec, resolution, tmp_path)
    assert any(c.kind == "framework_cuda_mismatch" and "py3.10_cpu_0" in c.message for c in conflicts)


def test_driver_too_old_for_the_locked_cuda(anaconda, tmp_path):
    spec, resolution = conda_resolution(anaconda, driver="470.57.02", max_driver_cuda="11.4")
    (conflict,) = _conflict(spec, resolution, tmp_path)
    assert conflict.kind == "driver_too_old"
    assert "11.4" in conflict.message and "__cuda >=12" in conflict.message
    assert {"cuda": "11.8"} in [f.changes for f in conflict.fixes]


def test_python_without_builds(anaconda, tmp_path):
    spec, resolution = conda_resolution(anaconda, python="3.11")
    (conflict,) = _conflict(spec, resolution, tmp_path)
    assert conflict.kind == "python_unsupported"
    assert [f.changes for f in conflict.fixes] == [{"python": "3.10"}]


def test_lock_records_gpu_build_hashes_and_metadata(anaconda, tmp_path):
    spec, resolution = conda_resolution(anaconda)
    lock(spec, resolution, None, tmp_path)
    data = yaml.safe_load((tmp_path / "conda-lock.yml").read_text())
    custom = data["metadata"]["custom_metadata"]
    assert custom["envbuild.spec_hash"] == spec.hash()
    assert custom["envbuild.matrix_version"] == "test-matrix-1"
    assert yaml.safe_load(custom["envbuild.resolved"])["cuda"] == "12.1"
    assert "__cuda=12.2=0" in custom["envbuild.virtual_packages.linux-64"]
    assert "__glibc=2.35=0" in custom["envbuild.virtual_packages.linux-64"]
    builds = _locked(tmp_path / "conda-lock.yml")
    assert builds["pytorch"] == "py3.10_cuda12.1_cudnn8.9.2_0"
    assert builds["pytorch-cuda"] == "ha16c6d3_5" and builds["pytorch-mutex"] == "cuda"
    explicit = (tmp_path / "conda-linux-64.lock").read_text().splitlines()
    urls = explicit[explicit.index("@EXPLICIT") + 1:]
    by_url = {p["url"]: p["hash"]["md5"] for p in data["package"]}
    assert sorted(u.split("#")[0] for u in urls) == sorted(by_url)
    assert all(by_url[u.split("#")[0]] == u.split("#")[1] for u in urls)


def test_conda_lock_cli_renders_our_lockfile(anaconda, tmp_path):
    spec, resolution = conda_resolution(anaconda)
    lock(spec, resolution, None, tmp_path)
    done = subprocess.run(
        ["conda-lock", "render", "--kind", "explicit", "-p", "linux-64",
         "--filename-template", "rendered-{platform}.lock", "conda-lock.yml"],
        cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    rendered = (tmp_path / "rendered-linux-64.lock").read_text().splitlines()
    ours = (tmp_path / "conda-linux-64.lock").read_text().splitlines()
    assert sorted(rendered[rendered.index("@EXPLICIT") + 1:]) == sorted(ours[ours.index("@EXPLICIT") + 1:])


def test_conda_lock_parses_our_lockfile_and_rewrites_the_same_bytes(anaconda, tmp_path):
    """Our own writer must produce what conda-lock's writer produces from conda-lock's
    reading of the file, before and after the base image is recorded."""
    from conda_lock.lockfile import parse_conda_lock_file, write_conda_lock_file

    from envbuild.lock.conda_lockfile import HEADER, record_base_image

    spec, resolution = conda_resolution(anaconda)
    lock(spec, resolution, None, tmp_path / "lock")
    ours = tmp_path / "lock" / "conda-lock.yml"
    digest = "sha256:" + "ab" * 32
    for step in ("lock", "base image"):
        if step == "base image":
            record_base_image(ours, "nvidia/cuda:12.1.1-runtime-ubuntu22.04", digest)
        parsed = parse_conda_lock_file(ours)
        theirs = tmp_path / f"theirs-{step}.yml"
        write_conda_lock_file(parsed, theirs, metadata_choices=None, include_help_text=False)
        assert ours.read_text() == HEADER + theirs.read_text(), step
        assert {p.name for p in parsed.package} >= {"pytorch", "pytorch-cuda", "python"}
    assert parsed.metadata.custom_metadata["envbuild.base_digest"] == digest


def test_two_platform_lock(channels, tmp_path):
    spec, resolution = conda_resolution([channels["conda-forge"]], cuda="12.0", cudnn="8.9",
                                        conda_specs=("pytorch==2.1.2=*cuda*",))
    _, arm = conda_resolution([channels["conda-forge"]], cuda="12.0", cudnn="8.9",
                              conda_specs=("pytorch==2.1.2=*cuda*",), platform="linux-aarch64")
    result = lock(spec, resolution, ["linux-64", "linux-aarch64"], tmp_path, platform_resolutions={"linux-aarch64": arm})
    assert result.platforms == ("linux-64", "linux-aarch64")
    data = yaml.safe_load((tmp_path / "conda-lock.yml").read_text())
    assert data["metadata"]["platforms"] == ["linux-64", "linux-aarch64"]
    assert _locked(tmp_path / "conda-lock.yml", "linux-64")["pytorch"] == "cuda120_py310h327d3bc_301"
    assert _locked(tmp_path / "conda-lock.yml", "linux-aarch64")["pytorch"] == "cuda120_py310h2f1f0ed_301"
    assert _locked(tmp_path / "conda-lock.yml", "linux-aarch64")["cudnn"] == "h8e1e1f2_3"
    assert "__archspec=1=aarch64" in data["metadata"]["custom_metadata"]["envbuild.virtual_packages.linux-aarch64"]
    for platform in ("linux-64", "linux-aarch64"):
        assert (tmp_path / f"conda-{platform}.lock").exists()
        done = subprocess.run(["conda-lock", "render", "--kind", "explicit", "-p", platform, "conda-lock.yml"],
                              cwd=tmp_path, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr


def test_check_detects_changed_spec_and_matrix(anaconda, tmp_path):
    spec, resolution = conda_resolution(anaconda)
    lock(spec, resolution, None, tmp_path)
    assert check(spec, resolution, None, tmp_path) == []

    changed_spec, changed = conda_resolution(anaconda, conda_packages=("numpy",))
    problems = check(changed_spec, changed, None, tmp_path)
    assert problems and "the spec changed" in problems[0]

    new_matrix = dataclasses.replace(resolution, matrix_version="test-matrix-2")
    assert any("the matrix data changed" in p for p in check(spec, new_matrix, None, tmp_path))
    _, arm = conda_resolution(anaconda, platform="linux-aarch64")
    assert any("platforms changed" in p for p in check(spec, resolution, ["linux-64", "linux-aarch64"], tmp_path,
                                                       {"linux-aarch64": arm}))


def test_check_reports_a_missing_lock(anaconda, tmp_path):
    spec, resolution = conda_resolution(anaconda)
    assert any("missing" in p for p in check(spec, resolution, None, tmp_path))


def test_failed_run_leaves_the_previous_lock_byte_identical(anaconda, tmp_path):
    spec, resolution = conda_resolution(anaconda)
    lock(spec, resolution, None, tmp_path)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    bad_spec, bad = conda_resolution(anaconda, version="1.6.0", cuda="11.0", python="3.8")
    with pytest.raises(LockConflict):
        lock(bad_spec, bad, None, tmp_path)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before  # no staging folder left either


def test_same_inputs_give_identical_bytes(anaconda, tmp_path):
    spec, resolution = conda_resolution(anaconda)
    lock(spec, resolution, None, tmp_path / "a")
    lock(spec, resolution, None, tmp_path / "b")
    for name in ("conda-lock.yml", "conda-linux-64.lock"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


def test_dropping_a_platform_removes_its_stale_lockfile(channels, tmp_path):
    spec, resolution = conda_resolution([channels["conda-forge"]], cuda="12.0", conda_specs=("pytorch==2.1.2=*cuda*",))
    _, arm = conda_resolution([channels["conda-forge"]], cuda="12.0", conda_specs=("pytorch==2.1.2=*cuda*",),
                              platform="linux-aarch64")
    lock(spec, resolution, ["linux-64", "linux-aarch64"], tmp_path, platform_resolutions={"linux-aarch64": arm})
    lock(spec, resolution, ["linux-64"], tmp_path)
    assert not (tmp_path / "conda-linux-aarch64.lock").exists()


def test_install_from_the_lock_into_a_prefix(tmp_path):
    channel = loop.run(archive_channel(tmp_path / "channel"))
    spec, resolution = conda_resolution([channel], conda_specs=("pytorch==2.1.2=*cuda*", "pytorch-cuda=12.1"))
    lock(spec, resolution, None, tmp_path / "lock")
    prefix = tmp_path / "env"
    installed = install(tmp_path / "lock" / "conda-lock.yml", prefix, "linux-64", cache_dir=tmp_path / "cache")
    assert "pytorch=2.1.2=py3.10_cuda12.1_cudnn8.9.2_0" in installed
    assert (prefix / "share/envbuild-test/pytorch.txt").read_text() == "pytorch 2.1.2 py3.10_cuda12.1_cudnn8.9.2_0\n"
    assert (prefix / "conda-meta/pytorch-2.1.2-py3.10_cuda12.1_cudnn8.9.2_0.json").exists()
    assert (prefix / "share/envbuild-test/cuda-version.txt").exists()


def test_a_framework_unknown_to_the_matrices_is_never_dropped_from_the_lock(tmp_path):
    # Without --strict, pytorch 2.99 is unverified (exit 0); lock must refuse rather than
    # write an environment without the framework.
    from envbuild.infra.errors import UserError
    from envbuild.core.model import FrameworkRequest, Spec
    from envbuild.resolver import resolve

    spec = Spec(frameworks=(FrameworkRequest("pytorch", "2.99"),), installer="pip")
    resolution = resolve(spec)
    assert resolution.verdict == "unverified" and resolution.usable and resolution.unchecked
    with pytest.raises(UserError, match="pytorch 2.99 has no row in the matrices"):
        lock(spec, resolution, None, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def _cupy_conda(channel: Path, cuda: str):
    """Resolve conda-forge CuPy 13.2.0 for an A100 on driver 550 against `channel`."""
    from envbuild.core.model import FrameworkRequest, Spec
    from envbuild.resolver import resolve

    spec = Spec(name="cupy", frameworks=(FrameworkRequest("cupy", "13.2.0"),), cuda=cuda, python="3.12",
                driver="550.54.15", gpus=("A100",), installer="conda", channels=(str(channel),))
    resolution = resolve(spec)
    assert resolution.ok, resolution.conflicts
    return spec, resolution


@pytest.mark.parametrize("cuda, cupy, variant", [
    ("12.5", "py312had87585_0", {"cuda-version": "hd4f0392_3", "cuda-nvrtc": "he02047a_0"}),
    ("11.8", "py312h6b1c4a0_0", {"cuda-version": "h70ddcb2_3", "cudatoolkit": "h4ba93d1_13"}),
])
def test_conda_forge_cupy_locks_the_resolved_cuda_variant(channels, tmp_path, cuda, cupy, variant):
    spec, resolution = _cupy_conda(channels["cupy-conda-forge"], cuda)
    assert resolution.resolved.frameworks[0].conda_specs[0] == "cupy==13.2.0"
    result = lock(spec, resolution, None, tmp_path)
    report, = result.cuda  # the CUDA the conda records install, judged against driver 550.54.15 (CUDA 12.4)
    assert report.installed == cuda and not report.conflicts
    assert [c.kind for c in report.checks if c.status != "ok"] == (["minor_version_compat"] if cuda == "12.5" else [])
    locked = _locked(tmp_path / "conda-lock.yml")
    assert locked["cupy"] == cupy
    assert {name: locked.get(name) for name in variant} == variant
    assert "cupy-core" in locked


def test_conda_forge_cupy_without_the_resolved_cuda_libraries_is_refused(channels, tmp_path):
    # The channel has cuda-version 12.4 but only 12.5 libraries: no other CUDA is taken instead.
    spec, resolution = _cupy_conda(channels["cupy-conda-forge"], "12.4")
    conflicts = _conflict(spec, resolution, tmp_path)
    assert conflicts[0].kind == "framework_cuda_mismatch" and "cuda-version==12.4" in conflicts[0].message
    assert conflicts[0].fixes[0].changes == {"cuda": "12.5"}


def _guarded(channels, conda_specs):
    return conda_resolution(channels, version="2.4.1", cuda="12.4", python="3.11", driver="550.54.15",
                            max_driver_cuda="12.4", conda_specs=conda_specs)


def test_a_cpu_companion_next_to_a_cuda_framework_is_refused(channels, tmp_path):
    specs = ("pytorch==2.4.1=*cuda*", "pytorch-cuda==12.4", "torchvision==0.19.1")
    (conflict,) = _conflict(*_guarded([channels["guard"]], specs), tmp_path)
    assert conflict.kind == "framework_cuda_mismatch"
    assert conflict.message.startswith("the solver chose torchvision 0.19.1 build cpu_py311h0a1b2c3_1 for linux-64, "
                                       "which is a CPU build")
    # pinned to its GPU build, the same environment locks
    lock(*_guarded([channels["guard"]], specs[:2] + ("torchvision==0.19.1=*cu124",)), None, tmp_path)
    assert _locked(tmp_path / "conda-lock.yml")["torchvision"] == "py311_cu124"


def test_a_framework_build_for_another_cuda_is_refused(channels, tmp_path):
    specs = ("pytorch==2.4.1=*cuda*", "pytorch-cuda==12.4", "torchvision==0.19.1=*cu124")
    (conflict,) = _conflict(*_guarded([channels["guard-cuda118"], channels["guard"]], specs), tmp_path)
    assert conflict.message.startswith("the solver chose pytorch 2.4.1 build py3.11_cuda11.8_cudnn9.1.0_0 for linux-64, "
                                       "which is built for CUDA 11.8, which the target's CUDA 12.4 does not run")


def test_a_gap_further_down_names_the_dependency_not_the_framework(channels, tmp_path):
    spec, resolution = _guarded([channels["guard"]], ("pytorch==2.4.0=*cuda*", "pytorch-cuda==12.4"))
    spec = dataclasses.replace(spec, frameworks=(dataclasses.replace(spec.frameworks[0], constraint="2.4.0"),))
    (conflict,) = _conflict(spec, resolution, tmp_path)
    assert conflict.message.startswith("libcusparse 12.3.1 needs cuda-version >=12.3,<12.4.0a0, for which")


def _glibc_channel(root: Path, builds) -> Path:
    """A channel with one library, `libglibc-probe`, in builds that need different glibc floors."""
    from lock_channels import write_channel

    rows = [{"n": "libglibc-probe", "v": version, "b": "0", "d": [f"__glibc >={floor}"]} for version, floor in builds]
    return write_channel(root, {"linux-64": rows})


@pytest.mark.parametrize("os_label, glibc, version", [
    ("ubuntu16.04", "2.23", "1.0"),  # xenial's libc6 is 2.23: the newest build (needs 2.28) cannot run there
    ("ubuntu22.04", "2.35", "2.0"),
    ("amzn2023", "2.34", "2.0"),
])
def test_the_lock_states_the_base_os_glibc_to_the_solver(anaconda, tmp_path, os_label, glibc, version):
    probe = _glibc_channel(tmp_path / "glibc", [("1.0", "2.17"), ("2.0", "2.28")])
    spec, resolution = conda_resolution([*anaconda, probe], os=os_label, conda_packages=("libglibc-probe",))
    lock(spec, resolution, None, tmp_path / "out")
    data = yaml.safe_load((tmp_path / "out" / "conda-lock.yml").read_text())
    assert f"__glibc={glibc}=0" in data["metadata"]["custom_metadata"]["envbuild.virtual_packages.linux-64"]
    assert {p["name"]: p["version"] for p in data["package"]}["libglibc-probe"] == version


def test_a_package_newer_than_the_base_os_glibc_is_refused(anaconda, tmp_path):
    probe = _glibc_channel(tmp_path / "glibc", [("2.0", "2.28")])
    spec, resolution = conda_resolution([*anaconda, probe], os="ubuntu16.04", conda_packages=("libglibc-probe",))
    (conflict,) = _conflict(spec, resolution, tmp_path)
    assert conflict.kind == "platform_unsupported"
    assert conflict.message.startswith("a package needs a newer glibc than the target's 2.23 on linux-64")


def test_an_os_without_a_glibc_row_is_refused_not_defaulted(anaconda, tmp_path):
    from envbuild.infra.errors import UserError

    spec, resolution = conda_resolution(anaconda, os="ubuntu14.04")
    with pytest.raises(UserError, match="the glibc of OS 'ubuntu14.04' is not recorded"):
        lock(spec, resolution, None, tmp_path)


def test_a_base_of_unknown_os_locks_for_the_default_floor_and_says_so(anaconda, tmp_path):
    spec, resolution = conda_resolution(anaconda)
    base = dataclasses.replace(resolution.resolved.base_image, ref="pytorch/pytorch:2.4.0-cuda12.1-cudnn9-runtime",
                               os=None)
    resolution = dataclasses.replace(resolution, resolved=dataclasses.replace(resolution.resolved, base_image=base))
    result = lock(spec, resolution, None, tmp_path)
    assert result.notes == ("the OS of the base image pytorch/pytorch:2.4.0-cuda12.1-cudnn9-runtime is not recorded, "
                            "so the lock assumes its glibc is 2.28 (the default floor): packages that need a newer "
                            "glibc are refused, and an OS older than that floor is not detected",)
