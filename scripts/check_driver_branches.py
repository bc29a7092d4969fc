"""Hold matrices/cuda_driver.yaml `architectures` to NVIDIA's open kernel modules.

    python3 scripts/check_driver_branches.py PATH-TO-A-CLONE-OF-NVIDIA/open-gpu-kernel-modules

Every tag's README lists the GPUs that release supports ("Compatible GPUs"). For each GPU
name the matrix knows, the script checks that no tag lists it on a branch its row says
does not drive it, and prints, per row with a first branch, the first tag that lists one
of its GPUs. Exit 1 on a contradiction. It needs the clone (not a network), so it is run
by hand when the table changes, not by the test suite.
"""
from __future__ import annotations

import re
import subprocess
import sys

from envbuild import matrix
from envbuild.matrix.lookup import driver_architecture, find_gpu

_ROW = re.compile(r"\| (.+?)\s+\| [0-9A-F]{4}")


def git(clone: str, *args: str) -> str:
    return subprocess.run(["git", "-C", clone, *args], capture_output=True, text=True, check=True).stdout


def main(clone: str) -> int:
    m = matrix.load()
    tags = sorted(git(clone, "tag").split(), key=lambda t: tuple(int(x) for x in t.split(".")))
    first: dict[tuple[str, ...], str] = {}
    named, bad = set(), 0
    for tag in tags:
        branch = int(tag.split(".")[0])
        for line in git(clone, "show", f"{tag}:README.md").splitlines():
            found = _ROW.match(line)
            gpu = find_gpu(m, found.group(1).strip()) if found else None
            row = driver_architecture(m, gpu.compute_capability) if gpu else None
            if row is None:
                continue
            named.add(gpu.name)
            first.setdefault(row.compute_capabilities, tag)
            if row.misses(branch):
                bad += 1
                print(f"CONTRADICTION {tag}: lists {gpu.name}, but its row ({row.architecture}) says R{branch} "
                      f"is {row.misses(branch)} its branches")
    for row in m.driver_architectures:
        if row.first_branch is not None:
            print(f"{row.architecture} {', '.join(row.compute_capabilities)}: row R{row.first_branch}, "
                  f"first listed in {first.get(row.compute_capabilities, 'no tag')}")
    print(f"{len(tags)} tags, {len(named)} GPU models the matrix knows, {bad} contradictions")
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__.strip().splitlines()[2].strip())
    sys.exit(main(sys.argv[1]))
