"""What envbuild shares with its probe: the one way into envbuild/verify/probe.py.

The probe is a standalone script: it is copied into images and jobs (`envbuild.infra.paths.PROBE_FILE`)
and runs there on Python 3.6 or newer with the standard library only, so it cannot import
envbuild. envbuild, the other way round, uses a few of its names, and only these, only
from here: what the probe exposes to the host is this module's list, and a change to any
of these names is a change to the contract between the two sides. `tests/test_layers.py`
checks that no other module imports the probe and that none of these is a private name.

The report's vocabulary
    PROBE_VERSION       the report format's version (`probe_version` in the JSON)
    STATUSES            a check's possible statuses: pass, fail, skip, warn
    NO_GPU              the words a GPU check's details start with when it saw no GPU
    PERF_WARN_FRACTION  a measurement below this fraction of the published peak warns

Checks and their causes, for the runner's own checks
    check               one check result, shaped as the probe's
    recognise_failure   the known failure an error text shows: its name, code, cause and fix
    first_line          the line of an error text that says what went wrong

Values computed the same way on both sides
    sm_of               '8.6' / 'sm_86' -> 86
    facts_from_matrices what the probe is told from the matrices (peaks, driver floors)

The probe on this host (`envbuild doctor`, `hostinfo`)
    query_gpus          driver, newest CUDA and GPUs, from nvidia-smi or NVML
    probe_here          the probe's report for this machine's Python

Its report
    report_from_output  the report in what a job printed around it
    format_text         the report as the terminal shows it
"""
from __future__ import annotations

import json
from typing import Any

from envbuild.verify.probe import (NO_GPU, PERF_WARN_FRACTION, PROBE_VERSION, STATUSES, build_parser, check,
                                   facts_from_matrices, first_line, format_text, query_gpus, recognise_failure,
                                   run_probe, sm_of)

__all__ = ["NO_GPU", "PERF_WARN_FRACTION", "PROBE_VERSION", "STATUSES", "check", "facts_from_matrices", "first_line",
           "format_text", "probe_here", "query_gpus", "recognise_failure", "report_from_output", "sm_of"]


def probe_here(*argv: str) -> dict[str, Any]:
    """The report `probe.py --json ARGV` prints, for this machine's Python (its library
    checks run in child processes of this one)."""
    return run_probe(build_parser().parse_args(list(argv)))


def report_from_output(stdout: str) -> dict[str, Any] | None:
    """The probe's report in what its process printed: whatever ran it (a container, a
    Slurm job, a Kubernetes pod) may print lines before it, so the report is the first
    JSON object with `checks` that parses; None when there is none."""
    start = stdout.find("{")
    while start != -1:
        try:
            value = json.loads(stdout[start:])
            return value if isinstance(value, dict) and "checks" in value else None
        except json.JSONDecodeError:
            start = stdout.find("\n{", start + 1)
            start = start + 1 if start != -1 else -1
    return None
