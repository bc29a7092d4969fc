"""`envbuild image --fleet --plan` on a 100-target fleet against a single-target resolve, on the CLI.

    python3 bench/bench_plan.py [--repeat N]

The fleet is bench_fleet.py's 100 GPU models of every generation (Kepler to Blackwell, one
current driver); the spec asks for PyTorch 2.5.1-era conda builds from the local channel
of the fleet tests (tests/fleet_support.py), so the plan's locks are made offline, once,
before the timed runs (a plan whose locks are current checks them, renders each image's
build context and hashes it for its content tag). Against `envbuild resolve` of the same
spec for one GPU of the fleet with its driver. Each pair runs back to back, so it meets
the same machine load; the median of the pairs' ratios is the figure. Target: within 2x.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

import bench_fleet  # noqa: E402
import fleet_support  # noqa: E402

ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
ONE = ("Tesla P100", "580.65.06")  # a GPU of the fleet that the plan's image serves


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=9)
    args = parser.parse_args()
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        fleet_support.write_inputs(work, "127.0.0.1:5555/bench/train")
        (work / "models.yaml").write_text(bench_fleet.models_fleet_text(100))
        cli = [sys.executable, "-m", "envbuild"]
        plan = cli + ["image", "spec.yaml", "--fleet", "models.yaml", "--plan", "--lock-dir", "locks"]
        one = cli + ["resolve", "spec.yaml", "--gpu", ONE[0], "--driver", ONE[1]]
        first = subprocess.run(plan, capture_output=True, text=True, cwd=work, env=ENV)  # locks, and warm caches
        print(first.stdout.splitlines()[0])
        times: tuple[list[float], list[float]] = ([], [])
        for _ in range(args.repeat):
            for i, argv in enumerate((one, plan)):
                start = time.perf_counter()
                subprocess.run(argv, capture_output=True, cwd=work, env=ENV)
                times[i].append((time.perf_counter() - start) * 1000)
    ratios = sorted(p / s for s, p in zip(*times))
    print("| run | median ms |\n|---|---|")
    print(f"| `resolve --gpu {ONE[0]!r} --driver {ONE[1]}` (1 target) | {statistics.median(times[0]):.0f} |")
    print(f"| `image --fleet --plan` (100 targets, locks current) | {statistics.median(times[1]):.0f} |")
    ratio = statistics.median(ratios)
    print(f"\nratio: {ratio:.2f}x, median of {len(ratios)} back-to-back pairs (quartiles {ratios[len(ratios) // 4]:.2f}x-"
          f"{ratios[(3 * len(ratios)) // 4]:.2f}x; target <= 2x)")
    return 0 if ratio <= 2 else 1


if __name__ == "__main__":
    sys.exit(main())
