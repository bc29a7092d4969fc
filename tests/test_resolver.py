"""The resolver, link by link, against the bundled matrices."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from envbuild import matrix
from envbuild.core.model import FrameworkRequest, Spec
from envbuild.core.values import ConflictKind, CudaVersion
from envbuild.core.versions import parse_version
from envbuild.resolver import resolve
from envbuild.resolver.context import ImageCuda
from envbuild.spec import load_spec

M = matrix.load()


def spec(frameworks=None, **fields) -> Spec:
    return Spec(frameworks=tuple(FrameworkRequest(n, c) for n, c in (frameworks or {}).items()), **fields)


def kinds(result) -> list[str]:
    return [c.kind for c in result.conflicts]


# --- 1. framework version <-> CUDA variant, per installer -----------------------------------
def test_classic_conda_pytorch_16_with_cudatoolkit_110():
    r = resolve(load_spec("recipes/pytorch-1.6-cudatoolkit-11.0.yaml"), M)
    assert kinds(r) == ["framework_cuda_mismatch"]
    message = r.conflicts[0].message
    assert "pytorch 1.6.0 on conda is built only for cudatoolkit 9.2, 10.1, 10.2" in message
    assert "11.0.221" in message
    assert all(f.source for f in r.conflicts[0].facts)
    assert 1 <= len(r.conflicts[0].fixes) <= 3


def test_pip_and_conda_variants_differ():
    # pip has a cu110 wheel of torch 1.7.1; conda's 1.7.1 is built for cudatoolkit 11.0 too, but
    # conda pytorch 1.6.0 has no 11.0 build while the pip index has none either -> both conflict
    pip = resolve(spec({"pytorch": "1.7.1+cu110"}, installer="pip"), M)
    assert pip.ok and pip.resolved.frameworks[0].pip_requirements[0] == "torch==1.7.1+cu110"
    assert resolve(spec({"pytorch": "1.6.0"}, cuda="11.0", installer="conda"), M).verdict == "conflict"


def test_conda_build_is_pinned_to_its_gpu_variant():
    r = resolve(spec({"pytorch": "1.6.0"}, cuda="10.2", installer="conda"), M)
    assert r.ok
    specs = r.resolved.frameworks[0].conda_specs
    assert "pytorch==1.6.0=*cuda*" in specs and "cudatoolkit==10.2.*" in specs


# --- 2. CUDA <-> driver ----------------------------------------------------------------------
def test_pre_11_needs_its_own_driver():
    r = resolve(spec({"pytorch": "1.6.0"}, cuda="10.2", installer="conda", driver="418.87.00"), M)
    assert kinds(r) == ["driver_too_old"]
    assert "418.87.00" in r.conflicts[0].message


def test_minor_version_compatibility_within_a_major():
    # cu113 wheel on a 460 driver (CUDA 11.2): fine through 11.x minor-version compatibility
    r = resolve(spec({"pytorch": "1.11.0+cu113"}, driver="460.32.03", installer="pip"), M)
    assert r.ok
    assert any(w.kind == "minor_version_compat" for w in r.warnings)


def test_minor_version_compatibility_never_crosses_a_major():
    r = resolve(spec({"pytorch": "2.1.2+cu121"}, driver="470.82.01", installer="pip"), M)
    assert kinds(r) == ["driver_too_old"]


def test_completion_never_picks_a_cuda_newer_than_the_driver_allows():
    r = resolve(spec({"pytorch": None}, driver="470.82.01", installer="pip"), M)
    assert r.ok
    assert parse_version(r.resolved.frameworks[0].cuda).release[0] == 11


def test_pip_wheel_ignores_the_system_toolkit_but_not_the_driver():
    # TF 2.7 loads the system CUDA 11.x; a same-major system toolkit is fine
    assert resolve(spec({"tensorflow": "2.7.0"}, cuda="11.2"), M).ok


# --- 3. GPU compute capability <-> compiled architectures -------------------------------------
def test_sass_runs_within_a_major_only():
    # torch 1.7.1+cu110 carries sm_80: runs on sm_86 (RTX 3090) but not on sm_90
    assert resolve(spec({"pytorch": "1.7.1+cu110"}, gpus=("RTX 3090",), installer="pip"), M).ok
    r = resolve(spec({"pytorch": "1.7.1+cu110"}, gpus=("H100",), installer="pip"), M)
    assert kinds(r) == ["gpu_arch_unsupported"]


def test_arch_support_is_not_monotonic():
    # torch 2.8: cu128 dropped Pascal, cu126 keeps it
    r = resolve(spec({"pytorch": "2.8.0+cu128"}, gpus=("P100",), installer="pip"), M)
    assert kinds(r) == ["gpu_arch_unsupported"]
    assert resolve(spec({"pytorch": "2.8.0+cu126"}, gpus=("P100",), installer="pip"), M).ok
    completed = resolve(spec({"pytorch": "2.8.0"}, gpus=("P100",), installer="pip"), M)
    assert completed.ok and completed.resolved.frameworks[0].cuda == "12.6"


def test_ptx_only_is_a_warning_not_a_conflict():
    # No published torch wheel in the matrix reaches a GPU through PTX alone (their PTX is
    # compute_120, the newest major), so this link is checked on a copy of the matrices whose
    # one build carries sm_70 SASS plus compute_70 PTX: an sm_80 GPU must JIT the PTX.
    import dataclasses

    row = dict(source="test row", version="2.0.1", installer="pip", cuda="11.8", package="+cu118",
               python=">=3.8,<3.12", archs=("sm_70", "compute_70"))
    m = dataclasses.replace(M, framework_rows={**M.framework_rows, "pytorch": ("pytorch.yaml", "builds", (row,))},
                            version="ptx-test")
    r = resolve(spec({"pytorch": "2.0.1"}, gpus=("A100",), installer="pip"), m)
    assert r.ok
    assert [w.kind for w in r.warnings] == ["ptx_jit"]
    assert kinds(resolve(spec({"pytorch": "2.0.1"}, gpus=("6.0",), installer="pip"), m)) == ["gpu_arch_unsupported"]


def test_completion_never_picks_a_build_without_the_gpu_arch():
    r = resolve(spec({"pytorch": None}, gpus=("V100", "A100", "H100"), installer="pip"), M)
    assert r.ok
    archs = r.resolved.frameworks[0].archs
    assert {"sm_70", "sm_80", "sm_90"} <= set(archs)


# --- 4. GPU <-> CUDA toolkit ----------------------------------------------------------------
def test_sm90_needs_cuda_118():
    r = resolve(spec(cuda="11.7", gpus=("H100",)), M)
    assert kinds(r) == ["gpu_arch_unsupported"]
    assert resolve(spec(cuda="11.8", gpus=("H100",)), M).ok


def test_cuda_13_dropped_volta_and_12_dropped_kepler():
    assert kinds(resolve(spec(cuda="13.0", gpus=("V100",)), M)) == ["gpu_arch_unsupported"]
    assert kinds(resolve(spec(cuda="12.0", gpus=("K80",)), M)) == ["gpu_arch_unsupported"]
    assert resolve(spec(cuda="11.8", gpus=("K80",)), M).ok


# --- 5. Python, cuDNN, one CUDA major -----------------------------------------------------------
def test_python_unsupported():
    r = resolve(spec({"pytorch": "1.13.1"}, python="3.12"), M)
    assert kinds(r) == ["python_unsupported"]
    assert "Python 3.12" in r.conflicts[0].message


def test_cudnn_same_major_and_newer_minor():
    # TF 2.14 is built with cuDNN 8.7
    r = resolve(spec({"tensorflow": "2.14.0"}, cudnn="8.6"), M)
    assert kinds(r) == ["cudnn_mismatch"]
    assert resolve(spec({"tensorflow": "2.14.0"}, cudnn="8.9"), M).ok


def test_frameworks_share_one_cuda_major():
    r = resolve(spec({"pytorch": "1.13.1", "jax": "0.4.31"}, installer="pip"), M)
    assert kinds(r) == ["framework_cuda_mismatch"]
    both = resolve(spec({"pytorch": "2.4.*", "jax": "0.4.31"}, installer="pip"), M)
    assert both.ok
    majors = {parse_version(f.cuda).release[0] for f in both.resolved.frameworks}
    assert len(majors) == 1


# --- 6. base image ------------------------------------------------------------------------------
def test_base_image_cuda_must_match_the_build():
    r = resolve(spec({"tensorflow": "2.13.0"}, base_image="nvidia/cuda:12.1.1-cudnn8-devel-ubuntu22.04"), M)
    assert kinds(r) == ["base_image_cuda_mismatch"]
    assert resolve(spec({"tensorflow": "2.13.0"}, base_image="nvidia/cuda:11.7.1-cudnn8-devel-ubuntu22.04"), M).ok


def test_an_unknown_base_image_leaves_its_link_unchecked():
    r = resolve(spec({"pytorch": "2.1.2+cu121"}, installer="pip", base_image="example.com/team/base:1"), M)
    assert r.verdict == "unverified" and r.usable and not r.conflicts
    assert {link for u in r.unchecked for link in u.links} == {"base_image", "python"}
    assert any("nothing states the CUDA of the base image example.com/team/base:1" in u.message
               and "--base-fact cuda=X.Y" in u.message for u in r.unchecked)
    stated = resolve(spec({"pytorch": "2.1.2+cu121"}, installer="pip", base_image="example.com/team/base:1",
                          base_facts=(("cuda", "12.1.1"), ("python", "3.11"))), M)
    assert stated.ok and stated.resolved.base_image.family == "custom"


def test_cupy_on_cuda_122_or_newer_gets_a_devel_image():
    import dataclasses

    r = resolve(dataclasses.replace(load_spec("recipes/cupy.yaml"), for_image=True), M)
    assert r.ok and r.resolved.base_image.flavour == "devel"
    assert "NVRTC" in r.resolved.base_image.why


def test_pip_torch_gets_a_runtime_image():
    r = resolve(spec({"pytorch": "2.1.2+cu118"}, installer="pip", for_image=True), M)
    assert r.ok and r.resolved.base_image.cuda.startswith("11.8") and r.resolved.base_image.flavour == "runtime"


# --- the Python the image runs ---------------------------------------------------------------------
# A pip environment is a venv over the base image's python3 (on nvidia/cuda, the distribution's);
# a conda environment brings its own interpreter.
RECIPES = Path(__file__).parent.parent / "recipes"
ONE_PIP_PACKAGE = {"cuda": "12.4", "pip_packages": ("einops==0.7.0",), "for_image": True}


def _runs_the_locked_python(r) -> bool:
    stack = r.resolved
    if stack.installer == "conda" and stack.base_image.family == "cuda":
        return True  # the conda prefix's own python
    return stack.base_image.python is not None and stack.base_image.python == stack.python


def test_pip_on_nvidia_cuda_locks_for_the_distributions_python3():
    r = resolve(spec(installer="pip", **ONE_PIP_PACKAGE), M)
    assert r.ok and r.resolved.base_image.os == "ubuntu22.04"
    assert r.resolved.python == r.resolved.base_image.python == "3.10"


def test_a_pinned_python_no_nvidia_cuda_image_runs_is_a_conflict_with_passing_fixes():
    r = resolve(spec(python="3.11", installer="pip", **ONE_PIP_PACKAGE), M)
    assert kinds(r) == ["python_unsupported"]
    message = r.conflicts[0].message
    assert "venv over the base image's python3" in message and "Python 3.11" in message
    assert "ubuntu22.04: 3.10" in message and "ubuntu20.04: 3.8" in message
    assert any("packages.ubuntu.com/jammy/python3" in f.source for f in r.conflicts[0].facts)
    fixes = [f.changes for f in r.conflicts[0].fixes]
    assert fixes[0] == {"python": "3.10"} and {"installer": "conda"} in fixes
    for fix in r.conflicts[0].fixes:
        fixed = resolve(spec(python="3.11", installer="pip", **ONE_PIP_PACKAGE).with_changes(fix.changes), M)
        assert fixed.ok and _runs_the_locked_python(fixed), fix


def test_a_conda_environment_brings_its_own_python():
    r = resolve(spec(python="3.11", installer="conda", **ONE_PIP_PACKAGE), M)
    assert r.ok and r.resolved.python == "3.11" and r.resolved.base_image.python == "3.10"


def test_pip_completion_picks_builds_for_a_python_the_base_runs():
    # driver 470 starts images up to CUDA 11.4: ubuntu18.04/20.04 (python3 3.6/3.8); the newest
    # torch needs 3.9+, so the newest torch with a cp38 wheel wins, locked for 3.8
    r = resolve(spec({"pytorch": None}, driver="470.82.01", installer="pip", for_image=True), M)
    assert r.ok and r.resolved.python == r.resolved.base_image.python == "3.8"
    assert parse_version(r.resolved.frameworks[0].version) < parse_version("2.5")


def test_an_explicit_base_is_checked_against_the_python_it_runs():
    base = "nvidia/cuda:12.4.1-runtime-ubuntu22.04"
    r = resolve(spec(python="3.11", installer="pip", base_image=base, **ONE_PIP_PACKAGE), M)
    assert kinds(r) == ["python_unsupported"] and f"Python 3.10 on {base}" in r.conflicts[0].message
    assert [f.changes for f in r.conflicts[0].fixes][:2] == [{"python": "3.10"}, {"installer": "conda"}]
    unpinned = resolve(spec(installer="pip", base_image=base, **ONE_PIP_PACKAGE), M)
    assert unpinned.ok and unpinned.resolved.python == "3.10"
    # a framework image's Python is the environment's, pinned or not
    rapids = "rapidsai/base:24.08-cuda11.8-py3.11"
    assert resolve(spec(installer="pip", base_image=rapids), M).resolved.python == "3.11"
    assert kinds(resolve(spec(python="3.12", installer="pip", base_image=rapids), M)) == ["python_unsupported"]


@pytest.mark.parametrize("recipe", sorted(p.name for p in RECIPES.glob("*.yaml")))
@pytest.mark.parametrize("installer", ["pip", "conda"])
def test_an_ok_never_runs_another_python_than_the_lock(recipe, installer):
    import dataclasses

    r = resolve(dataclasses.replace(load_spec(RECIPES / recipe), installer=installer, for_image=True), M)
    if r.ok and r.resolved.base_image is not None and r.resolved.base_image.family != "unknown":
        assert _runs_the_locked_python(r) or r.resolved.base_image.python is None, \
            (r.resolved.python, r.resolved.base_image)


# --- 7. platform --------------------------------------------------------------------------------
@pytest.mark.parametrize("framework", ["pytorch", "tensorflow", "jax", "cupy"])
def test_no_cuda_on_macos(framework):
    assert kinds(resolve(spec({framework: None}, platform="osx-arm64"), M))[0] == "platform_unsupported"


def test_no_native_windows_gpu_tensorflow_from_211_or_jax():
    assert kinds(resolve(spec({"tensorflow": "2.11.0"}, platform="win-64"), M)) == ["platform_unsupported"]
    assert resolve(spec({"tensorflow": "2.10.0"}, platform="win-64"), M).ok
    assert kinds(resolve(spec({"jax": None}, platform="win-64"), M)) == ["platform_unsupported"]


# --- unknown facts, bad input, output ------------------------------------------------------------
def test_unknown_version_is_unverified_and_names_the_nearest_releases():
    r = resolve(spec({"pytorch": "2.99"}), M)
    assert r.verdict == "unverified" and r.usable and r.exit_code == 0 and not r.warnings
    [item] = r.unchecked
    assert "the matrix has no row for pytorch 2.99" in item.message and item.nearest == ("2.14.1",)
    assert set(item.links) == {"framework_build", "gpu_arch", "python", "driver"}
    strict = resolve(spec({"pytorch": "2.99"}, strict=True), M)
    assert strict.verdict == "unverified" and not strict.usable and strict.exit_code == 1 and not strict.conflicts
    between = resolve(spec({"jax": "0.1.60"}), M)  # the jax rows begin at 0.3.0
    assert between.unchecked[0].nearest == ("0.3.0",) and "jax 0.3.0" in between.unchecked[0].message


def test_unknown_gpu_is_a_warning_and_the_other_checks_still_run():
    r = resolve(spec({"pytorch": "1.6.0"}, gpus=("Voodoo 5",), python="3.10"), M)
    assert kinds(r) == ["python_unsupported"]  # the GPU is unknown; Python is still checked
    half = resolve(spec({"pytorch": "2.1.2"}, gpus=("Voodoo 5", "RTX 3090"), installer="pip"), M)
    assert half.verdict == "unverified" and [g.compute_capability for g in half.resolved.gpus] == [None, "8.6"]
    assert [u.links for u in half.unchecked] == [("gpu_arch",)]
    assert "'Voodoo 5'" in half.unchecked[0].message and "--gpu 6.1" in half.unchecked[0].message
    strict = resolve(spec({"pytorch": "2.1.2"}, gpus=("Voodoo 5",), installer="pip", strict=True), M)
    assert strict.verdict == "unverified" and strict.exit_code == 1 and not strict.conflicts


def test_a_compute_capability_no_gpu_has_is_unverified_and_a_new_driver_is_still_checked():
    odd = resolve(spec({"pytorch": "2.1.2"}, gpus=("9.9",), installer="pip"), M)
    assert odd.verdict == "unverified" and [u.links for u in odd.unchecked] == [("gpu_arch",)]
    assert "no GPU in the matrix has compute capability 9.9" in odd.unchecked[0].message
    assert resolve(spec({"pytorch": "2.1.2"}, gpus=("8.9",), installer="pip"), M).ok
    # a driver newer than every release the matrix lists: each check compares it with a sourced floor
    assert resolve(spec({"pytorch": "2.1.2"}, gpus=("A100",), driver="700.10.01", installer="pip"), M).ok


def test_strict_prefers_a_build_whose_links_are_all_checked():
    # open fields complete to the newest build that passes; where that one lacks a fact (today the
    # newest torch builds for CUDA 12.9 have no architecture list) the answer is unverified, and under
    # --strict completion takes the newest build whose every link is checked instead
    lenient = resolve(spec({"pytorch": None}, gpus=("B200",), driver="570.86.15", installer="pip"), M)
    strict = resolve(spec({"pytorch": None}, gpus=("B200",), driver="570.86.15", installer="pip", strict=True), M)
    assert strict.ok and not lenient.conflicts
    if lenient.verdict == "unverified":
        chosen, newest = strict.resolved.frameworks[0], lenient.resolved.frameworks[0]
        assert (parse_version(chosen.version), parse_version(chosen.cuda)) < \
            (parse_version(newest.version), parse_version(newest.cuda))


def test_resolution_carries_the_matrix_version_and_json():
    r = resolve(load_spec("recipes/pytorch-official.yaml"), M)
    data = r.to_json()
    # the recipe names a pytorch/pytorch image: the only link it may leave unchecked is that image's Python
    assert data["matrix_version"] == M.version and data["verdict"] == ("unverified" if r.unchecked else "ok")
    assert data["judged_for"] == "image" and not r.conflicts
    assert all(set(u["links"]) == {"python", "base_image"} for u in data["unchecked"])
    fw = r.resolved.frameworks[0]
    assert fw.pip_requirements[0] == f"torch=={fw.version}+cu{fw.cuda.replace('.', '')}"
    assert fw.pip_index_url and fw.archs


def test_unpinned_cupy_reaches_the_newest_published_series():
    # cupy-cuda12x's row is open-ended (">=11.5"); its `latest` release bounds the series.
    result = resolve(spec({"cupy": None}, gpus=("A100",), driver="550.54.15"))
    assert result.ok
    assert parse_version(result.resolved.frameworks[0].version) >= parse_version("14")


def test_framework_without_builds_for_the_installer_offers_the_other_installer_first():
    result = resolve(spec({"jax": None}, installer="conda", gpus=("A100",), driver="550.54.15"))
    conflict = result.conflicts[0]
    assert conflict.kind == "framework_cuda_mismatch"
    assert conflict.fixes[0].changes == {"installer": "pip"}
    assert len(set(conflict.facts)) == len(conflict.facts)  # each fact once


def test_conda_forge_cupy_pins_its_cuda_variant():
    result = resolve(spec({"cupy": None}, installer="conda", gpus=("A100",), driver="550.54.15"))
    assert result.ok
    fw = result.resolved.frameworks[0]
    assert (fw.installer, fw.version) == ("conda", "14")
    assert fw.conda_specs == ("cupy==14.*", f"cuda-version=={fw.cuda}") and fw.cuda.startswith("12.")
    assert fw.pip_requirements == () and result.resolved.channels == ("conda-forge",)


def test_conda_forge_cupy_on_cuda_11_pins_cudatoolkit():
    result = resolve(spec({"cupy": "13.3.0"}, installer="conda", cuda="11.8", gpus=("A100",), driver="535.104.05"))
    assert result.ok
    assert result.resolved.frameworks[0].conda_specs == ("cupy==13.3.0", "cudatoolkit==11.8.*")
    # CuPy 14 on conda-forge has no CUDA 11 build
    assert kinds(resolve(spec({"cupy": "14"}, installer="conda", cuda="11.8"))) == ["framework_cuda_mismatch"]


def test_conda_forge_cupy_for_cuda_13_needs_a_newer_driver():
    result = resolve(spec({"cupy": None}, installer="conda", cuda="13.0", gpus=("A100",), driver="535.104.05"))
    assert kinds(result)[0] == "driver_too_old"


def test_an_unpinned_installer_keeps_cupy_on_pip():
    # conda-forge's cupy ties pip's wheels on version and CUDA; pip stays the first choice.
    assert resolve(spec({"cupy": None}, gpus=("A100",), driver="550.54.15")).resolved.installer == "pip"


def test_lock_target_cuda_is_what_the_driver_reports():
    stack = resolve(spec({"pytorch": None}, gpus=("A100",), driver="550.54.15")).resolved
    assert stack.driver_cuda == "12.4"  # nvidia-smi's "CUDA Version" for R550
    assert parse_version(stack.max_driver_cuda) >= parse_version("12.4")  # plus minor-version compatibility


# --- CUDA library floors (JAX) and TensorFlow's arch lists ---------------------------------------
def test_jax_cuda11_wheel_refuses_cuda_libraries_older_than_118():
    r = resolve(spec({"jax": "0.4.23"}, cuda="11.1"), M)
    assert kinds(r) == ["library_abi"]
    assert ">= 11.8" in r.conflicts[0].message
    assert {"cuda": "11.8"} in [f.changes for f in r.conflicts[0].fixes]
    assert resolve(spec({"jax": "0.4.23"}, cuda="11.8"), M).ok


def test_jax_cuda12_floor_follows_the_release():
    assert kinds(resolve(spec({"jax": "0.4.23"}, cuda="12.1"), M)) == ["library_abi"]  # built with 12.2
    assert resolve(spec({"jax": "0.4.26"}, cuda="12.1"), M).ok  # compatible with CUDA >= 12.1
    assert kinds(resolve(spec({"jax": "0.4.26"}, cuda="12.0"), M)) == ["library_abi"]


def test_tensorflow_214_on_h100_is_ok_with_a_ptx_jit_warning():
    # Python 3.10: the python3 of ubuntu22.04, which the pip venv on an nvidia/cuda base runs
    r = resolve(spec({"tensorflow": "2.14.0"}, cuda="11.8", gpus=("H100",), python="3.10"), M)
    assert r.ok
    assert [w.kind for w in r.warnings] == ["ptx_jit"]


def test_tensorflow_compute_entry_carries_sass():
    # TensorFlow's compute_80 includes sm_80 SASS: an A100 needs no JIT, an RTX 4090 (8.9) neither
    r = resolve(spec({"tensorflow": "2.14.0"}, gpus=("A100", "RTX 4090")), M)
    assert r.ok and not [w for w in r.warnings if w.kind == "ptx_jit"]
    assert resolve(spec({"tensorflow": "2.16.1"}, gpus=("H100",)), M).ok


def test_tensorflow_arch_list_rejects_gpus_it_has_no_kernels_for():
    # 2.3 has sm_52 but no sm_50 SASS and only compute_70 PTX (tensorflow/tensorflow#46537)
    assert kinds(resolve(spec({"tensorflow": "2.3.0"}, gpus=("5.0",)), M)) == ["gpu_arch_unsupported"]
    assert kinds(resolve(spec({"tensorflow": "2.17.0"}, gpus=("5.2",)), M)) == ["gpu_arch_unsupported"]



def test_arch_conflict_says_why_an_older_cuda_fix_works():
    """sm_86 gets native code from CUDA 11.1, yet a CUDA 11.0 build is a valid fix: the
    message says that 11.0's sm_80 code runs on it through binary compatibility."""
    r = resolve(spec({"pytorch": "1.7.1"}, cuda="10.2", gpus=("RTX 3090",), installer="pip"), M)
    assert kinds(r) == ["gpu_arch_unsupported"]
    message = r.conflicts[0].message
    assert "needs CUDA >= 11.1 for native sm_86 code" in message
    assert "or CUDA >= 11.0 for code of an older sm_8x architecture, which it runs through binary compatibility" \
        in message
    assert "+cu110" in r.conflicts[0].fixes[0].description


def _torch(gpu: str, platform: str = "linux-64") -> Spec:
    return Spec(frameworks=(FrameworkRequest("pytorch", None),), gpus=(gpu,), driver="580.65.06", platform=platform)


@pytest.mark.parametrize("gpu", ["Jetson Nano", "Jetson TX2", "Jetson AGX Xavier", "Jetson Orin Nano",
                                 "Jetson AGX Thor", "GH200", "GB200", "GB10"])
def test_a_gpu_of_an_arm_system_is_one_platform_conflict_on_linux_64(gpu):
    r = resolve(_torch(gpu))
    (c,) = r.conflicts
    assert c.kind == "platform_unsupported" and r.resolved is None
    assert c.message.endswith("so linux-64 builds cannot run on it; set platform: linux-aarch64")
    assert "aarch64" in c.facts[0].source or "Arm" in c.facts[0].source


def test_jetson_nano_names_its_module_and_the_jetson_linux_release_it_was_read_from():
    (c,) = resolve(_torch("Jetson Nano")).conflicts
    assert c.message == ("Jetson Nano is the integrated GPU of an Arm (aarch64) Jetson module, so linux-64 builds "
                         "cannot run on it; set platform: linux-aarch64")
    assert "t210ref_release_aarch64" in c.facts[0].source


def test_the_platform_fix_is_offered_where_the_arm_build_resolves():
    (c,) = resolve(_torch("Jetson AGX Orin")).conflicts
    assert [(f.description, f.changes) for f in c.fixes] == [("build for linux-aarch64", {"platform": "linux-aarch64"})]


def _cli(*args: str) -> tuple[int, str]:
    """The command line in this process (the `main` the console script runs)."""
    import contextlib
    import io

    from envbuild.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = main(list(args))
    return code, out.getvalue()


@pytest.mark.parametrize("gpu", ["Jetson TK1", "Tegra K1"])
def test_a_32_bit_arm_gpu_is_a_conflict_on_every_platform_and_names_no_platform_to_set(gpu):
    # envbuild builds for no 32-bit Arm platform: the answer says so and suggests nothing
    for platform in ("linux-64", "linux-aarch64", "win-64"):
        code, out = _cli("resolve", "--framework", "pytorch", "--gpu", gpu, "--platform", platform, "--json")
        (c,) = json.loads(out)["conflicts"]
        assert code == 1 and c["kind"] == "platform_unsupported" and c["fixes"] == []
        assert c["message"].startswith(f"{gpu} is the integrated GPU of the Tegra K1 SoC")
        assert "32-bit Arm (armv7l)" in c["message"] and "set platform" not in c["message"]
        assert c["message"].endswith("; envbuild builds only for linux-64 and linux-aarch64, so nothing it writes "
                                     "runs on it: choose another GPU")
        assert "armhf" in c["facts"][0]["source"] and not c["facts"][0]["secondary"]
    code, out = _cli("resolve", "--framework", "pytorch", "--gpu", gpu)
    assert code == 1 and out.startswith("CONFLICT [platform_unsupported]") and "fix 1" not in out
    # the host's platform is no platform a spec may name
    assert _cli("resolve", "--framework", "pytorch", "--gpu", gpu, "--platform", "linux-armv7l")[0] == 2


def test_a_32_bit_arm_gpu_gets_no_dockerfile(tmp_path):
    code, _ = _cli("dockerfile", "--framework", "pytorch", "--gpu", "Jetson TK1", "-o", str(tmp_path / "Dockerfile"))
    assert code == 1 and not (tmp_path / "Dockerfile").exists()


@pytest.mark.parametrize("gpu", ["Jetson AGX Orin", "Jetson Nano", "GH200", "GB10"])
def test_on_linux_aarch64_the_host_column_changes_nothing(gpu):
    import dataclasses

    unlimited = dataclasses.replace(M, gpus=tuple(dataclasses.replace(g, host_platforms=()) for g in M.gpus))
    spec = _torch(gpu, "linux-aarch64")
    assert resolve(spec) == resolve(spec, unlimited)
    assert resolve(_torch(gpu), unlimited).verdict != "conflict" or gpu == "Jetson Nano"  # what linux-64 said before


# --- every kind a resolution reports is a ConflictKind -------------------------------------
@pytest.mark.parametrize("fields", [
    {"frameworks": {"pytorch": "1.6.0"}, "cuda": "11.0", "installer": "conda"},  # framework_cuda_mismatch
    {"frameworks": {"pytorch": "2.1.2"}, "driver": "450.80.02", "gpus": ("Tesla K80",), "python": "3.13"},
    {"frameworks": {"pytorch": "2.8.0"}, "driver": "450.80.02", "gpus": ("A100",), "cuda": "12.8"},  # driver_too_old
    {"frameworks": {"tensorflow": "2.14.0"}, "gpus": ("H100",), "driver": "550.54.15"},  # ptx_jit
    {"frameworks": {"jax": "0.4.30"}, "platform": "win-64"},  # platform_unsupported
    {"frameworks": {"tensorflow": "2.16.1"}, "cudnn": "7.6"},  # cudnn_mismatch
    {"frameworks": {"cupy": "13.3.0"}, "gpus": ("H100", "Tesla K80"), "driver": "535.104.05"},
    {"frameworks": {"pytorch": "2.8.0"}, "gpus": ("GTX 1080",), "driver": "525.60.13"},  # minor_version_compat
    {"frameworks": {"pytorch": "2.99"}, "gpus": ("NotAGPU 9000",)},  # unknown facts
])
def test_kinds_are_conflict_kind_members_and_serialise_as_their_text(fields):
    r = resolve(spec(fields.pop("frameworks"), **fields), M)
    reported = [c.kind for c in r.conflicts] + [w.kind for w in r.warnings]
    assert reported or r.unchecked
    assert all(type(k) is ConflictKind for k in reported), reported
    assert [c["kind"] for c in json.loads(json.dumps(r.to_json()))["conflicts"]] == [str(c.kind) for c in r.conflicts]


def test_an_image_tagged_with_a_major_alone_fits_every_minor_of_it():
    assert ImageCuda.parse("13").fits(CudaVersion(13, 2)) and not ImageCuda.parse("13").fits(CudaVersion(12, 9))
    assert ImageCuda.parse("12.4.1").fits(CudaVersion(12, 4)) and ImageCuda.parse("12.4").fits(CudaVersion(12, 4, 1))
    assert not ImageCuda.parse("12.4.1").fits(CudaVersion(12, 5))
    # newest release first; of one release, the shorter tag first (a major alone before its x.0)
    tags = ["12.4.1", "13", "12.4", "13.0", "11.8"]
    assert sorted(tags, key=lambda t: ImageCuda.parse(t).newest_first) == ["13", "13.0", "12.4", "12.4.1", "11.8"]
