"""Wall time of `envbuild env` when the environment is current (the no-op), as a whole CLI
run: start-up, spec, host facts, resolve for the host, the prefix's record against the
lock's stamp and file hashes. Target: under 1 s.

    python3 bench/bench_env.py [--runs N] [--pypi]

The environment is a conda one from a local channel of real archives (tests/lock_channels.py:
PyTorch 2.4.1 for CUDA 12.4, its python a venv over /usr/bin/python3), so no network is
needed; `--pypi` adds recipes/cupy.yaml installed from the real PyPI (a uv venv). Each is
created once, then `envbuild env` is run N times; prints the first (creating) run and the
median and max of the no-op runs, with `envbuild resolve` of the same spec for scale.
"""
from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
ENVBUILD = shutil.which("envbuild") or "envbuild"


def seconds(*args: str, cwd: Path) -> float:
    start = time.perf_counter()
    done = subprocess.run([ENVBUILD, *args], cwd=cwd, capture_output=True, text=True)
    took = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"envbuild {' '.join(args)} failed:\n{done.stderr}")
    return took


def conda_spec(folder: Path) -> Path:
    from lock_channels import PYTORCH_CU124_PACKAGES, archive_channel

    channel = folder / "channel"
    asyncio.run(archive_channel(channel, PYTORCH_CU124_PACKAGES))
    spec = folder / "train.yaml"
    spec.write_text(yaml.safe_dump({
        "name": "train", "frameworks": {"pytorch": "2.4.1"}, "python": "3.11", "installer": "conda",
        "target": {"driver": "550.54.15", "gpus": ["A100"]}, "channels": [channel.as_uri()]}))
    return spec


def measure(spec: Path, runs: int) -> tuple[float, list[float], list[float]]:
    first = seconds("env", spec.name, "-q", cwd=spec.parent)
    noop = [seconds("env", spec.name, "-q", cwd=spec.parent) for _ in range(runs)]
    resolve = [seconds("resolve", spec.name, cwd=spec.parent) for _ in range(runs)]
    return first, noop, resolve


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--pypi", action="store_true", help="also recipes/cupy.yaml from the real PyPI")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="envbuild-bench-env-") as tmp:
        specs = {"conda (local channel)": conda_spec(Path(tmp))}
        if args.pypi:
            cupy = Path(tmp) / "cupy" / "cupy.yaml"
            cupy.parent.mkdir()
            shutil.copy(ROOT / "recipes" / "cupy.yaml", cupy)
            specs["pip (recipes/cupy.yaml, PyPI)"] = cupy
        print(f"{'environment':32s} {'first env':>10s} {'no-op median':>13s} {'no-op max':>10s} {'resolve median':>15s}")
        for label, spec in specs.items():
            first, noop, resolve = measure(spec, args.runs)
            print(f"{label:32s} {first:9.2f}s {statistics.median(noop):12.2f}s {max(noop):9.2f}s "
                  f"{statistics.median(resolve):14.2f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
