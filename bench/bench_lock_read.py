"""Time of reading a conda-lock.yml of N packages (default 200): PyYAML's pure-Python safe
loader and its C loader side by side, and the Dockerfile stage's reader of the file
(`parse_conda_lock_yml`; `envbuild lock --check` reads it with the same helper).

    python3 bench/bench_lock_read.py [--packages N] [--repeat N]

The lockfile is written by envbuild's own writer from synthetic entries shaped like a solved
lock's (name, version, platform, dependencies, URL, md5 and sha256), so no solve or
network is needed. Prints the median milliseconds of each read.
"""
from __future__ import annotations

import argparse
import hashlib
import tempfile
from pathlib import Path

import yaml
from bench_resolve import median_ms  # the sibling script (python3 bench/bench_lock_read.py)

from envbuild.lock.conda_lockfile import write_lockfile


def lock_document(count: int) -> dict:
    packages = []
    for i in range(count):
        name = f"package-{i:03d}"
        digest = hashlib.sha256(name.encode()).hexdigest()
        packages.append({
            "name": name, "version": f"1.{i % 17}.{i % 5}", "manager": "conda", "platform": "linux-64",
            "dependencies": {f"package-{j:03d}": f">={j % 3}.0" for j in range(max(0, i - 4), i)},
            "url": f"https://conda.anaconda.org/conda-forge/linux-64/{name}-1.0-h{digest[:7]}_0.conda",
            "hash": {"md5": digest[:32], "sha256": digest}, "category": "main", "optional": False,
        })
    return {"version": 1, "metadata": {
        "content_hash": {"linux-64": "0" * 64}, "channels": [{"url": "conda-forge", "used_env_vars": []}],
        "platforms": ["linux-64"], "sources": ["environment.yml"],
        "custom_metadata": {"envbuild.spec_hash": "0" * 64, "envbuild.matrix_version": "0" * 12}},
        "package": packages}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--packages", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=21)
    args = parser.parse_args()
    from envbuild.dockerfile.lockfiles import parse_conda_lock_yml

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "conda-lock.yml"
        write_lockfile(lock_document(args.packages), path)
        text = path.read_text(encoding="utf-8")
        rows = {
            "yaml.safe_load (pure Python)": lambda: yaml.load(text, Loader=yaml.SafeLoader),
            "yaml CSafeLoader (libyaml)": lambda: yaml.load(text, Loader=yaml.CSafeLoader),
            "dockerfile: parse_conda_lock_yml": lambda: parse_conda_lock_yml(path, "linux-64"),
        }
        print(f"conda-lock.yml with {args.packages} packages: {len(text) / 1024:.0f} KiB; median of {args.repeat}")
        for label, fn in rows.items():
            print(f"{label:36s} {median_ms(fn, args.repeat):8.1f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
