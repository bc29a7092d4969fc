"""Fleets: the GPU targets an environment must run on, and how jobs reach each of them.

A fleet file (`schema/fleet.schema.json`, `docs/fleets.md`) names targets: the GPU
(model or compute capability, count per node), the driver, the platform, an optional
MIG profile, the GPU memory, and the scheduler that runs jobs there. `load_fleet`
reads and checks it (bad input is one `UserError`); `resolve_fleet` (in
`envbuild.fleet.resolve`) answers per target.
"""
from __future__ import annotations

from envbuild.fleet.model import Fleet, Target
from envbuild.fleet.validate import read_fleet

__all__ = ["Fleet", "Target", "load_fleet"]


def load_fleet(path: str) -> Fleet:
    return read_fleet(path)
