"""Inputs as users paste them: GPU names the matrix does not know, nightlies and release
candidates, jaxlib's local labels, versions that were never released, releases older than
the rows, and platforms whose builds differ. Unknown facts leave their links unchecked: the
verdict is unverified (exit 0, exit 1 under --strict), never ok; every check that does not
need the missing fact still runs."""
from __future__ import annotations

import dataclasses
import json

import pytest

from envbuild import matrix
from envbuild.core.model import FrameworkRequest, Spec
from envbuild.core.versions import LocalLabel
from envbuild.frameworks import read_label
from envbuild.resolver import resolve

from cli_support import in_process
from test_fixes import assert_fixes_pass

M = matrix.load()


def spec(frameworks=None, **fields) -> Spec:
    return Spec(frameworks=tuple(FrameworkRequest(n, c) for n, c in (frameworks or {}).items()), **fields)


def kinds(result) -> list[str]:
    return [c.kind for c in result.conflicts]


def warned(result, *words) -> bool:
    """Is the result unverified, saying what it could not check with all of `words`?"""
    return result.verdict == "unverified" and any(all(x in u.message for x in words) for u in result.unchecked)


def refused_under_strict(request) -> bool:
    strict = resolve(dataclasses.replace(request, strict=True), M)
    return strict.verdict == "unverified" and strict.exit_code == 1 and not strict.conflicts


# --- local labels ---------------------------------------------------------------------------------
@pytest.mark.parametrize("label, read", [
    ("cu121", LocalLabel("cuda", "12.1")), ("cu92", LocalLabel("cuda", "9.2")),
    ("cuda111", LocalLabel("cuda", "11.1")), ("cuda92", LocalLabel("cuda", "9.2")),
    ("cuda11.cudnn86", LocalLabel("cuda", "11", "8.6")), ("cuda12.cudnn89", LocalLabel("cuda", "12", "8.9")),
    ("cuda11.cudnn805", LocalLabel("cuda", "11", "8.0.5")),
    ("cpu", LocalLabel("cpu")), ("rocm5.6", LocalLabel("rocm")), ("410ce96", LocalLabel("unknown")),
])
def test_local_labels_are_read(label, read):
    assert read_label(label) == read


def test_jaxlib_cuda_cudnn_label_sets_cuda_and_cudnn():
    r = resolve(spec({"jax": "0.4.7+cuda11.cudnn86"}), M)
    assert r.ok and r.resolved.frameworks[0].cuda.startswith("11.") and r.resolved.cudnn == "8.6"
    # the label's CUDA 11 is checked against the driver like any other pin
    old = resolve(spec({"jax": "0.4.7+cuda11.cudnn86"}, driver="440.33.01"), M)
    assert kinds(old) == ["driver_too_old"]


def test_jaxlib_label_cudnn_is_the_wheels_floor():
    r = resolve(spec({"jax": "0.4.11.dev20230517+cuda11.cudnn86"}, cudnn="8.5"), M)
    assert kinds(r) == ["cudnn_mismatch"] and "cuDNN 8.6" in r.conflicts[0].message
    assert_fixes_pass(r)
    assert resolve(spec({"jax": "0.4.7+cuda11.cudnn86"}, cudnn="8.9"), M).ok


def test_jaxlib_01_label_without_rows_still_gets_cuda_checks():
    # jaxlib 0.1.x has no release rows; its +cudaXYZ label names the CUDA the checks need
    assert kinds(resolve(spec({"jax": "0.1.69+cuda101"}, gpus=("RTX 3090",)), M)) == ["gpu_arch_unsupported"]
    assert kinds(resolve(spec({"jax": "0.1.69+cuda111"}, driver="440.33.01"), M)) == ["driver_too_old"]
    ok = resolve(spec({"jax": "0.1.69+cuda111"}, gpus=("RTX 3090",), driver="460.32.03"), M)
    assert warned(ok, "no row for jax")
    # jaxlib 0.1.72 dropped CUDA 10.x: the era's family rule decides without a row
    assert kinds(resolve(spec({"jax": "0.1.75+cuda102"}), M)) == ["framework_cuda_mismatch"]


def test_an_unknown_local_label_warns_and_the_release_is_judged():
    r = resolve(spec({"pytorch": "2.1.0+git1234abc"}, gpus=("A100",), installer="pip"), M)
    assert warned(r, "+git1234abc")


# --- pre-releases, nightlies, never-released pins ---------------------------------------------------
def test_release_candidate_is_judged_by_its_release():
    r = resolve(spec({"tensorflow": "2.17.0rc0"}, cuda="12.3", gpus=("H100",), python="3.10"), M)
    assert warned(r, "pre-release", "2.17.0")
    assert r.resolved.frameworks[0].version == "2.17.0"


def test_nightly_with_a_variant_the_release_lacks_gets_the_cuda_checks():
    # a cu121 nightly of 2.6 on a Blackwell card: CUDA 12.1 cannot build for sm_120
    r = resolve(spec({"pytorch": "2.6.0.dev20241112"}, cuda="12.1", gpus=("RTX 5070 Ti",), installer="pip"), M)
    assert kinds(r) == ["gpu_arch_unsupported"]
    assert_fixes_pass(resolve(r.spec, M))


def test_patch_release_without_rows_is_judged_by_its_series():
    # TensorFlow's tested configurations are per X.Y: 1.15.5 is built like 1.15.0 (CUDA 10.0)
    r = resolve(spec({"tensorflow": "1.15.5"}, gpus=("RTX 3090",)), M)
    # (and 1.15.0's requirements do not lock: gast 0.2.2 is an sdist only)
    assert kinds(r) == ["gpu_arch_unsupported", "not_lockable"]
    ok = resolve(spec({"tensorflow": "2.7.1"}, gpus=("V100",)), M)
    assert warned(ok, "2.7.0 rows") and ok.resolved.frameworks[0].pip_requirements == ("tensorflow==2.7.1",)


def test_pin_of_a_never_released_version_names_the_series():
    r = resolve(spec({"jax": "==0.4"}), M)
    assert warned(r, "0.4.0", "never released", "jax==0.4.*", "0.4.1")
    assert refused_under_strict(spec({"jax": "==0.4"}))


# --- unknown GPUs ---------------------------------------------------------------------------------------
def _cli(*args):
    return in_process("resolve", *args, "--json")


def test_cli_unknown_gpu_is_unverified_and_exit_1_under_strict():
    out = _cli("--framework", "pytorch==2.1.2", "--installer", "pip", "--gpu", "Quadro Imaginary 9000")
    data = json.loads(out.stdout)
    assert out.returncode == 0 and data["verdict"] == "unverified"
    assert data["resolved"]["gpus"][0] == {"name": "Quadro Imaginary 9000", "compute_capability": None,
                                            "datacenter": None}
    assert [u["links"] for u in data["unchecked"]] == [["gpu_arch"]] and "--gpu 6.1" in data["unchecked"][0]["message"]
    strict = _cli("--framework", "pytorch==2.1.2", "--installer", "pip", "--gpu", "Quadro Imaginary 9000", "--strict")
    answer = json.loads(strict.stdout)
    assert strict.returncode == 1 and answer["verdict"] == "unverified" and answer["conflicts"] == []
    unreadable = _cli("--framework", "pytorch", "--gpu", "RTX 3099?")
    assert unreadable.returncode == 2 and json.loads(unreadable.stdout)["verdict"] == "error"


def test_unknown_gpu_does_not_hide_the_other_gpus_or_the_driver():
    r = resolve(spec({"pytorch": "1.13.1+cu117"}, gpus=("Mystery Board", "H100"), installer="pip"), M)
    assert kinds(r) == ["gpu_arch_unsupported"] and any("'Mystery Board'" in u.message for u in r.unchecked)


# --- per-platform facts and family rules --------------------------------------------------------------
@pytest.mark.parametrize("frameworks, platform, python, kind", [
    ({"tensorflow": "1.12.0"}, "win-64", "3.7", "python_unsupported"),  # Windows GPU wheels: 3.5-3.6
    # linux-64 has the wheel, but its requirements do not lock: termcolor 1.1.0 is an sdist only
    ({"tensorflow": "1.12.0"}, "linux-64", "3.6", "not_lockable"),
    ({"tensorflow": "2.99"}, "win-64", None, "platform_unsupported"),  # no row: the 2.10 rule decides
    ({"jax": "0.99"}, "win-64", None, "platform_unsupported"),
    ({"rapids": "21.06"}, "win-64", None, "platform_unsupported"),
    ({"pytorch": "1.0.0"}, "win-64", "2.7", "python_unsupported"),  # Windows wheels: Python 3 only
    ({"cupy": "5.4.0"}, "win-64", "3.5", "python_unsupported"),
    ({"pytorch": "0.2.0"}, "osx-64", None, "platform_unsupported"),
    ({"tensorflow": "1.2.0"}, "osx-64", None, "platform_unsupported"),  # macOS GPU builds ended at 1.1
    ({"tensorflow": "1.1.0"}, "osx-64", None, None),
])
def test_platform_facts_decide(frameworks, platform, python, kind):
    installer = "pip" if "pytorch" in frameworks else None
    r = resolve(spec(frameworks, platform=platform, python=python, installer=installer), M)
    assert kinds(r)[:1] == ([kind] if kind else [])
    assert_fixes_pass(r)


def test_era_rules_decide_without_rows():
    # RAPIDS has needed Pascal (6.0) or newer since 0.x
    assert kinds(resolve(spec({"rapids": "0.19"}, gpus=("5.2",)), M)) == ["gpu_arch_unsupported"]
    # JAX removed Kepler from its wheels in 0.4.4
    assert kinds(resolve(spec({"jax": "0.4.7"}, gpus=("3.7",)), M)) == ["gpu_arch_unsupported"]


# --- older eras ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("request_, kind", [
    (spec({"pytorch": "1.3.1"}, gpus=("3.5",), installer="pip"), "gpu_arch_unsupported"),  # builder: 3.7+PTX from 1.3.1
    (spec({"pytorch": "1.3.0"}, gpus=("3.5",), installer="pip"), None),
    (spec({"pytorch": "1.2.0"}, gpus=("8.6",), installer="pip"), "gpu_arch_unsupported"),
    (spec({"pytorch": "0.4.1"}, cuda="9.2", gpus=("6.1",), installer="conda"), None),
    (spec({"pytorch": "1.1.0"}, cuda="10.1", installer="conda"), "framework_cuda_mismatch"),
    (spec({"jax": "0.3.25"}, cuda="11.0"), "library_abi"),  # README: CUDA 11.1 or newer
    (spec({"cupy": "6.7.0"}, cuda="10.1", driver="410.48"), "driver_too_old"),
])
def test_older_eras_resolve_from_rows(request_, kind):
    r = resolve(request_, M)
    assert kinds(r)[:1] == ([kind] if kind else []), [c.message for c in r.conflicts]
    assert_fixes_pass(r)


def test_cuda_only_request_with_a_major_still_checks_the_gpu():
    # `cuda: "12"` alone means the newest 12.x, which no longer builds for Kepler
    assert kinds(resolve(spec(cuda="12", gpus=("3.5",)), M)) == ["gpu_arch_unsupported"]


def test_rapids_eras_before_the_rows_keep_their_cuda_range():
    # RAPIDS 23.04's images (and packages) start at CUDA 11.2; 21.06 still had CUDA 10.1-11.2
    assert kinds(resolve(spec({"rapids": "23.04"}, cuda="10.2"), M)) == ["framework_cuda_mismatch"]
    assert resolve(spec({"rapids": "21.06"}, cuda="11.2", gpus=("V100",)), M).ok


def _older_era_versions():
    from envbuild.resolver.context import index

    ix = index(M)
    era = {"pytorch": "<1.4", "jax": "<0.4.10", "cupy": "<7"}
    from packaging.specifiers import SpecifierSet

    return [(name, v) for name, spec_ in era.items() for v in ix.versions[name] if SpecifierSet(spec_).contains(v)]


@pytest.mark.parametrize("name, version", _older_era_versions())
def test_fixes_pass_for_every_older_era_release(name, version):
    # an old driver, a GPU too new and one too old for these releases: every fix offered must resolve
    r = resolve(spec({name: version}, gpus=("3.0", "8.6"), driver="384.130", python="3.8"), M)
    assert r.verdict == "conflict"
    assert_fixes_pass(r)


def test_unknown_cuda_release_warns_that_the_gpus_were_not_checked():
    r = resolve(spec(cuda="14.0", gpus=("A100",)), M)
    assert warned(r, "no architecture list for CUDA 14.0")
    assert refused_under_strict(spec(cuda="14.0", gpus=("A100",)))
