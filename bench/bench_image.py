"""Image benchmarks on the local Docker engine and registry (start them with
`scripts/services.sh up`):

1. time for `make_image` to detect a cache hit (content tag exists locally / in the registry);
2. time of a no-change rebuild (same context, the engine's layer cache warm);
3. size added by envbuild on each family's stand-in base (the demo conda environment).

    python3 bench/bench_image.py [--runs N]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

import image_support as support  # noqa: E402
from envbuild.image import build, engine  # noqa: E402
from envbuild.image.make import ImageOptions  # noqa: E402
from envbuild.pipeline import context, make_image  # noqa: E402


def services() -> dict[str, str]:
    env = {}
    for line in (ROOT / ".services" / "env").read_text().splitlines():
        key, _, value = line.partition("=")
        env[key] = value
    return env


def quiet() -> build.Progress:
    return build.Progress(open("/dev/null", "w"), terminal=False)


def median_time(fn, runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    env = services()
    registry, wheelhouse = env["ENVBUILD_TEST_REGISTRY"], Path(env["ENVBUILD_TEST_WHEELHOUSE"])
    client = engine.connect()
    with tempfile.TemporaryDirectory() as tmp:
        resolution, lock_dir = support.locked_demo(Path(tmp))
        opts = ImageOptions(repository=f"{registry}/bench/demo", mirror=registry, wheelhouse=wheelhouse, push=True)
        first = make_image(resolution, lock_dir, opts, progress=quiet())
        local = median_time(lambda: make_image(resolution, lock_dir, ImageOptions(
            repository=opts.repository, mirror=registry, wheelhouse=wheelhouse), progress=quiet()), args.runs)
        print(f"cache hit (local tag):    {local * 1000:.0f} ms (median of {args.runs})")

        client.api.tag(first.image_id, "envbuild-bench-keep", "latest")  # keeps the image when its tag goes

        def registry_hit():
            client.api.remove_image(first.ref)
            result = make_image(resolution, lock_dir, ImageOptions(repository=opts.repository, mirror=registry,
                                                                   wheelhouse=wheelhouse), progress=quiet())
            assert result.cached == "registry"
            client.api.tag(first.image_id, opts.repository, first.ref.rsplit(":", 1)[1])
        print(f"cache hit (registry tag): {median_time(registry_hit, args.runs) * 1000:.0f} ms (median of {args.runs})")

        ctx = context(Path(tmp) / "ctx", resolution, lock_dir, mirror=registry, wheelhouse=wheelhouse)
        rebuild = median_time(lambda: build.build(client, ctx.path, progress=quiet()), args.runs)
        print(f"no-change rebuild (layer cache): {rebuild:.2f} s (median of {args.runs})")

        print("\nfamily      base MB   image MB   added MB")
        for family, (ref, _, _) in sorted(support.FAMILY_BASES.items()):
            from envbuild.dockerfile.mirror import apply_mirror
            from envbuild.dockerfile.reference import parse

            stand_in = str(apply_mirror(parse(ref), registry))
            name, tag = stand_in.rsplit(":", 1)
            client.api.tag(env["ENVBUILD_TEST_BASE_IMAGE"], name, tag)
            for line in client.api.push(name, tag, stream=True, decode=True):
                assert "error" not in line, line
            family_res, family_lock = support.locked_demo(Path(tmp) / family, family)
            result = make_image(family_res, family_lock, ImageOptions(
                repository=f"{registry}/bench/{family}", mirror=registry, wheelhouse=wheelhouse), progress=quiet())
            base_size = client.api.inspect_image(stand_in)["Size"] / 1e6
            size = client.api.inspect_image(result.image_id)["Size"] / 1e6
            print(f"{family:<10} {base_size:8.1f} {size:10.1f} {size - base_size:10.3f}")


if __name__ == "__main__":
    main()
