"""Facts the framework tables (pytorch, tensorflow, jax, rapids, cupy) must keep.

Each pinned fact is one the resolver's verdicts hang on and that a careless edit of the
YAML could break: the conda pytorch 1.6.0 classic, the non-monotonic arch lists of the
cu128 wheels, which CUDA build a plain PyPI install gets, Python cut-offs, TensorFlow's
tested configs, JAX's cuDNN floors, RAPIDS' GPU floors and the CuPy wheel names. The
structural checks cross the tables: every CUDA variant must be a real CUDA release
(cuda_driver.yaml) and every compiled architecture must be one its toolkit can build
(cuda_arch.yaml).
"""
from __future__ import annotations

import collections
import re

import pytest
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from envbuild import frameworks, matrix


@pytest.fixture(scope="module")
def m() -> matrix.Matrices:
    return matrix.load()


def _rows(m: matrix.Matrices, name: str) -> tuple:
    return frameworks.get(name).rows(m)


def torch(m, version, installer=None, platform="linux-64"):
    return [b for b in _rows(m, "pytorch") if b.version == version and (installer is None or b.installer == installer)
            and platform in b.platforms]


def build(m, version, installer, cuda, platform="linux-64"):
    found = [b for b in torch(m, version, installer, platform) if b.cuda == cuda]
    assert len(found) == 1, (version, installer, cuda, platform, found)
    return found[0]


def majmin(text: str) -> tuple[int, int]:
    major, minor = Version(text).release[:2]
    return major, minor


# ---------------------------------------------------------------------------- PyTorch facts
def test_conda_pytorch_160_exists_only_for_cudatoolkit_92_101_102(m):
    rows = torch(m, "1.6.0", "conda")
    assert sorted(b.cuda for b in rows) == ["10.1", "10.2", "9.2"]
    assert {b.package for b in rows} == {"cudatoolkit=9.2", "cudatoolkit=10.1", "cudatoolkit=10.2"}
    assert all(b.channels == ("pytorch",) for b in rows)


def test_conda_cuda11_variant_of_19x_is_111_not_the_printed_113(m):
    # the previous-versions page prints cudatoolkit=11.3 for these; no such build exists
    for version in ("1.8.1", "1.9.0", "1.9.1"):
        assert sorted(b.cuda for b in torch(m, version, "conda")) == ["10.2", "11.1"]


def test_conda_package_kind_and_end_of_channel(m):
    for b in (b for b in _rows(m, "pytorch") if b.installer == "conda"):
        v = Version(b.version)
        if v < Version("1.0.1"):  # feature packages (cuda80, cuda90, cuda100) chose the variant
            assert b.package == "cuda" + b.cuda.replace(".", ""), b
            continue
        kind = "pytorch-cuda" if v >= Version("1.13") else "cudatoolkit"
        assert b.package == f"{kind}={b.cuda}", b
        assert v < Version("2.6"), "the pytorch conda channel ended with 2.5"
    assert {b.cuda for b in torch(m, "2.5.1", "conda")} == {"11.8", "12.1", "12.4"}


@pytest.mark.parametrize("version", ["2.7.0", "2.7.1"])
def test_27_cu128_lacks_volta_and_older(m, version):
    archs = build(m, version, "pip", "12.8").archs
    assert "sm_70" not in archs and "sm_50" not in archs and "sm_60" not in archs
    assert {"sm_100", "sm_120"} <= set(archs)
    assert "sm_70" in build(m, version, "pip", "12.6").archs


def test_28_cu128_drops_pascal_but_cu126_keeps_it(m):
    cu128 = set(build(m, "2.8.0", "pip", "12.8").archs)
    cu126 = set(build(m, "2.8.0", "pip", "12.6").archs)
    assert not {a for a in cu128 if re.fullmatch(r"sm_[56]\d", a)}
    assert "sm_70" in cu128  # Volta came back in 2.8
    assert {"sm_50", "sm_60"} <= cu126 and "sm_120" not in cu126


def test_volta_leaves_cu128_only_in_211(m):
    assert "sm_70" in build(m, "2.10.0", "pip", "12.8").archs
    assert "sm_70" not in build(m, "2.11.0", "pip", "12.8").archs


def test_hopper_first_ships_with_cu118(m):
    assert "sm_90" not in build(m, "1.13.1", "pip", "11.7").archs
    assert "sm_90" in build(m, "2.0.1", "pip", "11.8").archs
    assert "sm_86" not in build(m, "1.10.2", "pip", "10.2").archs  # the cu102 default: no Ampere


@pytest.mark.parametrize("version, cuda", [
    ("1.4.0", "10.1"), ("1.6.0", "10.2"), ("1.10.2", "10.2"), ("1.12.1", "10.2"), ("1.13.1", "11.7"),
    ("2.0.1", "11.7"), ("2.1.2", "12.1"), ("2.5.1", "12.4"), ("2.8.0", "12.8"), ("2.12.0", "13.0"), ("2.14.1", "13.0"),
])
def test_pypi_default_build(m, version, cuda):
    defaults = [b for b in torch(m, version, "pip") if b.pypi_default]
    assert [b.cuda for b in defaults] == [cuda]


def test_pypi_default_is_unique_and_untagged_builds_are_pypi_defaults(m):
    per_release = collections.Counter((b.version, p) for b in _rows(m, "pytorch") if b.pypi_default for p in b.platforms)
    assert max(per_release.values()) == 1
    for b in _rows(m, "pytorch"):
        assert not (b.pypi_default and b.installer != "pip"), b
        if b.installer == "pip" and Version(b.version) < Version("1.2"):
            # before 1.2 no wheel had a +cuXY tag: each variant was an untagged wheel on its own page
            assert b.package == "" and b.index_url.endswith("/cu" + b.cuda.replace(".", "")), b
        elif b.installer == "pip" and b.package == "":
            assert b.pypi_default, f"{b.version} cu{b.cuda}: an untagged wheel is the PyPI build"
        elif b.installer == "pip":
            assert b.package == "+cu" + b.cuda.replace(".", ""), b
    assert not any(b.pypi_default for b in torch(m, "1.8.2"))  # LTS wheels were never on PyPI


def test_python_cutoffs(m):
    def ok(version, python, installer="pip"):
        return all(python in SpecifierSet(b.python) for b in torch(m, version, installer))

    assert ok("1.13.1", "3.11") and not ok("1.13.1", "3.11", "conda")  # cp311 wheels were pip/Linux only
    assert not ok("1.13.1", "3.12") and not ok("2.1.2", "3.12") and ok("2.2.0", "3.12")
    assert not ok("1.7.0", "3.9") and ok("1.7.1", "3.9")
    assert ok("2.5.1", "3.13") and not ok("2.5.1", "3.13", "conda")
    assert not ok("2.9.0", "3.9") and ok("2.8.0", "3.9")
    first_312 = min((Version(b.version) for b in _rows(m, "pytorch") if b.python and "3.12" in SpecifierSet(b.python)))
    assert str(first_312) == "2.2.0"


def test_every_release_from_14_to_214_has_gpu_builds(m):
    series = {".".join(b.version.split(".")[:2]) for b in _rows(m, "pytorch")}
    expected = {f"1.{n}" for n in range(4, 14)} | {f"2.{n}" for n in range(0, 15)}
    assert expected <= series


# ---------------------------------------------------------------------------- PyTorch structure
def test_pip_rows_name_their_index_and_conda_rows_their_channels(m):
    for b in _rows(m, "pytorch"):
        if b.installer == "pip":
            variant = "cu" + b.cuda.replace(".", "")
            assert b.index_url and re.fullmatch(rf"https://download\.pytorch\.org/whl/(lts/1\.8/)?{variant}", b.index_url), b
            assert b.channels == ()
        else:
            assert b.installer == "conda" and b.channels and b.index_url is None, b
            assert b.channels[0] in ("pytorch", "pytorch-lts")


def test_python_specifiers_parse_and_arch_lists_are_well_formed(m):
    for b in _rows(m, "pytorch"):
        if b.python is not None:
            SpecifierSet(b.python)
        if b.archs is not None:
            assert b.archs and all(re.fullmatch(r"(sm|compute)_\d{2,3}", a) for a in b.archs), b
            sms = [int(a[3:]) for a in b.archs if a.startswith("sm_")]
            assert sms == sorted(sms), b
            for ptx in (a for a in b.archs if a.startswith("compute_")):
                assert "sm_" + ptx[8:] in b.archs, b  # PTX is shipped next to the SASS of the same arch
        for name, version in b.companions:
            assert name in ("torchvision", "torchaudio")
            Version(version)


def test_inferred_rows_say_how():
    """Every row marked inferred carries a note that says what it was derived from."""
    import yaml

    from envbuild.infra.paths import MATRICES_DIR

    for name, key in (("pytorch.yaml", "builds"), ("tensorflow.yaml", "builds"), ("jax.yaml", "releases"),
                      ("rapids.yaml", "releases")):
        for raw in yaml.safe_load((MATRICES_DIR / name).read_text())[key]:
            if raw.get("inferred"):
                assert raw.get("note"), (name, raw)


def test_cuda_variants_are_real_cuda_releases(m):
    known = {majmin(r.version) for r in m.cuda_releases}
    if not known:
        pytest.skip("matrices/cuda_driver.yaml has no releases yet")
    variants = {majmin(b.cuda) for b in _rows(m, "pytorch")}
    variants |= {majmin(r.cuda) for r in _rows(m, "tensorflow") if Version(r.cuda) >= Version("9.0")}
    variants |= {majmin(r.cuda_min) for r in _rows(m, "rapids")} | {majmin(r.cuda_max) for r in _rows(m, "rapids")}
    assert variants - known == set()


def test_compiled_archs_are_buildable_by_the_variant_toolkit(m):
    if not m.cuda_arch:
        pytest.skip("matrices/cuda_arch.yaml has no rows yet")

    def sms_for(cuda):
        v = Version(cuda)
        rows = [r for r in m.cuda_arch if Version(r.cuda_min) <= v and majmin(r.cuda_max) >= majmin(cuda)]
        assert len(rows) == 1, cuda
        return set(rows[0].sms)

    for b in _rows(m, "pytorch"):
        if b.archs:
            unknown = {a.split("_")[1] for a in b.archs} - sms_for(b.cuda)
            assert not unknown, f"{b.version} {b.installer} {b.cuda}: CUDA {b.cuda} cannot build {sorted(unknown)}"


# ---------------------------------------------------------------------------- TensorFlow
def tf(m, version):
    found = [r for r in _rows(m, "tensorflow") if r.version == version]
    assert len(found) == 1, version
    return found[0]


def test_tensorflow_tested_configs(m):
    assert (tf(m, "2.15.0").cuda, tf(m, "2.15.0").cudnn) == ("12.2", "8.9")
    assert (tf(m, "2.14.0").cuda, tf(m, "2.14.0").cudnn) == ("11.8", "8.7")
    assert (tf(m, "2.4.0").cuda, tf(m, "2.4.0").cudnn) == ("11.0", "8.0")
    assert tf(m, "1.5.0").cuda == "9.0"  # exactly 9.0: libcublas.so.9.0
    assert tf(m, "1.15.0").cuda == "10.0" and "3.8" not in SpecifierSet(tf(m, "1.15.0").python)
    assert "3.13" not in SpecifierSet(tf(m, "2.8.0").python)
    assert "3.9" not in SpecifierSet(tf(m, "2.21.0").python)


def test_tensorflow_windows_gpu_and_pip_extra_boundaries(m):
    for r in _rows(m, "tensorflow"):
        v = Version(r.version)
        assert r.windows_gpu == (v < Version("2.11")), r.version
        assert (r.pip_extra == "and-cuda") == (v >= Version("2.14")), r.version
        SpecifierSet(r.python)


# ---------------------------------------------------------------------------- JAX
def jax(m, version):
    found = [r for r in _rows(m, "jax") if r.version == version]
    assert len(found) == 1, version
    return found[0]


def test_jax_cudnn_floors(m):
    assert jax(m, "0.4.31").cudnn_min == "9.1"
    assert jax(m, "0.4.30").cudnn_min == "9.0"
    assert jax(m, "0.6.0").cudnn_min == "9.8"
    assert jax(m, "0.4.25").cudnn_min is None  # differs per CUDA plugin: not one value


def test_jax_cuda_majors_and_python(m):
    assert jax(m, "0.4.25").cuda_majors == (11, 12) and jax(m, "0.4.26").cuda_majors == (12,)
    assert jax(m, "0.7.1").cuda_majors == (12,) and jax(m, "0.7.2").cuda_majors == (12, 13)
    assert "3.9" not in SpecifierSet(jax(m, "0.4.31").python)
    assert "3.10" not in SpecifierSet(jax(m, "0.7.0").python)
    for r in _rows(m, "jax"):
        # a bare `cuda` extra (0.3.0-0.4.9) pulled the era's CUDA 11 jaxlib
        assert all((11 if e == "cuda" else int(e[4:6])) in r.cuda_majors for e in r.pip_extras), r.version
        assert r.driver_min_linux in (None, "450.80.02", "525.60.13"), r.version


def test_jax_03_python_follows_the_jaxlib_wheels(m):
    # jaxlib ships cp310 from 0.1.75 (its changelog; NixOS pins the cp310 cuda11 wheels of 0.3.0):
    # the classifiers of jax 0.3.0-0.3.10 stop at 3.9, the wheels do not. cp311 came with 0.3.24.
    for r in _rows(m, "jax"):
        v = Version(r.version)
        if Version("0.3.0") <= v < Version("0.4.0"):
            pythons = SpecifierSet(r.python)
            assert "3.7" in pythons and "3.10" in pythons, r.version
            assert ("3.11" in pythons) == (v >= Version("0.3.24")), r.version
            assert "3.12" not in pythons, r.version


def test_local_ptxas_rules(m):
    # a build that loads the system CUDA compiles with its ptxas: the mode says what the driver fallback does
    rules = {r.framework: r for r in m.family_rules if r.local_ptxas}
    assert {f: r.local_ptxas for f, r in rules.items()} == {"jax": "fails", "tensorflow": "slow"}
    assert all(r.local_ptxas in (None, "fails", "slow") for r in m.family_rules)
    # jax's local-toolkit builds end with 0.4.9's cuda11_cudnn82 wheel; TensorFlow's with 2.13
    assert rules["jax"].releases == "<0.4.10" and rules["tensorflow"].releases == "<2.14"


# ---------------------------------------------------------------------------- RAPIDS
def rapids(m, version, major):
    found = [r for r in _rows(m, "rapids") if r.version == version and r.cuda_major == major]
    assert len(found) == 1, (version, major)
    return found[0]


def test_rapids_gpu_floors(m):
    assert rapids(m, "23.12", 12).min_compute_capability == "6.0"
    assert rapids(m, "24.02", 12).min_compute_capability == "7.0"
    assert rapids(m, "24.02", 11).min_compute_capability == "7.0"
    assert all(r.min_compute_capability == "7.5" for r in _rows(m, "rapids") if r.cuda_major == 13)


def test_rapids_rows_before_23_08_follow_the_release_build_matrix(m):
    # rapidsai/docker ci/axis per release branch: CUDA 11 only from 21.06, Python moving with the releases
    assert (rapids(m, "21.06", 11).cuda_min, rapids(m, "21.06", 11).cuda_max) == ("11.0", "11.2")
    assert (rapids(m, "21.12", 11).cuda_min, rapids(m, "21.12", 11).cuda_max) == ("11.0", "11.5")
    assert (rapids(m, "22.10", 11).cuda_min, rapids(m, "23.06", 11).cuda_max) == ("11.2", "11.8")
    assert rapids(m, "21.06", 11).python == ("3.7", "3.8") and rapids(m, "22.02", 11).python == ("3.8", "3.9")
    assert rapids(m, "23.02", 11).python == ("3.8", "3.10") and rapids(m, "23.06", 11).python == ("3.9", "3.10")
    old = [r for r in _rows(m, "rapids") if Version(r.version) < Version("23.08")]
    assert len(old) == 13 and all(r.cuda_major == 11 for r in old)
    # RAPIDS pip packages begin with 22.10: earlier releases state that they have none ('')
    assert [r.version for r in old if r.pip_index_url == ""] == [r.version for r in old if Version(r.version) < Version("22.10")]
    assert not [r for r in _rows(m, "rapids") if Version(r.version) < Version("21.06")]


def test_rapids_cuda_ranges(m):
    assert not [r for r in _rows(m, "rapids") if r.cuda_major == 11 and Version(r.version) >= Version("25.08")]
    assert (rapids(m, "25.06", 12).cuda_min, rapids(m, "25.06", 12).cuda_max) == ("12.0", "12.9")
    for r in _rows(m, "rapids"):
        assert majmin(r.cuda_min)[0] == majmin(r.cuda_max)[0] == r.cuda_major
        assert Version(r.cuda_min) <= Version(r.cuda_max)


# ---------------------------------------------------------------------------- CuPy
def cupy_for(m, cuda: str, cupy_version: str, installer: str = "pip") -> list[str]:
    """Wheel names (or conda packages) that run CuPy `cupy_version` on CUDA `cuda` (major.minor)."""
    return [p.package for p in _rows(m, "cupy") if Version(p.cuda_min) <= Version(cuda) <= Version(p.cuda_max)
            and cupy_version in SpecifierSet(p.cupy_versions) and p.installer == installer]


def test_cupy_wheels(m):
    assert [p.cuda_min for p in _rows(m, "cupy") if p.package == "cupy-cuda12x"] == ["12.0"]
    for minor in range(0, 10):
        assert cupy_for(m, f"12.{minor}", "13.3.0") == ["cupy-cuda12x"]
    assert cupy_for(m, "12.4", "14.0.0") == ["cupy-cuda12x"]
    assert cupy_for(m, "11.8", "13.0.0") == ["cupy-cuda11x"]
    assert cupy_for(m, "11.8", "14.0.0") == []  # CuPy 14 has no CUDA 11 wheel
    assert cupy_for(m, "10.2", "12.0.0") == ["cupy-cuda102"]
    assert cupy_for(m, "13.0", "14.1.0") == ["cupy-cuda13x"]
    assert cupy_for(m, "11.4", "10.6.0") == ["cupy-cuda114"]
    for p in _rows(m, "cupy"):
        SpecifierSet(p.cupy_versions)
        assert p.python and SpecifierSet(p.python)


def test_cupy_conda_forge_builds(m):
    # conda-forge/cupy-feedstock: CUDA 11 builds (cudatoolkit) for 12.0-13.6, CUDA 12 builds
    # (cuda-version >=12,<13) from 12.0 on, CUDA 13 builds from 13.6.0 on.
    conda = [p for p in _rows(m, "cupy") if p.installer == "conda"]
    assert {p.package for p in conda} == {"cupy"} and all(p.channels == ("conda-forge",) for p in conda)
    assert all("conda-forge/cupy-feedstock" in p.source and not p.inferred for p in conda)
    assert all(p.installer == "pip" and p.package.startswith("cupy-cuda") for p in _rows(m, "cupy") if p not in conda)
    assert cupy_for(m, "11.8", "13.6.0", "conda") == ["cupy"]
    assert cupy_for(m, "11.2", "12.0.0", "conda") == ["cupy"]
    assert cupy_for(m, "11.8", "14.0.0", "conda") == []  # 14.0.0 on skips cuda_compiler_version 11.8
    assert cupy_for(m, "11.1", "12.1.0", "conda") == []  # per-minor 11.0/11.1 builds are not covered
    assert cupy_for(m, "12.0", "12.0.0", "conda") == ["cupy"]
    assert cupy_for(m, "12.9", "14.1.1", "conda") == ["cupy"]
    assert cupy_for(m, "13.0", "13.6.0", "conda") == ["cupy"]
    assert cupy_for(m, "13.0", "13.5.1", "conda") == []  # first CUDA 13 build: 13.6.0
    assert cupy_for(m, "13.2", "14.1.1", "conda") == ["cupy"]
    assert {p.latest for p in conda if p.latest} == {"14.1.1"}


# ---------------------------------------------------------------------------- JAX CUDA floors, TF arch lists
def test_jax_cuda_minor_floors(m):
    # cuda11 wheels were built against CUDA 11.8; the CUDA 12 floor moved 12.0 -> 12.2 (0.4.17) -> 12.3
    # (0.4.24) and down to 12.1 once the check took a minimum (0.4.26)
    assert dict(jax(m, "0.4.16").cuda_min) == {11: "11.8", 12: "12.0"}
    assert dict(jax(m, "0.4.23").cuda_min) == {11: "11.8", 12: "12.2"}
    assert dict(jax(m, "0.4.24").cuda_min) == {11: "11.8", 12: "12.3"}
    assert dict(jax(m, "0.4.26").cuda_min) == {12: "12.1"}
    assert dict(jax(m, "0.8.0").cuda_min) == {12: "12.1", 13: "13.0"}
    for r in _rows(m, "jax"):
        floors = dict(r.cuda_min)
        assert set(floors) <= set(r.cuda_majors), r.version
        assert all(majmin(v)[0] == major for major, v in floors.items()), r.version


def test_tensorflow_wheel_arch_lists(m):
    # build_info.py of the Linux wheels, in TensorFlow's notation (compute_XY = SASS + PTX of XY)
    assert tf(m, "2.3.0").archs == ("sm_35", "sm_37", "sm_52", "sm_60", "sm_61", "compute_70")
    assert tf(m, "2.14.0").archs == ("sm_35", "sm_50", "sm_60", "sm_70", "sm_75", "compute_80")
    assert tf(m, "2.15.0").archs == ("sm_50", "sm_60", "sm_70", "sm_75", "compute_80")  # no Hopper SASS
    assert tf(m, "2.16.1").archs == ("sm_50", "sm_60", "sm_70", "sm_80", "compute_90")
    assert tf(m, "2.17.0").archs == ("sm_60", "sm_70", "sm_80", "sm_89", "compute_90")  # Maxwell dropped
    assert tf(m, "2.2.0").archs is None  # the wheel's build_info.py did not list them yet
    for r in _rows(m, "tensorflow"):
        if r.archs is not None:
            assert r.archs and all(re.fullmatch(r"(sm|compute)_\d{2,3}", a) for a in r.archs), r.version
