"""Where a target's GPU memory comes from when the fleet file does not state it.

Sizes as people write them are read by `envbuild.core.memory_size`.
"""
from __future__ import annotations


def gpu_row_memory(gpu_row) -> float | None:
    """A GPU row's memory when the matrix records one (nominal GB, read as GiB)."""
    value = getattr(gpu_row, "memory_gb", None)
    if isinstance(value, (list, tuple)):  # several sizes (A100 40/80GB): the smallest is safe
        value = min(value) if value else None
    return float(value) if value else None
