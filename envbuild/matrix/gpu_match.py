"""GPU names as people and nvidia-smi write them -> rows of the GPU table.

nvidia-smi prints "NVIDIA A100-SXM4-80GB", "Tesla V100-PCIE-16GB", "NVIDIA H100 80GB HBM3",
"NVIDIA GeForce RTX 3060 Laptop GPU" or "Quadro T1000 with Max-Q Design"; users write
"a100 80gb", "RTX-3060" or "V100". A name is matched in four steps, each tolerant of case,
spaces, dashes and a leading NVIDIA/GeForce/Tesla:

1. exactly, against every row's name and aliases;
2. with its words in any order ("A100 PCIe 80GB" = "A100-PCIE-80GB");
3. without the words that only name the board: memory size, SXM/PCIe/NVL/HBM, Laptop GPU,
   Mobile, Max-Q Design, Generation, Edition. They never change the compute capability within
   one model name, so "RTX 3060 Laptop GPU" finds the GeForce RTX 3060 row. A vGPU profile
   name ("GRID A100-40C", "NVIDIA A10-24Q") finds the GPU it runs on;
4. without the product-line words Quadro and Ada as well ("P4000" = "Quadro P4000").

A name that steps 2-4 lead to several rows is accepted only when all of them share one
compute capability (the most general row is returned); otherwise it is ambiguous and the rows
are reported, never guessed: "RTX 6000" is the Quadro RTX 6000 (7.5) or the RTX 6000 Ada (8.9).

The index is built with the data and compiled with it into the package (see
`envbuild.matrix`), so a command only reads it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

_VENDOR_WORDS = ("nvidia", "geforce", "tesla")
_LINE_WORDS = ("quadro", "ada")
_VGPU_PROFILE = re.compile(r"^\d+[abcq]$")
_BOARD_WORD = re.compile(r"^(\d+gb?|sxm\d*|pcie|nvl|hbm\d*e?|laptop|mobile|gpu|with|max|q|maxq|design|generation|edition)$")


def words(text: str) -> list[str]:
    """Lower-case words of a GPU name, without a leading NVIDIA/GeForce/Tesla."""
    out = re.sub(r"[^a-z0-9]+", " ", text.lower()).split()
    while out and out[0] in _VENDOR_WORDS:
        out.pop(0)
    return out


def exact_key(text: str) -> str:
    return "".join(words(text))


def bag_key(text: str) -> str:
    return " ".join(sorted(words(text)))


def loose_key(text: str) -> str:
    ws = words(text)
    if len(ws) > 1 and _VGPU_PROFILE.match(ws[-1]):
        # a vGPU profile ("GRID A100-40C", "NVIDIA A10-24Q") runs on that GPU
        ws = ws[1:-1] if ws[0] == "grid" else ws[:-1]
    return "".join(w for w in ws if not _BOARD_WORD.match(w))


def family_key(text: str) -> str:
    return loose_key(" ".join(w for w in words(text) if w not in _LINE_WORDS))


@dataclass(frozen=True)
class GpuIndex:
    """Row numbers (into `Matrices.gpus`) by key; `version` is the data version it was built for."""

    version: str
    rows: int
    exact: dict[str, int]
    bag: dict[str, tuple[int, ...]]
    loose: dict[str, tuple[int, ...]]
    family: dict[str, tuple[int, ...]]


def build_index(version: str, gpus) -> GpuIndex:
    exact: dict[str, int] = {}
    bag: dict[str, list[int]] = {}
    loose: dict[str, list[int]] = {}
    family: dict[str, list[int]] = {}
    for i, gpu in enumerate(gpus):
        for name in (gpu.name, *gpu.aliases):
            exact.setdefault(exact_key(name), i)
            for table, k in ((bag, bag_key(name)), (loose, loose_key(name)), (family, family_key(name))):
                if k and i not in table.setdefault(k, []):
                    table[k].append(i)
    return GpuIndex(version, len(gpus), exact, *({k: tuple(v) for k, v in t.items()} for t in (bag, loose, family)))


def _specificity(gpu) -> tuple[int, int]:
    # the family row ("NVIDIA A100") before its board variants ("NVIDIA A100-SXM4-80GB")
    return min(len(words(n)) for n in (gpu.name, *gpu.aliases)), len(gpu.name)


def candidates(index: GpuIndex, gpus, text: str) -> list:
    """Rows `text` may name: one row when it names one GPU; several when it is ambiguous
    (they then differ in compute capability); none when it names no GPU of the table."""
    i = index.exact.get(exact_key(text))
    if i is not None:
        return [gpus[i]]
    sizes = {int(w.rstrip("gb")) for w in words(text) if re.fullmatch(r"\d+gb?", w)}
    for table, k in ((index.bag, bag_key(text)), (index.loose, loose_key(text)), (index.family, family_key(text))):
        rows = [gpus[i] for i in table.get(k, ())]
        if len({g.compute_capability for g in rows}) == 1:
            # "A100 80GB": a board of that memory size when the table has one
            sized = [g for g in rows if g.memory_gb in sizes]
            return [min(sized or rows, key=_specificity)]
        if rows:
            return rows
    return []
