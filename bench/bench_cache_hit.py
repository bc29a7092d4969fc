"""A no-change `envbuild image` run (the cache hit) as the wheelhouse grows.

The content tag comes from the lockfiles' hashes and the bundled files' names and sizes,
so the cache check should cost the same with 2 MB or 8 GB of wheels. The padding files
are sparse (no disk used); the image for each content tag is made by tagging one small
built image, so no multi-GB context is ever sent to the engine.

    python3 bench/bench_cache_hit.py [--runs N]   (needs `scripts/services.sh up` and PyPI)
"""
from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SPEC = """name: cache-bench
cuda: "11.8"
python: "3.11"
target: {{driver: "550.54.15", gpus: ["A100"], platform: linux-64}}
installer: pip
base_image: rapidsai/base:24.08-cuda11.8-py3.11
packages: {{pip: ["einops==0.7.0"]}}
image: {{repository: {registry}/bench/cache-hit}}
"""
SIZES_GB = (0, 1, 8)


def registry() -> str:
    for line in (ROOT / ".services" / "env").read_text().splitlines():
        if line.startswith("ENVBUILD_TEST_REGISTRY="):
            return line.split("=", 1)[1].strip()
    raise SystemExit("start the services: scripts/services.sh up")


def envbuild(*args, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["envbuild", *map(str, args)], cwd=cwd, capture_output=True, text=True, check=True)


def hash_all(folder: Path) -> float:
    """What hashing every wheel's bytes (the former cache check) costs."""
    start = time.perf_counter()
    for path in folder.iterdir():
        digest = hashlib.sha256()
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return time.perf_counter() - start


def content_tag(work: Path, reg: str) -> str:
    """The tag `envbuild image` computes for this folder's spec, lock and wheelhouse."""
    from envbuild import pipeline
    from envbuild.image import tag
    from envbuild.resolver import resolve
    from envbuild.spec import load_spec

    resolution = resolve(load_spec(work / "spec.yaml"))
    context = pipeline.context(work / "ctx", resolution, work / "lock", mirror=reg, wheelhouse=work / "wh")
    try:
        return tag.content_tag(resolution, context.path, context.base_digest, resolution.resolved.platform)
    finally:
        shutil.rmtree(context.path)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    reg = registry()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "spec.yaml").write_text(SPEC.format(registry=reg))
        common = ("spec.yaml", "--lock-dir", "lock", "--wheelhouse", "wh", "--registry-mirror", reg)
        envbuild("wheelhouse", "spec.yaml", "-o", "wh", "--lock-dir", "lock", "-q", cwd=work)
        built = envbuild("image", *common, "-q", cwd=work).stdout.split()[0]
        resolve_times = []
        for _ in range(args.runs):
            start = time.perf_counter()
            envbuild("resolve", "spec.yaml", cwd=work)
            resolve_times.append(time.perf_counter() - start)
        print(f"`envbuild resolve` of the same spec (start-up + spec + resolve): median "
              f"{statistics.median(resolve_times):.2f} s; load average {os.getloadavg()[0]:.1f}")
        print("| wheelhouse | no-change `envbuild image` (median, max) | hashing the wheelhouse's bytes |")
        print("|---|---|---|")
        for gb in SIZES_GB:
            if gb:
                padding = work / "wh" / f"padding-{gb}.bin"
                with open(padding, "wb") as handle:
                    handle.truncate(gb * 1 << 30)
            # the content tag for this wheelhouse, without sending gigabytes to the engine
            ref = f"{reg}/bench/cache-hit:{content_tag(work, reg)}"
            subprocess.run(["docker", "tag", built, ref], check=True)
            times = []
            for _ in range(args.runs):
                start = time.perf_counter()
                envbuild("image", *common, "-q", cwd=work)
                times.append(time.perf_counter() - start)
            size = sum(p.stat().st_size for p in (work / "wh").iterdir())
            print(f"| {size / 1e9:.2f} GB | {statistics.median(times):.2f} s, {max(times):.2f} s "
                  f"| {hash_all(work / 'wh'):.2f} s |")
        tags = subprocess.run(["docker", "image", "ls", "--format", "{{.Repository}}:{{.Tag}}", f"{reg}/bench/cache-hit"],
                              capture_output=True, text=True).stdout.split()
        if tags:
            subprocess.run(["docker", "rmi", *tags], capture_output=True)


if __name__ == "__main__":
    main()
