"""Benchmark: how long `envbuild lock` takes to solve a PyTorch + CUDA environment against
a large local conda channel.

The channel is generated (seeded, so every run sees the same data): the real-shaped
pytorch / nvidia / main records of tests/data/lock_channels.yaml plus synthetic records
so the channel holds at least --records packages. Synthetic packages follow the shape of
real channels: a few thousand names, a long-tailed number of versions per name, one build
per supported Python (always 3.10 and 3.11) for compiled packages, noarch builds for pure-Python ones, and 0-8
dependencies with version ranges, mostly on a small core of packages. The spec is what the resolver hands
to lock for pytorch 2.1.2 + CUDA 12.1 (with companions) plus ten other packages.

    python3 bench/bench_lock.py [--records 50000] [--runs 7] [--tree DIR ...]

Prints the median and min/max wall time of the full solve (repodata read + solve + GPU
checks, a fresh gateway each run, as one `envbuild lock` process does) and the process's
peak memory. Then, for a spec file asking for the same stack, `envbuild lock SPEC` wall
time beside what the command itself must do (solve + write the lock files, timed in this
process with everything imported), the import time of the `lock` command, and the time
from start to the solve (a process that leaves when it would solve: what `lock` spends
before the solver). With
`--tree` (repeatable; a source tree such as a `git archive` of an older commit, put first
on PYTHONPATH) the CLI part runs each tree in turn in the same loop, so that figures from
before and after a change are taken under the same machine load. It ends with the floor
no envbuild change can remove: `python -c pass` and a process that only imports py-rattler
(whose package imports all of its modules, asyncio included).
"""
from __future__ import annotations

import argparse
import json
import os
import random
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

PYTHONS = ("3.8", "3.9", "3.10", "3.11", "3.12")
SYLLABLES = ("py", "lib", "data", "net", "geo", "sci", "fast", "json", "xml", "http", "grid", "tensor",
             "io", "auth", "log", "arrow", "cloud", "plot", "stat", "text", "img", "audio", "ml", "db")


def _names(rng: random.Random, count: int) -> list[str]:
    names: set[str] = set()
    while len(names) < count:
        parts = rng.sample(SYLLABLES, rng.choice((2, 2, 3)))
        names.add("-".join(parts) if rng.random() < 0.3 else "".join(parts))
    return sorted(names)


def _versions(rng: random.Random) -> list[str]:
    count = min(60, int(rng.paretovariate(1.2)) + 1)  # long tail: most names have few versions
    major, minor, patch = rng.randint(0, 3), rng.randint(0, 9), 0
    out = []
    for _ in range(count):
        step = rng.random()
        if step < 0.6:
            patch += 1
        elif step < 0.9:
            minor, patch = minor + 1, 0
        else:
            major, minor, patch = major + 1, 0, 0
        out.append(f"{major}.{minor}.{patch}")
    return out


def generate(folder: Path, records: int, seed: int = 20261122) -> list[str]:
    """Write the channels; returns the channel URLs in priority order."""
    from lock_channels import _record, repodata_channels

    channels = repodata_channels(folder)
    rng = random.Random(seed)
    names = _names(rng, 9000)
    subdirs: dict[str, dict[str, dict]] = {"linux-64": {}, "noarch": {}}
    released: dict[str, list[str]] = {}
    usable: set[str] = set()
    total = 0
    for index, name in enumerate(names):
        if total >= records:
            break
        versions = _versions(rng)
        released[name] = versions
        earlier = names[:index]  # dependencies point back, as in a real channel: no cycles
        pure = rng.random() < 0.35
        for version in versions:
            deps = []
            # most dependencies go to a small core (like python, numpy, libgcc on real
            # channels), the rest anywhere earlier
            wanted = rng.randint(0, 8)
            picks = [rng.choice(earlier[:200]) if rng.random() < 0.8 else rng.choice(earlier)
                     for _ in range(wanted)] if earlier else []
            for dep in dict.fromkeys(picks):
                if dep not in released:
                    continue
                low = rng.choice(released[dep])
                deps.append(f"{dep} >={low}" if rng.random() < 0.7 else dep)
            if pure:
                usable.add(name)
                rows = [({"n": name, "v": version, "b": "pyhd8ed1ab_0", "d": deps + ["python >=3.8"],
                          "noarch": "python"}, "noarch")]
            else:
                rows = []
                # current Pythons always, older ones for some releases
                pythons = {"3.10", "3.11", *rng.sample(PYTHONS, rng.randint(0, 3))}
                for py in sorted(pythons):
                    if py == "3.10":
                        usable.add(name)
                    tag = py.replace(".", "")
                    rows.append(({"n": name, "v": version, "b": f"py{tag}h{rng.getrandbits(28):07x}_0",
                                  "d": deps + [f"python >={py},{_next(py)}"]},
                                 "linux-64"))
            for row, subdir in rows:
                file_name, record = _record(row, subdir)
                subdirs[subdir][file_name] = record
                total += 1
    # the synthetic records join the "main" channel, next to the real-shaped ones
    for subdir, packages in subdirs.items():
        path = channels["main"] / subdir / "repodata.json"
        data = json.loads(path.read_text())
        data["packages"].update(packages)
        path.write_text(json.dumps(data))
    counted = sum(len(json.loads((c / s / "repodata.json").read_text())["packages"])
                  for c in channels.values() for s in ("linux-64", "noarch", "linux-aarch64")
                  if (c / s / "repodata.json").exists())
    print(f"channel records: {counted}")
    # ten direct extras that have a build for Python 3.10 (or are pure Python)
    extras = rng.sample(sorted(n for n in released if n in usable), 10)
    return [channels[c].as_uri() for c in ("pytorch", "nvidia", "main")], extras


def _next(py: str) -> str:
    major, minor = py.split(".")
    return f"<{major}.{int(minor) + 1}.0a0"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=50_000)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--tree", action="append", default=[], help="an envbuild source tree to compare")
    args = parser.parse_args()

    from envbuild.lock.request import SolveRequest
    from envbuild.lock.solve import solve
    from envbuild.lock.virtual import VirtualPackage

    with tempfile.TemporaryDirectory(prefix="envbuild-bench-") as tmp:
        channels, extras = generate(Path(tmp), args.records)
        request = SolveRequest(
            platform="linux-64",
            channels=tuple(channels),
            specs=("pytorch==2.1.2=*cuda*", "pytorch-cuda==12.1", "torchvision==0.16.2", "torchaudio==2.1.2",
                   "python 3.10.*", *extras),
            constraints=("cudatoolkit 12.1.*", "pytorch-cuda 12.1.*", "cuda-version 12.1.*"),
            virtual_packages=(VirtualPackage("__unix", "0"), VirtualPackage("__linux", "4.18"),
                              VirtualPackage("__glibc", "2.35"), VirtualPackage("__archspec", "1", "x86_64"),
                              VirtualPackage("__cuda", "12.2")),
            gpu_frameworks=("pytorch",),
            cuda="12.1",
        )
        base_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        times = []
        for _ in range(args.runs):
            start = time.perf_counter()
            solved = solve([request])
            times.append(time.perf_counter() - start)
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        packages = solved["linux-64"]
        torch = next(p for p in packages if p.name == "pytorch")
        print(f"solution: {len(packages)} packages, pytorch {torch.version} {torch.build}")
        print(f"solve time over {args.runs} runs: median {statistics.median(times):.3f} s "
              f"(min {min(times):.3f}, max {max(times):.3f})")
        print(f"peak RSS: {peak / 1024:.0f} MiB (before the first solve: {base_rss / 1024:.0f} MiB)")
        cli(Path(tmp), channels, args.runs, args.tree)
    return 0


def top_level_import_us(importtime: str) -> int:
    """Sum of the cumulative microseconds of the top-level imports in `-X importtime` output."""
    total = 0
    for line in importtime.splitlines():
        parts = line.split("|")
        if len(parts) == 3 and parts[1].strip().isdigit() and not parts[2].startswith("  "):
            total += int(parts[1])
    return total


# One `envbuild lock` process that also reports, on its last line, how long its own
# solve and its writing of the lock folder took (everything inside `folder.replacing`).
CLI_CHILD = """
import contextlib, json, sys, time
from envbuild.cli import main
from envbuild.lock import folder, solve as solve_module
spent = {"solve": 0.0, "write": 0.0}
solve = solve_module.solve
def timed_solve(*args, **kwargs):
    start = time.perf_counter()
    try:
        return solve(*args, **kwargs)
    finally:
        spent["solve"] += time.perf_counter() - start
replacing = folder.replacing
@contextlib.contextmanager
def timed_replacing(*args, **kwargs):
    start = time.perf_counter()
    with replacing(*args, **kwargs) as new:
        yield new
    spent["write"] += time.perf_counter() - start
solve_module.solve, folder.replacing = timed_solve, timed_replacing
code = main(sys.argv[1:])
print(json.dumps(spent))
try:  # leave as the `envbuild` command does (no interpreter teardown)
    from envbuild.cli import leave
except ImportError:  # an older source tree
    leave = sys.exit
leave(code)
"""


# The same process up to the moment it would solve: start-up, spec, resolve and the
# solve request, everything `lock` does before the solver (it leaves there).
TO_SOLVE_CHILD = """
import os, sys
from envbuild.cli import main
from envbuild.lock import solve as solve_module
solve_module.solve = lambda *args, **kwargs: os._exit(0)
main(sys.argv[1:])
"""


def cli(folder: Path, channels: list[str], runs: int, trees: list[str]) -> None:
    """`envbuild lock SPEC` wall time against the work it cannot avoid: its own solve and
    the writing of the lock files, timed inside the same process."""
    import subprocess

    import yaml

    spec_path = folder / "spec.yaml"
    spec_path.write_text(yaml.safe_dump({
        "name": "bench", "frameworks": {"pytorch": "2.1.2"}, "cuda": "12.1", "python": "3.10",
        "target": {"driver": "535.104.05", "gpus": ["A100"], "platform": "linux-64"},
        "installer": "conda", "channels": channels}, sort_keys=False))
    # with the bytecode cache, as an installed envbuild runs (a shell that sets
    # PYTHONDONTWRITEBYTECODE would otherwise recompile every module on every run)
    base_env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    # The children run in the bench's own folder: `python -c` puts the current folder first on
    # sys.path, so run from a checkout it would import that checkout's envbuild, not the tree's.
    envs = {}
    for tree in trees or [""]:
        env = dict(base_env)
        if tree:
            env["PYTHONPATH"] = str(Path(tree).resolve())
        envs[tree or "(installed)"] = env
    wall = {name: [] for name in envs}
    work = {name: [] for name in envs}
    ratios = {name: [] for name in envs}
    imports = {name: [] for name in envs}
    cpu = {name: [] for name in envs}  # user + system seconds: less disturbed by other load than wall time
    to_solve = {name: [] for name in envs}
    for name, env in envs.items():  # warm the bytecode and the caches
        subprocess.run([sys.executable, "-c", CLI_CHILD, "lock", str(spec_path), "-o", str(folder / "warm")],
                       env=env, check=True, capture_output=True, cwd=folder)
    for i in range(runs):
        for n, (name, env) in enumerate(envs.items()):
            before, start = os.times(), time.perf_counter()
            done = subprocess.run([sys.executable, "-c", CLI_CHILD, "lock", str(spec_path), "-o",
                                   str(folder / f"cli-{i}-{n}")], check=True, capture_output=True, text=True, env=env, cwd=folder)
            wall[name].append(time.perf_counter() - start)
            after = os.times()
            cpu[name].append(after.children_user - before.children_user + after.children_system - before.children_system)
            spent = json.loads(done.stdout.splitlines()[-1])
            work[name].append(spent["solve"] + spent["write"])
            ratios[name].append(wall[name][-1] / work[name][-1])
            start = time.perf_counter()
            subprocess.run([sys.executable, "-c", TO_SOLVE_CHILD, "lock", str(spec_path), "-o", str(folder / "to-solve")],
                           check=True, capture_output=True, env=env, cwd=folder)
            to_solve[name].append(time.perf_counter() - start)
            err = subprocess.run([sys.executable, "-X", "importtime", "-c", CLI_CHILD, "lock", str(spec_path), "-o",
                                  str(folder / f"imports-{i}-{n}")], capture_output=True, text=True, check=True,
                                 env=env, cwd=folder).stderr
            imports[name].append(top_level_import_us(err))
    for name in envs:
        print(f"`envbuild lock` {name}: wall median {statistics.median(wall[name]):.3f} s (min {min(wall[name]):.3f}); "
              f"its own solve + write: median {statistics.median(work[name]):.3f} s (min {min(work[name]):.3f}); "
              f"wall / (solve + write): median {statistics.median(ratios[name]):.2f}x (quartiles "
              f"{statistics.quantiles(ratios[name])[0]:.2f}x-{statistics.quantiles(ratios[name])[2]:.2f}x, "
              f"min {min(ratios[name]):.2f}x); "
              f"CPU (user + system, all threads) median {statistics.median(cpu[name]):.3f} s; "
              f"imports (-X importtime, top-level cumulative): median {statistics.median(imports[name]) / 1000:.0f} ms; "
              f"start to the solve (a process that leaves there): median {statistics.median(to_solve[name]):.3f} s")
    floor = {"python -c pass": "pass", "python -c 'import rattler'": "import rattler"}
    for label, code in floor.items():
        times, cpus = [], []
        for _ in range(runs):
            before, start = os.times(), time.perf_counter()
            subprocess.run([sys.executable, "-c", code], check=True, env=base_env)
            times.append(time.perf_counter() - start)
            after = os.times()
            cpus.append(after.children_user - before.children_user + after.children_system - before.children_system)
        print(f"{label}: wall median {statistics.median(times):.3f} s, CPU median {statistics.median(cpus):.3f} s")


if __name__ == "__main__":
    sys.exit(main())
