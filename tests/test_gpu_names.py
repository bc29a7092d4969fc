"""GPU names as nvidia-smi and users write them -> one row of matrices/gpus.yaml.

`tests/data/gpu_names.yaml` holds real names collected from public threads (each with its
URL); every one must resolve to the compute capability the thread or NVIDIA states, and the
names the table does not know must stay unknown rather than be guessed.
"""
from __future__ import annotations

import collections
import re
from pathlib import Path

import pytest
import yaml

from envbuild import matrix
from envbuild.matrix import gpu_match
from envbuild.matrix import lookup as L

SAMPLES = yaml.safe_load((Path(__file__).parent / "data" / "gpu_names.yaml").read_text())["samples"]

# every compute capability NVIDIA's CUDA GPUs tables list, and the architecture of each major
VALID_CC = {"1.0", "1.1", "1.2", "1.3", "2.0", "2.1", "3.0", "3.2", "3.5", "3.7", "5.0", "5.2", "5.3", "6.0",
            "6.1", "6.2", "7.0", "7.2", "7.5", "8.0", "8.6", "8.7", "8.9", "9.0", "10.0", "10.3", "11.0", "12.0", "12.1"}
ARCH_BY_MAJOR = {"1": "Tesla", "2": "Fermi", "3": "Kepler", "5": "Maxwell", "6": "Pascal", "7": ("Volta", "Turing"),
                 "8": ("Ampere", "Ada"), "9": "Hopper", "10": "Blackwell", "11": "Blackwell", "12": "Blackwell"}


@pytest.fixture(scope="module")
def m() -> matrix.Matrices:
    return matrix.load()


def test_samples_are_many_and_sourced():
    assert len(SAMPLES) >= 80 and len({s["name"] for s in SAMPLES}) == len(SAMPLES)
    assert all(re.match(r"^https://github\.com/[^/]+/[^/]+/(issues|pull)/\d+$", s["url"]) for s in SAMPLES)
    kinds = collections.Counter(s["kind"] for s in SAMPLES)
    assert set(kinds) <= {"nvidia-smi", "device", "driver-list", "report"} and kinds["nvidia-smi"] >= 20


@pytest.mark.parametrize("sample", SAMPLES, ids=[s["name"] for s in SAMPLES])
def test_nvidia_smi_name_resolves_to_its_compute_capability(m, sample):
    gpu = L.find_gpu(m, sample["name"])
    assert (gpu.compute_capability if gpu else None) == sample["cc"], L.gpu_candidates(m, sample["name"])


def test_names_are_case_space_dash_and_vendor_tolerant(m):
    for spelling in ("NVIDIA A100-SXM4-80GB", "nvidia a100 sxm4 80gb", "A100 SXM4 80GB", "a100-sxm4-80gb"):
        assert L.find_gpu(m, spelling).name == "NVIDIA A100-SXM4-80GB"
    assert L.find_gpu(m, "A100 PCIe 80GB").memory_gb == 80  # words in another order
    assert L.find_gpu(m, "H100 94GB").name == "NVIDIA H100 NVL"  # the board of that size
    assert L.find_gpu(m, "Tesla P100-PCIE-12GB").memory_gb == 12
    assert L.find_gpu(m, "GeForce RTX 2060 with Max-Q Design").name == "GeForce RTX 2060"
    assert L.find_gpu(m, "NVIDIA RTX 5000 Ada Generation Laptop GPU").compute_capability == "8.9"
    assert L.find_gpu(m, "GRID T4-16Q").name == "NVIDIA T4"  # a vGPU profile runs on its GPU


def test_ambiguous_names_are_reported_not_guessed(m):
    for name in ("RTX 6000", "RTX 5000", "RTX 4000"):
        rows = L.gpu_candidates(m, name)
        assert len({g.compute_capability for g in rows}) == 2 and L.find_gpu(m, name) is None, name
    assert L.find_gpu(m, "GeForce GT 640") is None  # GDDR5 board 3.5, GDDR3 board 2.1
    assert L.find_gpu(m, "GeForce GT 640 (GDDR5)").compute_capability == "3.5"
    assert L.find_gpu(m, "GeForce G210M") is None  # NVIDIA's legacy table lists it under both 1.1 and 1.2


def test_every_row_has_a_source_and_a_valid_compute_capability(m):
    assert len(m.gpus) >= 500
    for gpu in m.gpus:
        assert gpu.source.strip() and gpu.compute_capability in VALID_CC, gpu
        assert gpu.architecture.startswith(ARCH_BY_MAJOR[gpu.compute_capability.split(".")[0]]), gpu
        assert isinstance(gpu.datacenter, bool), gpu
        stated = re.search(r"(\d+)GB\b", gpu.name)
        if gpu.memory_gb is not None:
            assert isinstance(gpu.memory_gb, int) and gpu.memory_gb > 0, gpu
        if stated:  # a size in the name is the board's memory (GH200 480GB counts CPU memory: sourced apart)
            assert gpu.memory_gb is not None and (gpu.memory_gb == int(stated.group(1)) or "GH200" in gpu.name), gpu


def test_no_key_names_two_compute_capabilities(m):
    """Every name and alias is one exact key of one row, and no looser key (words in any order,
    board words dropped) is shared by rows of different compute capabilities. The product-line
    key (Quadro/Ada dropped) may be: those names are the ambiguous ones and resolve to nothing."""
    index = gpu_match.build_index(m.version, m.gpus)
    owner: dict[str, int] = {}
    for i, gpu in enumerate(m.gpus):
        for name in (gpu.name, *gpu.aliases):
            assert owner.setdefault(gpu_match.exact_key(name), i) == i, (name, m.gpus[owner[gpu_match.exact_key(name)]].name)
            assert L.find_gpu(m, name) is gpu, name
    for table in (index.bag, index.loose):
        clashes = {k: rows for k, rows in table.items() if len({m.gpus[i].compute_capability for i in rows}) > 1}
        assert clashes == {}
    ambiguous = [k for k, rows in index.family.items() if len({m.gpus[i].compute_capability for i in rows}) > 1]
    assert sorted(ambiguous) == ["rtx4000", "rtx5000", "rtx6000"]


def test_index_is_compiled_with_the_data(m):
    assert isinstance(m.gpu_index, gpu_match.GpuIndex) and m.gpu_index.version == m.version
    assert L._gpu_index(m) is m.gpu_index  # no rebuild per process


def test_spec_takes_nvidia_smi_names_and_reports_ambiguity():
    from envbuild.infra.errors import UserError
    from envbuild.matrix.lookup import spec_gpu_check
    from envbuild.spec import spec_from_text

    spec = spec_from_text("frameworks: {pytorch: null}\ntarget: {gpus: ['NVIDIA GeForce RTX 3060 Laptop GPU', "
                          "'Tesla V100-PCIE-32GB']}\n")
    assert spec.gpus == ("NVIDIA GeForce RTX 3060 Laptop GPU", "Tesla V100-PCIE-32GB")
    with pytest.raises(UserError) as err:
        spec_from_text("frameworks: {pytorch: null}\ntarget: {gpus: ['RTX 6000']}\n", gpu_check=spec_gpu_check)
    assert "NVIDIA RTX 6000 Ada (8.9) or Quadro RTX 6000 (7.5)" in str(err.value) and "did you mean" not in str(err.value)


def test_matrix_gpu_shows_the_row_and_names_ambiguity(capsys):
    from envbuild import cli

    assert cli.main(["matrix", "gpu", "NVIDIA A100-SXM4-80GB"]) == 0
    out = capsys.readouterr().out
    assert "compute capability 8.0" in out and "memory: 80 GB" in out
    assert cli.main(["matrix", "gpu", "RTX 6000"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "ambiguous GPU 'RTX 6000'" in err[0] and "Quadro RTX 6000 (7.5)" in err[0]
