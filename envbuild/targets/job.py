"""What every job definition is made from: the image, the command, and the target's GPUs."""
from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from envbuild import matrix
from envbuild.matrix.lookup import find_gpu, gpu_model

if TYPE_CHECKING:  # fleets validate their schedulers through this package: no runtime import back
    from envbuild.fleet import Target

IMAGE_PROBE = "/opt/envbuild/probe.py"  # every envbuild image carries the probe here


@dataclass(frozen=True)
class Job:
    """Every value here was checked at the door (envbuild.core.fields); each renderer writes
    them by its format's own rules (quoted words, literals, dumped YAML and JSON)."""

    name: str  # a DNS-1123 label: valid as a k8s, Slurm, Batch and Flyte name
    image: str  # by Docker's reference grammar
    target: Target | None = None
    gpus: int = 1
    command: tuple[str, ...] = ()  # the workload's argv; empty = the probe alone
    verify_first: bool = True  # run the probe before the workload (k8s init container, a step elsewhere)
    time_limit_s: int = 3600
    memory_mib: int = 16 * 1024  # host memory
    static_probe: bool = False  # only the probe's checks that need no GPU
    probe_path: str = IMAGE_PROBE
    extra: dict[str, Any] = field(default_factory=dict)  # runner details (output paths)

    @property
    def scheduler(self) -> dict[str, Any]:
        return dict(self.target.scheduler) if self.target else {}

    def probe_command(self) -> list[str]:
        return ["python3", self.probe_path, "--json"] + (["--static"] if self.static_probe else [])

    def main_command(self) -> list[str]:
        return list(self.command) or self.probe_command()

    def shell(self, argv: list[str]) -> str:
        return " ".join(shlex.quote(a) for a in argv)

    def gpu_row(self):
        if not self.target:
            return None
        return find_gpu(matrix.load(), self.target.gpu)

    def gpu_model(self):
        """The model of the target's GPU (an A100-80GB board is an A100), or None."""
        row = self.gpu_row()
        if row is None:
            return None
        return gpu_model(matrix.load(), row)

    def compute_capability(self) -> str | None:
        if not self.target:
            return None
        row = self.gpu_row()
        return row.compute_capability if row else self.target.gpu

    def steps(self) -> list[list[str]]:
        """The argv of each step: the probe first (when there is a workload), then the workload."""
        return ([self.probe_command()] if self.verify_first and self.command else []) + [self.main_command()]

    def instance_types(self) -> list[str]:
        """Cloud instance types that carry this target's GPU with at least `gpus` of them."""
        row = self.gpu_row()
        if row is None:
            return []
        need = self.target.gpu_memory_gib if self.target and not self.target.mig else None
        names = {row.name, self.gpu_model().name}  # instances name the model (p4de: NVIDIA A100, 80 GB)
        rows = [i for i in matrix.load().cloud_instances
                if i.gpu in names and i.gpus >= self.gpus and (need is None or i.gpu_memory_gb >= need * 0.95)]
        return [i.instance_type for i in sorted(rows, key=lambda i: i.gpus)]
