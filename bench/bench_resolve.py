"""Resolve speed: in-process resolve per recipe and `envbuild resolve` wall time.

    python3 bench/bench_resolve.py [--repeat N]
    python3 bench/bench_resolve.py --startup [--rounds N] [--tree DIR ...] [--fresh-cache]

For every recipe: the median in-process `resolve()` time, first on a fresh copy of the
loaded tables, so that the resolver's index and its memo are built in the run (cold: what a
single CLI call pays, less loading the data) and then
warm (repeated resolves in one process, as `lock`/`dockerfile` and fix generation do);
then the median wall time of `envbuild resolve RECIPE` beside `python -c pass`.
Targets: resolve < 20 ms median, CLI < 300 ms.

`--startup` measures the whole command, side by side in one loop: each round runs `python -c
pass`, then `python -m envbuild resolve RECIPE` once per source tree (`--tree`, default the
installed envbuild; a tree is put first on PYTHONPATH, e.g. a `git archive` of an older
commit), in turn. It prints, per command, the median wall time and the median CPU time
(user + system, less disturbed by other load on the machine), and the median total of
`-X importtime`'s top-level cumulative microseconds. `--fresh-cache` gives every run an
empty XDG_CACHE_HOME: the first run after installing a release that kept caches there
(`resolve` reads none). Goal: CPU <= 8x `python -c pass` (bench/README.md).
"""
from __future__ import annotations

import argparse
import dataclasses
import statistics
import subprocess
import sys
import tempfile
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
    parser.add_argument("--startup", action="store_true", help="measure only CLI start-up (see above)")
    parser.add_argument("--rounds", type=int, default=31)
    parser.add_argument("--tree", action="append", default=[], help="an envbuild source tree to compare")
    parser.add_argument("--recipe", default="pytorch-official.yaml")
    parser.add_argument("--fresh-cache", action="store_true", help="an empty XDG_CACHE_HOME for every run")
    args = parser.parse_args()
    if args.startup:
        return startup(args)

    from envbuild import matrix
    from envbuild.resolver import resolve
    from envbuild.spec import load_spec

    m = matrix.load()
    recipes = sorted((ROOT / "recipes").glob("*.yaml"))
    specs = {p.name: load_spec(p) for p in recipes}
    resolve(next(iter(specs.values())), m)  # build the per-data indexes once

    def cold(spec):
        resolve(spec, dataclasses.replace(m))  # a copy carries nothing derived from the tables

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


# a fresh process: load the tables, then look one GPU name up, as one CLI call does
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
    """GPU name lookups: the first one in a process, then each further one."""
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


def _timed(cmd: list[str], env: dict) -> tuple[float, float]:
    """Wall and CPU (user + system) milliseconds of one run of `cmd`."""
    import os

    before = os.times()
    start = time.perf_counter()
    subprocess.run(cmd, env=env, cwd="/", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = os.times()
    cpu = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    return wall * 1000, cpu * 1000


def _import_us(cmd: list[str], env: dict) -> int:
    """Sum of the top-level cumulative microseconds that `-X importtime` reports."""
    err = subprocess.run([cmd[0], "-X", "importtime", *cmd[1:]], env=env, cwd="/", capture_output=True, text=True).stderr
    total = 0
    for line in err.splitlines():
        parts = line.split("|")
        if len(parts) == 3 and parts[1].strip().isdigit() and not parts[2].startswith("  "):
            total += int(parts[1])
    return total


def startup(args) -> int:
    import os

    recipe = str(ROOT / "recipes" / args.recipe)
    # with the bytecode cache, as an installed envbuild runs (a shell that sets
    # PYTHONDONTWRITEBYTECODE would otherwise recompile every module on every run)
    base_env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    commands = {"python -c pass": ([sys.executable, "-c", "pass"], base_env)}
    for tree in args.tree or [""]:
        env = dict(base_env)
        if tree:
            env["PYTHONPATH"] = str(Path(tree).resolve())
        commands[f"envbuild resolve {tree or '(installed)'}"] = ([sys.executable, "-m", "envbuild", "resolve", recipe], env)
    for cmd, env in commands.values():  # warm the file cache and the bytecode
        subprocess.run(cmd, env=env, cwd="/", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    walls = {name: [] for name in commands}
    cpus = {name: [] for name in commands}
    imports = {name: [] for name in commands}
    for _ in range(args.rounds):
        for name, (cmd, env) in commands.items():
            with tempfile.TemporaryDirectory(prefix="envbuild-bench-") as cache:
                if args.fresh_cache:
                    env = {**env, "XDG_CACHE_HOME": cache}
                wall, cpu = _timed(cmd, env)
            with tempfile.TemporaryDirectory(prefix="envbuild-bench-") as cache:
                if args.fresh_cache:
                    env = {**env, "XDG_CACHE_HOME": cache}
                imports[name].append(_import_us(cmd, env))
            walls[name].append(wall)
            cpus[name].append(cpu)
    base_wall = statistics.median(walls["python -c pass"])
    base_cpu = statistics.median(cpus["python -c pass"])
    print(f"{args.rounds} rounds, {args.recipe}; medians (ratio to python -c pass)")
    print(f"{'command':60} {'wall ms':>14} {'cpu ms':>14} {'imports ms':>11}")
    for name in commands:
        wall, cpu = statistics.median(walls[name]), statistics.median(cpus[name])
        print(f"{name:60} {wall:7.0f} {wall / base_wall:5.1f}x {cpu:7.0f} {cpu / base_cpu:5.1f}x "
              f"{statistics.median(imports[name]) / 1000:11.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
