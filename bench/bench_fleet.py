"""`envbuild resolve --fleet` over 50 targets against a single-target resolve, on the CLI.

    python3 bench/bench_fleet.py [--repeat N]

Writes a 50-target fleet (the GPU types and drivers a large platform team runs: 8 GPU
models, 3 of them as MIG slices, 5 driver branches, 5 schedulers) to a temporary folder,
then takes the median wall time of `envbuild resolve --framework pytorch` with
`--fleet FLEET` and with the first target's `--gpu/--driver` alone.
Target: the fleet run within 1.5x the single-target run.
"""
from __future__ import annotations

import argparse
import itertools
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GPUS = [("V100", None), ("T4", None), ("A10G", None), ("L4", None), ("A100-80GB", "3g.40gb"),
        ("A100-80GB", None), ("H100", "1g.10gb"), ("H100", None), ("H200", "2g.35gb"), ("L40S", None)]
DRIVERS = ["535.104.05", "550.54.15", "560.35.03", "570.86.10", "580.65.06"]
KINDS = ["slurm", "k8s", "batch", "coiled", "flyte"]
SCHEDULERS = {"slurm": "{kind: slurm, partition: gpu}", "k8s": "{kind: k8s}", "batch": "{kind: batch, job_queue: q}",
              "coiled": "{kind: coiled}", "flyte": "{kind: flyte}"}


def fleet_text(n: int) -> str:
    lines = ["targets:"]
    combos = itertools.cycle(itertools.product(GPUS, DRIVERS))
    for i in range(n):
        (gpu, mig), driver = next(combos)
        kind = KINDS[i % len(KINDS)]
        lines.append(f"  t{i:02d}:\n    gpu: {gpu}\n    driver: {driver}\n    scheduler: {SCHEDULERS[kind]}")
        if mig:
            lines.append(f"    mig: {mig}")
    return "\n".join(lines) + "\n"


def median_ms(argv: list[str], repeat: int) -> tuple[float, int]:
    times, rc = [], 0
    for _ in range(repeat):
        start = time.perf_counter()
        rc = subprocess.run(argv, capture_output=True, cwd=ROOT).returncode
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times), rc


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--targets", type=int, default=50)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        fleet = Path(tmp) / "fleet.yaml"
        fleet.write_text(fleet_text(args.targets))
        cli = [sys.executable, "-m", "envbuild", "resolve", "--framework", "pytorch"]
        subprocess.run(cli + ["--fleet", str(fleet)], capture_output=True, cwd=ROOT)  # warm the matrix cache
        single, rc1 = median_ms(cli + ["--gpu", GPUS[0][0], "--driver", DRIVERS[0]], args.repeat)
        many, rc2 = median_ms(cli + ["--fleet", str(fleet)], args.repeat)
    print("| run | exit | median ms |\n|---|---|---|")
    print(f"| `resolve --gpu {GPUS[0][0]} --driver {DRIVERS[0]}` (1 target) | {rc1} | {single:.0f} |")
    print(f"| `resolve --fleet` ({args.targets} targets) | {rc2} | {many:.0f} |")
    print(f"\nratio: {many / single:.2f}x (target <= 1.5x)")
    return 0 if many / single <= 1.5 else 1


if __name__ == "__main__":
    sys.exit(main())
