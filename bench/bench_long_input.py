"""Long input: credential masking over long text, and `envbuild resolve` refusing a spec
value or a flag of that length.

    python3 bench/bench_long_input.py [--repeat N]

Masking (in-process, median of N): the text shapes that made the former single pattern
quadratic, a run of letters and a scheme followed by a long user part with no "@", at
30,000, 100,000 and 1,000,000 characters. CLI (median wall time of N runs): a spec whose
`target.driver` holds that many characters (spec files stop at 1 MiB), and `--gpu` with a
value just under and just over the 4096-character argument limit. Target: every refusal
well under 1 s, and the masking time growing in proportion to the length.
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from envbuild.infra.urls import mask_text

LENGTHS = (30_000, 100_000, 1_000_000)


def median_s(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def cli(args: list[str], cwd: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "envbuild", *args], cwd=cwd, capture_output=True, text=True)
    assert done.returncode == 2 and len(done.stderr) < 1000, done.stderr[:300]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    print("| text | characters | mask_text |")
    print("|---|---|---|")
    for n in LENGTHS:
        for shape, text in (("letters", "a" * n), ("scheme, no @", "a://" + "b" * n)):
            print(f"| {shape} | {len(text):,} | {median_s(lambda: mask_text(text), args.repeat) * 1000:.2f} ms |")

    print("\n| `envbuild resolve` input | wall (median) |")
    print("|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for n in LENGTHS[:2] + (900_000,):
            spec = work / f"spec-{n}.yaml"
            spec.write_text(f"frameworks: {{pytorch: '2.4'}}\ntarget: {{driver: '{'5' * n}', gpus: [A100]}}\n")
            print(f"| spec, target.driver of {n:,} characters | "
                  f"{median_s(lambda: cli(['resolve', str(spec)], work), args.repeat):.2f} s |")
        for n in (4000, 5000):
            print(f"| --gpu of {n:,} characters | "
                  f"{median_s(lambda: cli(['resolve', '--framework', 'jax', '--gpu', 'A' * n], work), args.repeat):.2f} s |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
