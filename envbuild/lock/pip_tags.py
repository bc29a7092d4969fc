"""The wheel platform tags a Linux target accepts, for installers told about a target
that is not the machine they run on.

A wheel built on an old system runs on newer ones, so a target with glibc 2.35 accepts
every `manylinux_2_X` tag from 2_35 down, their legacy aliases (manylinux2014 = 2_17,
manylinux2010 = 2_12, manylinux1 = 2_5; PEP 600) and plain `linux_*`. This is the list
packaging's `tags` module builds for the running system; pip's `--platform` (pip 23.2,
what a new Python 3.11 venv ships) takes tags literally, so it needs all of them.
"""
from __future__ import annotations

from envbuild.infra.errors import UserError

MACHINES = {"linux-64": "x86_64", "linux-aarch64": "aarch64"}
# PEP 600: the old names are aliases of these glibc versions
LEGACY_ALIASES = {(2, 17): "manylinux2014", (2, 12): "manylinux2010", (2, 5): "manylinux1"}
# packaging/_manylinux.py: x86_64 and i686 wheels go back to glibc 2.5; others start at 2.17
OLDEST_GLIBC_MINOR = {"x86_64": 5, "aarch64": 17}


def machine_for(platform: str) -> str:
    machine = MACHINES.get(platform)
    if machine is None:
        raise UserError(f"pip locks are made for {', '.join(MACHINES)}, not {platform}", where="--platform")
    return machine


def platform_tags(platform: str, glibc: str) -> list[str]:
    """Every platform tag a `platform` machine with C library `glibc` (e.g. "2.35") accepts,
    most specific first."""
    machine = machine_for(platform)
    major, minor = (int(part) for part in glibc.split(".")[:2])
    tags = []
    for m in range(minor, OLDEST_GLIBC_MINOR[machine] - 1, -1):
        tags.append(f"manylinux_{major}_{m}_{machine}")
        alias = LEGACY_ALIASES.get((major, m))
        if alias:
            tags.append(f"{alias}_{machine}")
    tags.append(f"linux_{machine}")
    return tags


def uv_platform(platform: str, glibc: str) -> str:
    """uv's `--python-platform` name for the target, e.g. `x86_64-manylinux_2_35`."""
    major, minor = glibc.split(".")[:2]
    return f"{machine_for(platform)}-manylinux_{major}_{minor}"
