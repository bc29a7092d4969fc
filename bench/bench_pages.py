"""What an HTML page adds to the command that writes it.

    python3 bench/bench_pages.py [--repeat N]

The 100-target fleet of `bench_fleet.py --models` (one target per GPU model, Kepler to
Blackwell, every target with conflicts and fixes: the largest page): `envbuild resolve
--framework pytorch --fleet F` and the same with `--html out.html`, run in turn N times;
the median of the N pairs' differences (each pair meets the same machine load), wall and
CPU. In process: building the fleet's JSON object and rendering the page from it, and the
whole-table `matrix grid pytorch` page. Target: < 100 ms added for the fleet's page.
"""
from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_fleet import ENV, ROOT, models_fleet_text

TARGET_MS = 100.0


def run_ms(argv: list[str]) -> tuple[float, float, int]:
    """Wall and CPU ms (the child's user + system time) of one run, and its exit code."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    code = subprocess.run(argv, capture_output=True, cwd=ROOT, env=ENV).returncode
    wall = (time.perf_counter() - start) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = ((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)) * 1000
    return wall, cpu, code


def in_process_ms(fleet: Path, repeat: int) -> tuple[float, float, float]:
    """Median ms of the fleet's JSON object, of its page, and of the whole pytorch grid page."""
    from envbuild import frameworks, matrix
    from envbuild.fleet import load_fleet
    from envbuild.fleet.resolve import resolve_fleet, to_json
    from envbuild.html import grid_page, resolve_page
    from envbuild.resolver import arch_grid
    from envbuild.spec import spec_from_mapping

    spec = spec_from_mapping({"frameworks": {"pytorch": "*"}})
    result = resolve_fleet(spec, load_fleet(str(fleet)).select([]), joint_fixes=True)

    def timed(work) -> float:
        start = time.perf_counter()
        work()
        return (time.perf_counter() - start) * 1000

    data = to_json(result)
    json_ms = statistics.median(timed(lambda: to_json(result)) for _ in range(repeat))
    page_ms = statistics.median(timed(lambda: resolve_page.render_fleet(data, source="spec", fleet="fleet"))
                                for _ in range(repeat))
    m = matrix.load()
    table = arch_grid.grid(m, "pytorch", list(frameworks.get("pytorch").rows(m)), [])
    grid_ms = statistics.median(timed(lambda: grid_page.render(table)) for _ in range(repeat))
    return json_ms, page_ms, grid_ms


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=11)
    args = parser.parse_args()
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    with tempfile.TemporaryDirectory() as tmp:
        fleet, page = Path(tmp) / "fleet.yaml", Path(tmp) / "fleet.html"
        fleet.write_text(models_fleet_text())
        cli = [sys.executable, "-m", "envbuild", "resolve", "--framework", "pytorch", "--fleet", str(fleet)]
        run_ms(cli + ["--html", str(page)])  # warm the caches
        plain, paged = [], []
        for _ in range(args.repeat):
            plain.append(run_ms(cli))
            paged.append(run_ms(cli + ["--html", str(page)]))
        size = page.stat().st_size
        inproc = in_process_ms(fleet, args.repeat)
    wall = [b[0] - a[0] for a, b in zip(plain, paged)]
    cpu = [b[1] - a[1] for a, b in zip(plain, paged)]
    print("| run | exit | median wall ms | median CPU ms |\n|---|---|---|---|")
    print(f"| `resolve --fleet` (100 targets) | {plain[0][2]} | {statistics.median(p[0] for p in plain):.0f} | "
          f"{statistics.median(p[1] for p in plain):.0f} |")
    print(f"| `resolve --fleet --html` | {paged[0][2]} | {statistics.median(p[0] for p in paged):.0f} | "
          f"{statistics.median(p[1] for p in paged):.0f} |")
    print(f"| added by the page (median of {len(wall)} pairs) | | {statistics.median(wall):.0f} | "
          f"{statistics.median(cpu):.0f} |")
    print(f"\nin process: the fleet's JSON object {inproc[0]:.1f} ms, its page {inproc[1]:.1f} ms ({size / 1024:.0f} KiB); "
          f"the whole pytorch grid page {inproc[2]:.1f} ms")
    added = statistics.median(wall)
    print(f"target: < {TARGET_MS:.0f} ms added; {'met' if added < TARGET_MS else 'NOT met'}")
    return 0 if added < TARGET_MS else 1


if __name__ == "__main__":
    sys.exit(main())
