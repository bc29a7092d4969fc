"""How long the probe takes.

    python3 bench/bench_probe.py            # static part (no GPU needed), 10 runs
    python3 bench/bench_probe.py --full     # whole probe, on a GPU machine, 3 runs

Runs the probe file as a fresh process each time (what `envbuild verify` does in a
container) and prints the median and worst wall time, plus the probe's own per-check
summary of the last run. Goals: static part < 3 s, whole probe < 15 s on a GPU.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

PROBE = Path(__file__).resolve().parent.parent / "envbuild" / "verify" / "probe.py"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--full", action="store_true", help="whole probe (needs a GPU for meaningful numbers)")
    parser.add_argument("--runs", type=int, default=None)
    args = parser.parse_args()
    runs = args.runs or (3 if args.full else 10)
    cmd = [sys.executable, str(PROBE), "--json"] + ([] if args.full else ["--static"])
    times, report = [], {}
    for _ in range(runs):
        start = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True)
        times.append(time.perf_counter() - start)
        report = json.loads(proc.stdout)
    summary = report["summary"]
    print(f"probe {'full' if args.full else 'static'}: {runs} runs, median {statistics.median(times):.2f} s, "
          f"max {max(times):.2f} s ({summary['pass']} pass, {summary['fail']} fail, {summary['warn']} warn, "
          f"{summary['skip']} skip)")
    for check in report["checks"]:
        if check["name"].startswith("perf."):
            for dev in (check.get("data") or {}).get("devices", []):
                frac = f" = {100 * dev['fraction']:.0f}% of peak" if dev.get("fraction") else ""
                if dev.get("measured"):
                    print(f"  {check['name']}: {dev['gpu']} {dev['measured']:.1f} {dev['unit']}{frac}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
