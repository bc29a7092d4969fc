"""Resolve speed: in-process resolve per recipe and `envbuild resolve` wall time.

    python3 bench/bench_resolve.py [--repeat N]

For every recipe: the median in-process `resolve()` time, first with the resolver's
per-data memo emptied before every run (cold: what a single CLI call pays) and then
warm (repeated resolves in one process, as `lock`/`dockerfile` and fix generation do);
then the median wall time of `envbuild resolve RECIPE` beside `python -c pass`.
Targets: resolve < 20 ms median, CLI < 300 ms.
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def median_ms(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=21)
    parser.add_argument("--cli-repeat", type=int, default=7)
    args = parser.parse_args()

    from envbuild import matrix
    from envbuild.resolver import context, resolve
    from envbuild.spec import load_spec

    m = matrix.load()
    recipes = sorted((ROOT / "recipes").glob("*.yaml"))
    specs = {p.name: load_spec(p) for p in recipes}
    resolve(next(iter(specs.values())), m)  # build the per-data indexes once

    def cold(spec):
        context.index(m).memo.clear()
        resolve(spec, m)

    print(f"{'recipe':40} {'verdict':9} {'cold ms':>8} {'warm ms':>8} {'cli ms':>8}")
    python_pass = median_ms(lambda: subprocess.run([sys.executable, "-c", "pass"], check=True), args.cli_repeat)
    worst = 0.0
    for name, spec in specs.items():
        verdict = resolve(spec, m).verdict
        cold_ms = median_ms(lambda: cold(spec), args.repeat)
        warm_ms = median_ms(lambda: resolve(spec, m), args.repeat)
        cli_ms = median_ms(lambda: subprocess.run(["envbuild", "resolve", str(ROOT / "recipes" / name)],
                                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL), args.cli_repeat)
        worst = max(worst, cli_ms)
        print(f"{name:40} {verdict:9} {cold_ms:8.1f} {warm_ms:8.1f} {cli_ms:8.0f}")
    print(f"\npython -c pass: {python_pass:.0f} ms; slowest envbuild resolve: {worst:.0f} ms "
          f"({worst / python_pass:.1f}x python -c pass)")
    gpu_names(m, args)
    return 0


# a fresh process: load the (cached) tables, then look one GPU name up, as one CLI call does
FIRST_LOOKUP = """
import time
from envbuild import matrix
from envbuild.matrix import lookup as L
m = matrix.load()
t = time.perf_counter()
L.find_gpu(m, "Tesla V100-SXM2-16GB")
print((time.perf_counter() - t) * 1000)
"""


def gpu_names(m, args) -> None:
    """GPU name lookups: the first one in a process (index build or cache), then each further one."""
    import yaml

    from envbuild.matrix import lookup as L

    names = [s["name"] for s in yaml.safe_load((ROOT / "tests/data/gpu_names.yaml").read_text())["samples"]]
    first = statistics.median(float(subprocess.run([sys.executable, "-c", FIRST_LOOKUP], check=True, capture_output=True,
                                                   text=True).stdout) for _ in range(args.cli_repeat))
    per_name = median_ms(lambda: [L.find_gpu(m, n) for n in names], args.repeat) / len(names) * 1000
    cli = median_ms(lambda: subprocess.run(["envbuild", "matrix", "gpu", "Tesla V100-SXM2-16GB"], stdout=subprocess.DEVNULL,
                                           stderr=subprocess.DEVNULL), args.cli_repeat)
    print(f"GPU table: {len(m.gpus)} rows; first lookup in a process {first:.2f} ms; "
          f"then {per_name:.0f} us per name ({len(names)} nvidia-smi names); `envbuild matrix gpu` {cli:.0f} ms")


if __name__ == "__main__":
    sys.exit(main())
