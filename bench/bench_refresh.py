"""Time of `envbuild matrix refresh --check`: online against the real index (raw answers
kept in a fresh cache folder), then offline from that cache.

    python3 bench/bench_refresh.py [--repeat N] [--index-url URL]

Prints the wall time of each run and the medians, plus what the refresh read (releases,
projects, metadata files) from its first summary line.
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time


def run(args: list[str]) -> tuple[float, int, str]:
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "envbuild", "matrix", "refresh", "--check", *args],
                          capture_output=True, text=True)
    return time.perf_counter() - start, done.returncode, done.stdout


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--index-url", default="https://pypi.org/simple")
    args = parser.parse_args()
    online, offline = [], []
    summary = ""
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory() as cache:
            seconds, code, out = run(["--cache", cache, "--index-url", args.index_url])
            if code not in (0, 1):
                print(out, file=sys.stderr)
                return code
            online.append(seconds)
            summary = out.splitlines()[1] if out.count("\n") > 1 else out
            seconds, code, _ = run(["--offline", "--cache", cache])
            offline.append(seconds)
    print(summary)
    print(f"online  (fresh cache): {', '.join(f'{s:.1f}' for s in online)} s; median {statistics.median(online):.1f} s")
    print(f"offline (from cache):  {', '.join(f'{s:.2f}' for s in offline)} s; median {statistics.median(offline):.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
