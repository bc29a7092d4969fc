"""Benchmark: the pip lock of a recipe against the real PyPI, resolved by pip with every
platform tag of the target (`pip install --dry-run --report --platform ...`) and by uv
(`uv pip compile --python-platform --python-version --generate-hashes`), side by side.

    python3 bench/bench_pip_lock.py [recipes/tensorflow.yaml recipes/cupy.yaml] [--python 3.13]
    python3 bench/bench_pip_lock.py --overhead [recipes/cupy.yaml] [--runs 9]

Both engines see only PyPI (pip's configuration is replaced by an empty one) and get the
same requirements, target CPython and glibc. uv runs twice: with an empty cache (what a
first lock pays) and again with that cache. pip runs once without a cache (`--no-cache-dir`;
with one, its cost is the same wheel downloads). Prints, per recipe, seconds and the
number of pinned packages (and whether the two engines pin the same versions).

`--overhead` times a whole `envbuild lock RECIPE` process against the uv compile it runs
(the same command line and environment), in turn, after one warm-up of each, and prints
the medians and the median of the pairs' ratios with the load average: what envbuild adds
to the resolution it hands to uv (goal: at most 1.5x).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _request(recipe: Path, python: str | None, settings=None):
    from envbuild.lock.pip_lock import build_pip_request
    from envbuild.resolver import resolve
    from envbuild.spec import load_spec

    spec = load_spec(recipe)
    if python:
        spec = spec.with_changes({"python": python})
    resolution = resolve(spec)
    if not resolution.ok:
        raise SystemExit(f"{recipe}: resolve says conflict")
    return build_pip_request(spec, resolution, resolution.resolved.platform, None, settings)


def _uv(request, cache: str) -> tuple[float, dict[str, str]]:
    from envbuild.lock.pip_lock import parse_pylock, uv_command, uv_env

    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "in.txt").write_text("\n".join(request.requirements) + "\n")
        command = uv_command(request, f"{tmp}/in.txt", f"{tmp}/pylock.toml") + ["--cache-dir", cache]
        start = time.perf_counter()
        subprocess.run(command, check=True, capture_output=True, env=uv_env(request, 30))
        took = time.perf_counter() - start
        pins = parse_pylock(tomllib.loads((Path(tmp) / "pylock.toml").read_text()))
    return took, {p.name.lower().replace("_", "-"): p.version for p in pins}


def _pip(request) -> tuple[float, dict[str, str]]:
    from envbuild.lock.pip_tags import platform_tags

    with tempfile.TemporaryDirectory() as tmp:
        command = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
                   "--no-cache-dir", "--report", f"{tmp}/report.json", "--target", f"{tmp}/t", "--only-binary=:all:",
                   "--implementation", "cp", "--python-version", request.python, "--index-url", request.index_url]
        for tag in platform_tags(request.platform, request.glibc):
            command += ["--platform", tag]
        for url in request.extra_index_urls:
            command += ["--extra-index-url", url]
        start = time.perf_counter()
        subprocess.run(command + list(request.requirements), check=True, capture_output=True)
        took = time.perf_counter() - start
        report = json.loads((Path(tmp) / "report.json").read_text())
    return took, {i["metadata"]["name"].lower().replace("_", "-"): i["metadata"]["version"] for i in report["install"]}


def _overhead(recipe: Path, runs: int) -> None:
    import statistics

    from envbuild.lock.pip_config import read_pip_settings
    from envbuild.lock.pip_lock import uv_command, uv_env

    request = _request(recipe, None, read_pip_settings())
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "in.txt").write_text("\n".join(request.requirements) + "\n")
        uv = (uv_command(request, f"{tmp}/in.txt", f"{tmp}/pylock.toml"), uv_env(request, 10.0))
        lock = ([sys.executable, "-m", "envbuild", "lock", str(recipe), "-o", f"{tmp}/lock"], None)

        def wall(command) -> float:
            start = time.perf_counter()
            subprocess.run(command[0], check=True, capture_output=True, env=command[1], cwd=ROOT)
            return time.perf_counter() - start

        wall(lock), wall(uv)
        pairs = [(wall(lock), wall(uv)) for _ in range(runs)]
    lock_s, uv_s = (statistics.median(p[i] for p in pairs) for i in (0, 1))
    ratio = statistics.median(a / b for a, b in pairs)
    print(f"{recipe.name}: envbuild lock {lock_s:.3f} s, its uv compile {uv_s:.3f} s (medians of {runs}); "
          f"ratio {ratio:.2f}x (pairs {min(a / b for a, b in pairs):.2f}-{max(a / b for a, b in pairs):.2f}); "
          f"load average {os.getloadavg()[0]:.1f}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("recipes", nargs="*", default=["recipes/tensorflow.yaml", "recipes/cupy.yaml"])
    parser.add_argument("--python", help="override the recipe's Python (e.g. where PyPI has no wheel for it yet)")
    parser.add_argument("--overhead", action="store_true", help="time `envbuild lock` against the uv compile it runs")
    parser.add_argument("--runs", type=int, default=9)
    args = parser.parse_args()
    if args.overhead:
        for recipe in args.recipes if args.recipes != parser.get_default("recipes") else ["recipes/cupy.yaml"]:
            _overhead(ROOT / recipe, args.runs)
        return
    os.environ["PIP_CONFIG_FILE"] = os.devnull
    for key in [k for k in os.environ if k.startswith("PIP_") and k != "PIP_CONFIG_FILE"]:
        del os.environ[key]
    print("| recipe | CPython | pip with tags s | uv cold s | uv warm s | packages pip / uv | same pins |")
    print("|---|---|---|---|---|---|---|")
    for recipe in args.recipes:
        request = _request(ROOT / recipe, args.python)
        with tempfile.TemporaryDirectory() as cache:
            uv_cold, uv_pins = _uv(request, cache)
            uv_warm, _ = _uv(request, cache)
        pip_s, pip_pins = _pip(request)
        same = "yes" if pip_pins == uv_pins else f"no: {sorted(set(pip_pins.items()) ^ set(uv_pins.items()))}"
        print(f"| {Path(recipe).name} | {request.python} | {pip_s:.1f} | {uv_cold:.1f} | {uv_warm:.1f} | "
              f"{len(pip_pins)} / {len(uv_pins)} | {same} |", flush=True)


if __name__ == "__main__":
    main()
