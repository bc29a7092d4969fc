"""Integrity of every matrix table, and the platform facts the resolver depends on.

Integrity: every row has a source, no two rows share a key, every version and
specifier parses, GPU names/aliases point at one GPU each, base image references are
real-looking references. Facts: the NVIDIA driver and architecture rules, checked
through `envbuild.matrix.lookup` against the shipped data.
"""
from __future__ import annotations

import collections
import json
import re
import shutil
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from envbuild import frameworks, matrix
from envbuild.infra.paths import COMPILED_MATRICES, MATRICES_DIR
from envbuild.matrix import lookup as L
from envbuild.matrix import tables as t
from envbuild.matrix.__main__ import main


@pytest.fixture(scope="module")
def m() -> matrix.Matrices:
    return matrix.load()


def _v(text) -> tuple:
    return Version(str(text)).release if text is not None else None


# table -> (row key, version-valued fields, specifier-valued fields)
KEYS = {
    "cuda_releases": (lambda r: [_v(r.version)], ("version", "min_driver_linux", "min_driver_windows"), ()),
    "minor_compat": (lambda r: [r.major], ("floor_linux", "floor_windows"), ()),
    "driver_architectures": (lambda r: [(r.architecture, r.compute_capabilities)], ("first_driver_linux", "last_driver_linux"), ()),
    "gpus": (lambda r: [r.name], (), ()),
    "cuda_arch": (lambda r: [_v(r.cuda_min)], ("cuda_min", "cuda_max"), ()),
    "pytorch": (lambda r: [(_v(r.version), r.installer, _v(r.cuda), p) for p in r.platforms],
                ("version", "cuda", "cudnn"), ("python",)),
    "tensorflow": (lambda r: [(_v(r.version), _v(r.cuda), r.cudnn, r.python)], ("version", "cuda", "cudnn"), ("python",)),
    "jax": (lambda r: [_v(r.version)], ("version", "cudnn_min", "driver_min_linux"), ("python",)),
    "rapids": (lambda r: [(_v(r.version), r.cuda_major)], ("version", "cuda_min", "cuda_max", "driver_min_linux",
                                                            "min_compute_capability"), ()),
    "cupy": (lambda r: [(r.package, r.cupy_versions)], ("cuda_min", "cuda_max"), ("cupy_versions", "python")),
    "base_images": (lambda r: [r.ref], ("framework_version", "cuda", "cudnn", "python"), ()),
    "base_families": (lambda r: [r.family], (), ()),
    "distribution_pythons": (lambda r: [r.os], ("python",), ()),
    "installer_pythons": (lambda r: [r.installer], ("python_min",), ()),
    "image_env": (lambda r: [(r.env, r.fact)], (), ()),
    "base_carries": (lambda r: [r.family], (), ("releases",)),
    "gpu_peak": (lambda r: [r.gpu], (), ()),
    "family_rules": (lambda r: [(r.framework, r.releases, r.platform, r.gpu, r.python, r.min_compute_capability,
                                 r.cuda_min, r.cuda_max, r.cudnn_min)],
                     ("min_compute_capability", "cuda_min", "cuda_max", "cudnn_min"), ("releases", "python")),
    "wheels": (lambda r: [(r.package, _v(r.version))], ("version", "cuda"), ()),
    "lock_proofs": (lambda r: [(r.requirement, r.index, r.platform, p) for p in r.pythons.split()], ("version",), ()),
    "mig_floors": (lambda r: [r.parent], ("min_driver", "min_cuda"), ()),
    "mig_profiles": (lambda r: [(r.parent, r.parent_memory_gb, r.name)], (), ()),
    "cloud_instances": (lambda r: [r.instance_type], (), ()),
    "pythons": (lambda r: [r.version], ("version",), ()),
    "packages": (lambda r: [r.name], (), ()),
    "image_layers": (lambda r: [r.layer], (), ()),
    "target_glibc": (lambda r: [r.os], ("glibc",), ()),
    "target_defaults": (lambda r: ["defaults"], ("glibc", "linux"), ()),
    "target_archspec": (lambda r: [r.platform], (), ()),
}


def _rows(m: matrix.Matrices, table: str) -> tuple:
    """A shared table, or a framework's rows as its plugin types them."""
    return getattr(m, table) if table in matrix.TABLES else frameworks.get(table).rows(m)


def test_every_table_is_described():
    """Every shared table; a framework's table may be (its plugin types and checks its rows)."""
    assert set(matrix.TABLES) <= set(KEYS) <= set(matrix.TABLES) | set(frameworks.names())
    assert set(matrix.load().framework_rows) == set(frameworks.names())


def test_the_compiled_matrices_are_the_yaml(m):
    """Commands read envbuild/data/matrices.json: it must be what the YAML says today, with
    every value of the same type (a tuple stays a tuple, 11.0 a float)."""
    fresh = matrix.load_from(MATRICES_DIR)
    assert COMPILED_MATRICES.read_text(encoding="utf-8") == matrix.to_json(fresh), \
        "matrices/ changed: run `python -m envbuild.matrix` and commit envbuild/data/matrices.json"
    assert m == fresh and m.version == fresh.version and m.gpu_index == fresh.gpu_index
    for table in [*matrix.TABLES, *frameworks.names()]:
        assert [repr(row) for row in _rows(m, table)] == [repr(row) for row in _rows(fresh, table)], table
    assert main(["--check"]) == 0


def test_an_edit_of_the_yaml_reaches_the_compiled_file(tmp_path):
    data, target = tmp_path / "matrices", tmp_path / "matrices.json"
    shutil.copytree(MATRICES_DIR, data)
    gpus = data / "gpus.yaml"
    gpus.write_text(gpus.read_text().replace("compute_capability: '8.0'", "compute_capability: '8.1'", 1))
    assert matrix.compile_matrices(data, target) is True
    compiled = matrix.from_json(json.loads(target.read_bytes()))
    assert compiled == matrix.load_from(data) and compiled != matrix.load()
    assert compiled.version != matrix.load().version
    assert "8.1" in {g.compute_capability for g in compiled.gpus}
    assert matrix.compile_matrices(data, target) is False  # current: not written again


def test_the_data_version_names_the_yaml(tmp_path):
    """Locks and images record the data version: any change to a data file changes it."""
    data = tmp_path / "matrices"
    shutil.copytree(MATRICES_DIR, data)
    first = matrix.load_from(data).version
    assert first == matrix.load().version
    gpus = data / "gpus.yaml"
    gpus.write_text(gpus.read_text() + "\n# a comment changes the data version\n")
    assert matrix.load_from(data).version != first


def test_platform_tables_are_populated(m):
    assert len(m.cuda_releases) > 40 and len(m.minor_compat) == 3
    assert len(m.gpus) > 50 and len(m.cuda_arch) >= 10 and len(m.base_images) > 200


@pytest.mark.parametrize("table", sorted(KEYS))
def test_rows_have_sources_and_unique_keys(m, table):
    key, _, _ = KEYS[table]
    seen = collections.Counter(k for row in _rows(m, table) for k in key(row))
    assert [k for k, n in seen.items() if n > 1] == []
    assert all((row.source or row.reason).strip() for row in _rows(m, table))


@pytest.mark.parametrize("table", sorted(KEYS))
def test_versions_and_specifiers_parse(m, table):
    _, version_fields, spec_fields = KEYS[table]
    for row in _rows(m, table):
        for name in version_fields:
            value = getattr(row, name)
            if value is not None:
                Version(str(value))  # raises InvalidVersion on bad data
        for name in spec_fields:
            value = getattr(row, name)
            if value is not None:
                SpecifierSet(value)
        if table == "rapids":
            for py in row.python:
                Version(py)


def test_cuda_releases_keep_their_marks(m):
    by_version = {r.version: r for r in m.cuda_releases}
    assert by_version["13.1.1"].secondary and by_version["13.2.1"].secondary
    assert not by_version["13.1.0"].secondary and by_version["13.1.0"].inferred  # "Update N" -> x.y.N mapping
    assert not by_version["10.2.89"].inferred
    assert by_version["13.4.2"].min_driver_linux is None  # not read: stays unknown


def test_gpu_names_and_aliases_are_unambiguous(m):
    owner: dict[str, str] = {}
    for gpu in m.gpus:
        for name in (gpu.name, *gpu.aliases):
            key = L.gpu_key(name)
            assert owner.setdefault(key, gpu.name) == gpu.name, f"{name!r} names {owner[key]} and {gpu.name}"
            assert L.find_gpu(m, name) is gpu


def test_gpu_rows_are_well_formed(m):
    for gpu in m.gpus:
        assert re.fullmatch(r"\d{1,2}\.\d", gpu.compute_capability), gpu
        assert gpu.architecture and isinstance(gpu.datacenter, bool), gpu
        assert L.parse_compute_capability(gpu.compute_capability) == gpu.compute_capability


def test_user_typed_gpu_names(m):
    expected = {
        "V100": "7.0", "V100-32GB": "7.0", "Tesla V100-SXM2-16GB": "7.0", "A100": "8.0", "A100-80GB": "8.0",
        "A100-40GB": "8.0", "NVIDIA A100-SXM4-80GB": "8.0", "H100": "9.0", "H100-80GB": "9.0",
        "NVIDIA H100 80GB HBM3": "9.0", "H100 PCIe 80GB": "9.0", "H200": "9.0", "L4": "8.9", "L40S": "8.9",
        "T4": "7.5", "Tesla T4": "7.5", "A10": "8.6", "A10G": "8.6", "NVIDIA A10G": "8.6", "RTX 3090": "8.6",
        "NVIDIA GeForce RTX 3090": "8.6", "rtx-4090": "8.9", "RTX A6000": "8.6", "K80": "3.7", "P100": "6.0",
        "B200": "10.0", "GTX 1080 Ti": "6.1", "RTX 2080 Ti": "7.5", "RTX 5090": "12.0", "RTX 5060 Ti": "12.0",
    }
    found = {name: (L.find_gpu(m, name) or t.Gpu(source="-")).compute_capability for name in expected}
    assert found == expected
    assert L.find_gpu(m, "A10").name != L.find_gpu(m, "A100").name != L.find_gpu(m, "A10G").name
    assert L.find_gpu(m, "RTX 6000") is None  # Quadro RTX 6000 (7.5) or RTX 6000 Ada (8.9): ambiguous, so unknown
    assert L.find_gpu(m, "A10X") is None


def test_a10g_is_8_6_from_a_secondary_source(m):
    gpu = L.find_gpu(m, "A10G")
    assert gpu.compute_capability == "8.6" and gpu.secondary and gpu.datacenter


def test_datacenter_flags(m):
    assert L.find_gpu(m, "A100").datacenter and L.find_gpu(m, "T4").datacenter
    assert not L.find_gpu(m, "RTX 4090").datacenter and not L.find_gpu(m, "Jetson AGX Orin").datacenter


def test_compute_capability_text():
    assert L.parse_compute_capability("8.6") == "8.6" and L.parse_compute_capability("sm_86") == "8.6"
    assert L.parse_compute_capability("sm_120") == "12.0" and L.parse_compute_capability("12.1") == "12.1"
    assert not L.is_compute_capability("A100") and not L.is_compute_capability("3090")
    assert L.sm_of("8.6") == "86" and L.sm_of("10.0") == "100"


def test_arch_ranges_are_ordered_and_disjoint(m):
    rows = sorted(m.cuda_arch, key=lambda r: Version(r.cuda_min))
    for row in rows:
        assert Version(row.cuda_min) <= Version(row.cuda_max)
        assert row.sms and all(re.fullmatch(r"\d{2,3}", s) for s in row.sms)
        assert list(row.sms) == sorted(row.sms, key=int)
    for a, b in zip(rows, rows[1:]):
        assert Version(a.cuda_max) < Version(b.cuda_min)


def test_base_image_refs_are_real_references(m):
    ref = re.compile(r"^(?:[a-z0-9.-]+(?::\d+)?/)?[a-z0-9]+(?:[._/-][a-z0-9]+)*:[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$")
    for image in m.base_images:
        assert ref.match(image.ref) and not re.search(r"[{}<>$]|latest", image.ref), image.ref
        assert image.family in ("dlc", "pytorch", "rapids", "tensorflow", "cuda")
        assert image.flavour in (None, "base", "runtime", "devel")
        assert set(image.platforms) <= {"linux-64", "linux-aarch64"}
        assert image.cuda, image.ref  # GPU images only
        if image.framework:
            assert image.framework in ("pytorch", "tensorflow", "rapids") and image.framework_version


def test_dlc_rows_are_complete(m):
    dlc = [i for i in m.base_images if i.family == "dlc"]
    assert len(dlc) > 100
    for image in dlc:
        assert image.ref.startswith("763104351884.dkr.ecr.us-east-1.amazonaws.com/"), image.ref
        assert image.cuda and image.python and image.os, image.ref
        if not image.framework:  # AWS base images: the full CUDA release is the version
            assert len(Version(image.cuda).release) == 3, image.ref
        else:
            tag = image.ref.rsplit(":", 1)[1]
            assert Version(image.framework_version).release[:2] == Version(tag.split("-")[0]).release[:2], image.ref
    arm = [i for i in dlc if "-arm64:" in i.ref]
    assert arm and all(i.platforms == ("linux-aarch64",) for i in arm)


def test_every_pytorch_image_records_its_python(m):
    # the python3 the image runs, from its release's build definition and reports of the image
    rows = {i.ref.split(":")[1]: i for i in m.base_images if i.family == "pytorch"}
    assert rows and all(i.python for i in rows.values())
    assert rows["2.8.0-cuda12.8-cudnn9-runtime"].python == "3.11"  # the official recipe's base
    assert rows["1.12.0-cuda11.3-cudnn8-runtime"].python == "3.7" and rows["1.13.1-cuda11.6-cudnn8-runtime"].python == "3.10"
    # a tag whose own image was not reported takes its release's, and says so
    assert rows["2.8.0-cuda12.8-cudnn9-runtime"].inferred and not rows["2.8.0-cuda12.6-cudnn9-runtime"].inferred


def test_base_image_marks(m):
    by_ref = {i.ref: i for i in m.base_images}
    assert by_ref["pytorch/pytorch:2.0.1-cuda11.7-cudnn8-runtime"].secondary  # only seen in public Dockerfiles
    tf = by_ref["tensorflow/tensorflow:2.16.1-gpu"]
    assert tf.secondary and tf.inferred and tf.cuda == "12.3"
    assert not by_ref["nvidia/cuda:12.4.1-cudnn-devel-ubuntu22.04"].secondary
    assert by_ref["rapidsai/base:24.02-cuda11.8-py3.10"].platforms == ("linux-64", "linux-aarch64")


# --- facts -----------------------------------------------------------------------------------------
def test_cuda_11_0_needs_its_own_driver_without_minor_version_compatibility(m):
    driver, rule = L.min_driver_for_cuda(m, "11.0")
    assert driver == "450.36.06" and not rule.minor_compat
    assert L.min_driver_for_cuda(m, "11.0.3")[0] == "450.51.06"
    assert L.min_driver_for_cuda(m, "11.0.221")[0] == "450.36.06"  # conda cudatoolkit numbering


@pytest.mark.parametrize("cuda, floor", [("11.1", "450.80.02"), ("11.2", "450.80.02"), ("11.8", "450.80.02"),
                                         ("12.0", "525.60.13"), ("12.4", "525.60.13"), ("12.9", "525.60.13"),
                                         ("13.0", "580"), ("13.2", "580")])
def test_minor_version_compatibility_floors(m, cuda, floor):
    driver, rule = L.min_driver_for_cuda(m, cuda)
    assert driver == floor and rule.minor_compat and rule.source
    assert Version(rule.toolkit_driver) >= Version(floor)


@pytest.mark.parametrize("cuda, driver", [("9.0", "384.81"), ("9.2", "396.26"), ("10.0", "410.48"),
                                          ("10.1", "418.39"), ("10.2", "440.33")])
def test_before_11_each_minor_needs_its_own_driver(m, cuda, driver):
    found, rule = L.min_driver_for_cuda(m, cuda)
    assert found == driver and not rule.minor_compat


def test_minor_version_compatibility_never_crosses_a_major(m):
    assert L.max_cuda_for_driver(m, "470.57.02")[0] == "11.8"  # R470 runs every 11.x ...
    assert L.max_cuda_for_driver(m, "520.61.05")[0] == "11.8"  # ... and not 12.x
    assert L.max_cuda_for_driver(m, "570.124.06")[0] == "12.9"  # R570 is not enough for 13.x
    cuda, info = L.max_cuda_for_driver(m, "580.65.06")
    assert cuda.startswith("13.") and info.native_cuda == "13.0"
    # an H100 host with driver 580.159.04: nvidia-smi reports "CUDA Version: 13.0"
    assert L.max_cuda_for_driver(m, "580.159.04")[1].native_cuda == "13.0"
    assert L.max_cuda_for_driver(m, "450.51.06")[0] == "11.0"  # below the 11.x floor
    assert L.max_cuda_for_driver(m, "440.33")[0] == "10.2"
    assert L.max_cuda_for_driver(m, "300.1")[0] is None


def test_windows_uses_windows_drivers(m):
    assert L.min_driver_for_cuda(m, "11.4", "win-64")[0] == "452.39"
    assert L.min_driver_for_cuda(m, "10.2", "win-64")[0] == "441.22"
    assert L.min_driver_for_cuda(m, "12.1", "osx-arm64")[0] is None


def test_unknown_cuda_is_unknown(m):
    assert L.min_driver_for_cuda(m, "7.5")[0] is None
    assert L.min_driver_for_cuda(m, "not-a-version")[0] is None
    assert L.toolkit_sms(m, "12.7") is None  # never released


def test_sm_90_needs_cuda_11_8(m):
    assert L.min_cuda_for_sm(m, "sm_90") == "11.8" and L.min_cuda_for_sm(m, "9.0") == "11.8"
    assert "90" not in L.toolkit_sms(m, "11.7") and "90" in L.toolkit_sms(m, "11.8.0")


def test_cuda_13_dropped_maxwell_pascal_volta(m):
    sms13 = L.toolkit_sms(m, "13.0")
    assert not {"50", "52", "53", "60", "61", "62", "70", "72"} & set(sms13)
    assert {"75", "80", "90", "100", "120"} <= set(sms13)
    assert L.last_cuda_for_sm(m, "61") == "12.9" and L.last_cuda_for_sm(m, "70") == "12.9"


def test_cuda_12_dropped_kepler(m):
    assert {"35", "37"} <= set(L.toolkit_sms(m, "11.8")) and not {"35", "37"} & set(L.toolkit_sms(m, "12.0"))
    assert L.last_cuda_for_sm(m, "3.7") == "11.8"
    assert L.last_cuda_for_sm(m, "86") is None  # still in the newest toolkit


def test_os_only_bases_run_their_distributions_python3(m):
    """Every nvidia/cuda row knows the Python its image runs, read from its OS's archive."""
    by_os = {r.os: r for r in m.distribution_pythons}
    assert {os: r.python for os, r in by_os.items()}.items() >= {"ubuntu20.04": "3.8", "ubuntu22.04": "3.10",
                                                                  "ubuntu24.04": "3.12"}.items()
    for image in m.base_images:
        if image.family == "cuda":
            assert image.python == by_os[image.os].python, image.ref
            assert image.python_source == by_os[image.os].source
    # framework images keep their own Python (or none when it was not read)
    rapids = next(i for i in m.base_images if i.ref == "rapidsai/base:24.08-cuda11.8-py3.11")
    assert rapids.python == "3.11" and rapids.python_source is None


def test_base_image_filters(m):
    runtime = L.base_images(m, family="cuda", cuda="12.8", flavour="runtime")
    assert runtime and all(i.cuda.startswith("12.8") and i.flavour == "runtime" for i in runtime)
    rapids13 = L.base_images(m, family="rapids", cuda="13.0")
    assert {i.ref for i in rapids13} >= {"rapidsai/base:25.10-cuda13.0-py3.13", "rapidsai/base:26.02-cuda13-py3.13"}
    arm = L.base_images(m, family="dlc", platform="linux-aarch64", framework="PyTorch")
    assert arm and all("arm64" in i.ref for i in arm)
    ec2 = L.base_images(m, family="dlc", sagemaker=False)
    assert ec2 and not any("sagemaker" in i.ref for i in ec2)
    assert L.base_images(m, family="cuda", cuda="99") == []


def test_every_base_family_has_its_dockerfile_data(m):
    from envbuild.core.model import BASE_FAMILIES, CUSTOM_FAMILY

    families = {row.family for row in m.base_families}
    # every catalog family, and `custom` for the images outside the catalog (it has no rows)
    assert families - {CUSTOM_FAMILY} == set(BASE_FAMILIES) - {"auto"} == {row.family for row in m.base_images}
    assert CUSTOM_FAMILY in families
    assert [row.family for row in m.base_families if not row.image_python] == ["cuda"]
    assert all(row.dockerfile_comment.strip() for row in m.base_families)


def test_known_pythons_are_ordered_and_cover_every_base_image(m):
    known = L.pythons(m)
    assert list(known) == sorted(known, key=Version) and known[0] == "2.7"
    assert {row.python for row in m.base_images if row.python} <= set(known)
    assert all(row.first_release and row.pep for row in m.pythons)


def test_package_sets_are_read_from_the_one_table(m):
    from envbuild.core import package_sets

    by_set: dict[str, list[str]] = {}
    for row in m.packages:
        assert row.sets, row.name
        for name in row.sets:
            by_set.setdefault(name, []).append(row.name)
    assert package_sets._sets() == {name: tuple(names) for name, names in by_set.items()}
    # the lock writes its CUDA constraints in this order
    assert package_sets.package_set("cuda_variant") == ("cudatoolkit", "pytorch-cuda", "cuda-version")
    # every set the code asks for exists (an unknown one is a KeyError at run time)
    root = Path(package_sets.__file__).parent.parent  # the whole envbuild package
    used = {found for path in root.rglob("*.py")
            for found in re.findall(r'(?:package_(?:set|frozenset)\(|pip_name_set=)"([a-z_]+)"', path.read_text())}
    assert used == set(by_set)


def test_lock_targets(m):
    assert len(m.target_defaults) == 1  # one statement of the target when its OS is unknown
    assert {row.platform for row in m.target_archspec} == {"linux-64", "linux-aarch64"}


def test_a_row_needs_a_source_or_a_reason(tmp_path):
    (tmp_path / "packages.yaml").write_text("packages:\n  - {name: nvcc, sets: [needs_compiler], reason: 'a rule'}\n")
    assert matrix.load_from(tmp_path).packages[0].reason == "a rule"
    (tmp_path / "packages.yaml").write_text("packages:\n  - {name: nvcc, sets: [needs_compiler]}\n")
    with pytest.raises(matrix.MatrixError, match=r"packages.yaml:packages\[0\]: every row needs a source"):
        matrix.load_from(tmp_path)


def test_dlc_region_rewrite():
    ref = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.6.0-gpu-py312-cu126-ubuntu22.04-ec2"
    assert L.dlc_ref_in_region(ref, "eu-west-1") == ref.replace("us-east-1", "eu-west-1")
    assert L.dlc_ref_in_region("nvidia/cuda:12.4.1-base-ubuntu22.04", "eu-west-1") == "nvidia/cuda:12.4.1-base-ubuntu22.04"


def test_cuda_8_is_the_last_toolkit_for_fermi(m):
    assert L.min_driver_for_cuda(m, "8.0")[0] == "367.48"  # 8.0.44, the first 8.0 release (GA2 needs 375.26)
    assert {"20", "21", "60", "61"} <= set(L.toolkit_sms(m, "8.0"))
    assert L.last_cuda_for_sm(m, "sm_21") == "8.0"


def test_mig_and_cloud_rows_name_gpus_of_the_gpu_matrix(m):
    for row in m.mig_profiles + m.mig_floors:
        assert L.find_gpu(m, row.parent).name == row.parent
    for row in m.cloud_instances:
        assert L.find_gpu(m, row.gpu).name == row.gpu
    # every profile's memory is the GB its name states, and no slice exceeds its parent
    for p in m.mig_profiles:
        assert p.name.endswith(f".{p.memory_gb:g}gb") and p.memory_gb <= p.parent_memory_gb
        assert 1 <= p.compute_slices <= p.of_slices


def test_every_base_os_has_its_glibc(m):
    known = {row.os for row in m.target_glibc}
    assert {row.os for row in m.base_images if row.os} | {row.os for row in m.distribution_pythons} <= known
    assert {row.os: row.glibc for row in m.target_glibc if row.os in ("ubuntu16.04", "amzn2023")} == {
        "ubuntu16.04": "2.23", "amzn2023": "2.34"}


def test_a_base_os_without_a_glibc_row_does_not_load(tmp_path):
    (tmp_path / "base_images.yaml").write_text(
        "images:\n  - {ref: 'nvidia/cuda:12.4.1-base-ubuntu26.04', family: cuda, os: ubuntu26.04, source: x}\n")
    (tmp_path / "lock_targets.yaml").write_text("glibc:\n  - {os: ubuntu24.04, glibc: '2.39', source: x}\n")
    with pytest.raises(matrix.MatrixError, match=r"base_images.yaml:images\[0\]: OS 'ubuntu26.04' has no glibc row"):
        matrix.load_from(tmp_path)


def test_gpu_host_platforms_are_platforms_with_their_source(m):
    from envbuild.core.model import BUILD_PLATFORMS, GPU_HOST_PLATFORMS

    limited = [g for g in m.gpus if g.host_platforms]
    assert len(limited) == 18
    for g in limited:
        assert set(g.host_platforms) <= set(GPU_HOST_PLATFORMS), g.name
        assert g.host and g.host_source, g.name
    assert all(not g.host and not g.host_source for g in m.gpus if not g.host_platforms)
    # only the Tegra K1's 32-bit Arm boards are in no platform envbuild builds for
    assert sorted(g.name for g in limited if not set(g.host_platforms) & set(BUILD_PLATFORMS)) == ["Jetson TK1", "Tegra K1"]


@pytest.mark.parametrize("platforms, error", [
    ("['linux-arm64']", "unknown host platform(s) 'linux-arm64' for Jetson Imaginary (host_platforms is a list of: "
                        "linux-64, linux-aarch64, win-64, osx-64, osx-arm64, linux-armv7l)"),
    ("['linux-aarch64', 'armhf']", "unknown host platform(s) 'armhf' for Jetson Imaginary"),
    ("'linux-aarch64'", "host_platforms of Jetson Imaginary must be a list"),
])
def test_a_gpu_host_platform_that_is_no_platform_name_does_not_load(tmp_path, platforms, error):
    # a misspelt host platform would match no spec: every build would be refused on that GPU
    (tmp_path / "gpus.yaml").write_text(
        "gpus:\n  - {name: 'Jetson Imaginary', compute_capability: '8.7', host_platforms: " + platforms
        + ", host: 'a module', host_source: x, source: x}\n")
    with pytest.raises(matrix.MatrixError, match=re.escape("gpus.yaml:gpus[0]: " + error)):
        matrix.load_from(tmp_path)
    (tmp_path / "gpus.yaml").write_text(
        "gpus:\n  - {name: 'Jetson Imaginary', compute_capability: '3.2', host_platforms: ['linux-armv7l'], "
        "host: 'a module', host_source: x, source: x}\n")
    assert matrix.load_from(tmp_path).gpus[0].host_platforms == ("linux-armv7l",)
