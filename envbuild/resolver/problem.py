"""What a check finds: `Problem`, the resolver's one record of a conflict or a warning."""
from __future__ import annotations

from dataclasses import dataclass, field

from envbuild.core.model import Fact


@dataclass(frozen=True)
class Problem:
    """What one check found; a conflict when hard, a warning when soft."""

    kind: str
    message: str
    facts: tuple[Fact, ...] = ()
    soft: bool = False  # a warning, not a conflict (ptx_jit, unknown_fact, minor_version_compat)
    framework: str | None = None
    hints: dict = field(default_factory=dict, compare=False)  # for fixes: e.g. {"driver": "525.60.13"}
