"""envbuild.core.values: each value prints back as its canonical text, orders as the thing it
names does (packaging's order for versions), and bad text raises ValueError only (the
spec reader turns it into a one-line UserError)."""
from __future__ import annotations

import copy
import json
import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from packaging.version import Version

from envbuild import matrix
from envbuild.core.model import BASE_FAMILIES, CONFLICT_KINDS, INSTALLERS, PLATFORMS
from envbuild.infra.errors import UserError
from envbuild.matrix import lookup
from envbuild.spec import spec_from_mapping
from envbuild.core.values import (BaseFamily, ComputeCapability, ConflictKind, CudaVersion, DriverVersion, Installer,
                             Platform, major_minor)

SETTINGS = settings(max_examples=150, deadline=None)

CUDAS = st.tuples(st.integers(1, 20), st.integers(0, 12), st.none() | st.integers(0, 300))
# nvidia-smi's spelling: a 3-digit branch, then 2-3 digit parts that keep their zero padding
DRIVER_TEXTS = st.builds(lambda a, b, c: f"{a}.{b}" + (f".{c}" if c is not None else ""),
                         st.integers(100, 999), st.integers(0, 199).map(lambda n: f"{n:02d}"),
                         st.none() | st.integers(0, 99).map(lambda n: f"{n:02d}"))
CCS = st.tuples(st.integers(1, 12), st.integers(0, 9))


def cuda_text(parts) -> str:
    major, minor, patch = parts
    return f"{major}.{minor}" + (f".{patch}" if patch is not None else "")


@SETTINGS
@given(CUDAS)
def test_cuda_version_round_trips(parts):
    text = cuda_text(parts)
    v = CudaVersion.parse(text)
    assert str(v) == text and v.major_minor == f"{parts[0]}.{parts[1]}"
    assert CudaVersion.parse(f"  {text} ") == v


@SETTINGS
@given(CUDAS, DRIVER_TEXTS, CCS)
def test_values_survive_pickle_and_copy(cuda, driver, cc):
    # `copy.deepcopy` (which `dataclasses.asdict` applies to them) and pickle rebuild a
    # value from its text: the frozen `__setattr__` refuses a slot-by-slot copy
    for v in (CudaVersion.parse(cuda_text(cuda)), DriverVersion.parse(driver), ComputeCapability.parse(f"{cc[0]}.{cc[1]}")):
        for back in (pickle.loads(pickle.dumps(v, protocol=pickle.HIGHEST_PROTOCOL)), copy.deepcopy(v)):
            assert type(back) is type(v) and back == v and str(back) == str(v) and hash(back) == hash(v)


@SETTINGS
@given(CUDAS, CUDAS)
def test_cuda_version_orders_as_packaging(a, b):
    x, y = cuda_text(a), cuda_text(b)
    assert (CudaVersion.parse(x) < CudaVersion.parse(y)) == (Version(x) < Version(y))
    assert (CudaVersion.parse(x) == CudaVersion.parse(y)) == (Version(x) == Version(y))
    assert (hash(CudaVersion.parse(x)) == hash(CudaVersion.parse(y))) or Version(x) != Version(y)


@SETTINGS
@given(CUDAS)
def test_cuda_minor_version_drops_only_the_patch(parts):
    v = CudaVersion.parse(cuda_text(parts))
    minor = v.minor_version
    assert str(minor) == v.major_minor and minor.patch is None and minor <= v
    assert (minor == v) == (parts[2] in (None, 0))


@SETTINGS
@given(DRIVER_TEXTS, DRIVER_TEXTS)
def test_driver_version_round_trips_and_orders_numerically(x, y):
    assert str(DriverVersion.parse(x)) == x  # the zero padding stays: 450.36.06
    assert (DriverVersion.parse(x) < DriverVersion.parse(y)) == (Version(x) < Version(y))
    assert (DriverVersion.parse(x) == DriverVersion.parse(y)) == (Version(x) == Version(y))


def test_driver_versions_nvidia_prints():
    ordered = ["418.67", "450.36.06", "450.80.02", "535.104.05", "535.129.03", "581.57"]
    assert sorted((DriverVersion.parse(t) for t in reversed(ordered))) == [DriverVersion.parse(t) for t in ordered]
    assert str(DriverVersion.parse("R470")) == "470" and DriverVersion.parse("470") == DriverVersion.parse("470.0")


@SETTINGS
@given(CCS)
def test_compute_capability_one_parser_for_every_spelling(parts):
    major, minor = parts
    cc = ComputeCapability(major, minor)
    spellings = [f"{major}.{minor}", f"sm_{major}{minor}", f"SM{major}{minor}", f"compute_{major}{minor}",
                 f"sm_{major}{minor}a", major * 10 + minor, f"{major}{minor}"]
    assert {ComputeCapability.parse(s) for s in spellings} == {cc}
    assert str(cc) == f"{major}.{minor}" and cc.sm == major * 10 + minor and cc.sm_name == f"sm_{cc.sm}"


@SETTINGS
@given(CCS, CCS)
def test_compute_capability_orders_as_its_numbers(a, b):
    assert (ComputeCapability(*a) < ComputeCapability(*b)) == (a < b)


@pytest.mark.parametrize("text", ["3090", "970", "86", "A100", "", "8.10", "sm_8", "sm_1234"])
def test_a_number_alone_is_not_a_compute_capability_where_it_may_name_a_gpu(text):
    with pytest.raises(ValueError):
        ComputeCapability.parse(text, digits_alone=False)
    assert lookup.parse_compute_capability(text) is None


def test_matrix_lookup_reads_every_gpu_row_with_the_same_parser():
    for gpu in matrix.load().gpus:
        cc = ComputeCapability.parse(gpu.compute_capability)
        assert lookup.parse_compute_capability(f"sm_{cc.sm}") == gpu.compute_capability == str(cc)
        assert lookup.sm_of(gpu.compute_capability) == str(cc.sm)


@SETTINGS
@given(st.text(max_size=12) | st.integers(-10, 2000))
def test_bad_text_raises_value_error_only(text):
    for parse in (CudaVersion.parse, DriverVersion.parse, ComputeCapability.parse):
        try:
            value = parse(text)
        except ValueError:
            continue
        assert type(value).parse(str(value)) == value  # whatever is accepted prints back parseably


@pytest.mark.parametrize("target", [{"driver": "535.104.x"}, {"gpus": ["25.0"]}, {"driver": "R470"}])
def test_bad_values_in_a_spec_are_a_user_error(target):
    with pytest.raises(UserError):
        spec_from_mapping({"frameworks": {"pytorch": "2.1.*"}, "target": target})


def test_major_minor_is_one_spelling():
    assert major_minor(Version("12.1.1")) == "12.1" and major_minor((12,)) == "12.0"
    assert major_minor(CudaVersion.parse("11.0.221")) == "11.0" and lookup.major_minor("12") is None


def test_enums_are_their_text_in_output():
    assert json.dumps([Installer.PIP, Platform.LINUX_AARCH64]) == '["pip", "linux-aarch64"]'
    assert f"{Platform.WIN_64}" == str(Platform.WIN_64) == "win-64" and Installer("conda") == "conda"
    assert INSTALLERS == ("conda", "pip") and PLATFORMS[0] == "linux-64"
    assert BASE_FAMILIES == ("auto", *BaseFamily) and [p for p in Platform if p.buildable] == ["linux-64", "linux-aarch64"]


def test_conflict_kinds_have_one_order():
    assert CONFLICT_KINDS == tuple(k for k in ConflictKind if k.conflict)
    assert tuple(ConflictKind)[:len(CONFLICT_KINDS)] == CONFLICT_KINDS  # the warning-only kinds come last
    ranks = [ConflictKind.rank(k) for k in CONFLICT_KINDS]
    assert ranks == sorted(ranks) and ConflictKind.rank("ptx_jit") > max(ranks)
    assert CONFLICT_KINDS.index("platform_unsupported") < CONFLICT_KINDS.index("driver_too_old") \
        < CONFLICT_KINDS.index("gpu_arch_unsupported") < CONFLICT_KINDS.index("unknown_fact")
