"""The values a fleet file is read into: its targets, each with its GPU, driver, platform,
MIG profile, GPU memory and scheduler."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from envbuild.infra.errors import UserError
from envbuild.spec.validate import did_you_mean


@dataclass(frozen=True)
class Target:
    name: str
    gpu: str  # as written and validated: a model name or a compute capability
    gpus_per_node: int = 1
    driver: str | None = None
    platform: str = "linux-64"
    mig: str | None = None  # MIG profile, e.g. "3g.40gb"
    gpu_memory_gib: float | None = None  # per GPU or per MIG slice; None = unknown
    memory_from: str | None = None  # where gpu_memory_gib comes from ("fleet file", "MIG profile 3g.40gb", ...)
    scheduler: dict[str, Any] = field(default_factory=dict)  # {"kind": ..., kind-specific keys}
    where: str = ""  # file:line of the target, for messages

    @property
    def kind(self) -> str:
        return self.scheduler.get("kind", "")

    def describe_gpu(self) -> str:
        return f"{self.gpu} MIG {self.mig}" if self.mig else self.gpu


@dataclass(frozen=True)
class Fleet:
    targets: tuple[Target, ...]
    source: str = ""

    def names(self) -> list[str]:
        return [t.name for t in self.targets]

    def target(self, name: str) -> Target:
        return self.select([name])[0]

    def select(self, names: list[str] | None) -> tuple[Target, ...]:
        """The named targets in the order given (all when `names` is empty)."""
        if not names:
            return self.targets
        by_name = {t.name: t for t in self.targets}
        unknown = [n for n in names if n not in by_name]
        if unknown:
            hint = did_you_mean(unknown[0], by_name) or f"targets in {self.source}: {', '.join(by_name)}"
            raise UserError(f"unknown target {unknown[0]!r}", where="--target", hint=hint)
        return tuple(by_name[n] for n in dict.fromkeys(names))
