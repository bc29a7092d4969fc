"""`envbuild resolve --fleet` against a single-target resolve, on the CLI and in-process.

    python3 bench/bench_fleet.py [--repeat N] [--models]

Default: a 50-target fleet (the GPU types and drivers a large platform team runs: 8 GPU
models, 3 of them as MIG slices, 5 driver branches, 5 schedulers) against the first
target's `--gpu/--driver` alone; target: within 1.5x.

`--models`: a fleet of 100 GPU models of every generation, one target per model, taken
from matrices/gpus.yaml round-robin over the compute capabilities 3.0 to 12.x (so Kepler
to Blackwell), all on one current driver. No single PyTorch build serves Kepler and
Blackwell, so the joint resolution conflicts and fixes are searched for each of its
conflicts, then every target is resolved alone. Against one GPU (the first target);
target: within 1.3x.

Both run `envbuild resolve --framework pytorch` for the one target and for the fleet in
turn, N times, and take the median of the N pairs' ratios (each pair meets the same
machine load), and (`--models`) the median in-process time with the resolver's per-data index and memo
emptied before each run (what one CLI call pays).
"""
from __future__ import annotations

import argparse
import itertools
import os
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


MODELS_DRIVER = "580.65.06"
# with the bytecode cache, as an installed envbuild runs (a shell that sets
# PYTHONDONTWRITEBYTECODE would otherwise compile every module on every run)
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def models_fleet_text(n: int = 100) -> str:
    """One target per GPU model, round-robin over the compute capabilities >= 3.0."""
    import yaml

    rows = yaml.safe_load((ROOT / "matrices" / "gpus.yaml").read_text())["gpus"]
    by_cc: dict[tuple[int, int], list[str]] = {}
    for r in rows:
        major, minor = (int(x) for x in r["compute_capability"].split("."))
        if (major, minor) >= (3, 0):
            by_cc.setdefault((major, minor), []).append(r["name"])
    picked: list[str] = []
    for i in itertools.count():
        if len(picked) == n or all(i >= len(names) for names in by_cc.values()):
            break
        picked += [names[i] for _cc, names in sorted(by_cc.items()) if i < len(names)][: n - len(picked)]
    lines = ["targets:"]
    for i, name in enumerate(picked):
        lines.append(f"  t{i:03d}:\n    gpu: {name!r}\n    driver: {MODELS_DRIVER}\n    scheduler: {{kind: slurm, partition: gpu}}")
    return "\n".join(lines) + "\n"


def in_process_ms(fleet: Path, repeat: int) -> tuple[float, float]:
    """Median ms of the fleet resolve and of the first target alone, each from an empty index."""
    from envbuild import matrix
    from envbuild.fleet import load_fleet
    from envbuild.fleet.resolve import resolve_fleet
    from envbuild.resolver import resolve
    from envbuild.spec import spec_from_mapping

    targets = load_fleet(str(fleet)).select([])
    spec = spec_from_mapping({"frameworks": {"pytorch": "*"}})
    one = spec_from_mapping({"frameworks": {"pytorch": "*"},
                             "target": {"gpus": [targets[0].gpu], "driver": targets[0].driver}})

    def cold(run) -> float:
        matrix.load.cache_clear()  # fresh tables carry no index yet; loading is not timed
        matrix.load()
        start = time.perf_counter()
        run()
        return (time.perf_counter() - start) * 1000

    single = statistics.median(cold(lambda: resolve(one)) for _ in range(repeat))
    many = statistics.median(cold(lambda: resolve_fleet(spec, targets, joint_fixes=False)) for _ in range(repeat))
    return single, many


def paired_ms(one: list[str], many: list[str], repeat: int) -> tuple[list[float], list[float], int, int]:
    """Wall ms of `one` and of `many`, run in turn `repeat` times: each pair meets the same
    machine load, so the ratio of a pair is steadier than the ratio of two medians taken
    one after the other."""
    times: tuple[list[float], list[float]] = ([], [])
    codes = [0, 0]
    for _ in range(repeat):
        for i, argv in enumerate((one, many)):
            start = time.perf_counter()
            codes[i] = subprocess.run(argv, capture_output=True, cwd=ROOT, env=ENV).returncode
            times[i].append((time.perf_counter() - start) * 1000)
    return times[0], times[1], codes[0], codes[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--targets", type=int, default=50)
    parser.add_argument("--models", action="store_true", help="100 GPU models of every generation, one driver")
    args = parser.parse_args()
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    with tempfile.TemporaryDirectory() as tmp:
        fleet = Path(tmp) / "fleet.yaml"
        fleet.write_text(models_fleet_text() if args.models else fleet_text(args.targets))
        cli = [sys.executable, "-m", "envbuild", "resolve", "--framework", "pytorch"]
        subprocess.run(cli + ["--fleet", str(fleet)], capture_output=True, cwd=ROOT, env=ENV)  # warm the caches
        if args.models:
            from envbuild.fleet import load_fleet

            first = load_fleet(str(fleet)).select([])[0]
            gpu, driver, n, target = first.gpu, first.driver, len(load_fleet(str(fleet)).select([])), 1.3
        else:
            gpu, driver, n, target = GPUS[0][0], DRIVERS[0], args.targets, 1.5
        singles, manys, rc1, rc2 = paired_ms(cli + ["--gpu", gpu, "--driver", driver], cli + ["--fleet", str(fleet)],
                                             args.repeat)
        inproc = in_process_ms(fleet, args.repeat) if args.models else None
    single, many = statistics.median(singles), statistics.median(manys)
    ratios = sorted(m / s for s, m in zip(singles, manys))
    print("| run | exit | median ms |\n|---|---|---|")
    print(f"| `resolve --gpu {gpu!r} --driver {driver}` (1 target) | {rc1} | {single:.0f} |")
    print(f"| `resolve --fleet` ({n} targets) | {rc2} | {many:.0f} |")
    if inproc:
        print(f"| in-process `resolve()`, one GPU | | {inproc[0]:.1f} |")
        print(f"| in-process `resolve_fleet()`, {n} targets | | {inproc[1]:.1f} |")
    ratio = statistics.median(ratios)
    print(f"\nratio: {ratio:.2f}x, median of {len(ratios)} back-to-back pairs (quartiles "
          f"{ratios[len(ratios) // 4]:.2f}x-{ratios[(3 * len(ratios)) // 4]:.2f}x; ratio of the medians "
          f"{many / single:.2f}x; target <= {target}x)")
    return 0 if ratio <= target else 1


if __name__ == "__main__":
    sys.exit(main())
