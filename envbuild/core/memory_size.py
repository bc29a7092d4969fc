"""GPU memory sizes as people write them: `40GiB`, `40 GB`, `40G`, `40960MiB`, or a bare
number (GiB). Used by specs (`resources.gpu_memory`) and fleet files alike, so it depends on
nothing else in envbuild.

GPU and MIG memory sizes are nominal ("80GB", "3g.40gb") and NVIDIA counts them in binary
units (an A100 80GB has 81920 MiB), so nominal GB are compared as GiB.
"""
from __future__ import annotations

import re

_UNITS = {"": 1.0, "g": 1.0, "gi": 1.0, "gib": 1.0, "gb": 1e9 / 2**30,
          "m": 1 / 1024, "mi": 1 / 1024, "mib": 1 / 1024, "mb": 1e6 / 2**30,
          "t": 1024.0, "ti": 1024.0, "tib": 1024.0, "tb": 1e12 / 2**30}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*$")


def parse_gib(value) -> float | None:
    """`value` in GiB, or None when it is not a memory size."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value) if value > 0 else None
    match = _SIZE.match(str(value))
    if not match or match.group(2).lower() not in _UNITS:
        return None
    size = float(match.group(1)) * _UNITS[match.group(2).lower()]
    return size if size > 0 else None


def fmt_gib(gib: float) -> str:
    return f"{gib:g} GiB" if gib == int(gib) else f"{gib:.1f} GiB"
