"""The probe's JSON report, found in what its process printed.

The probe prints one JSON object; whatever ran it (a container, a Slurm job, a Kubernetes
pod) may print lines before it, so the report is the first JSON object with `checks` that
parses. Shared by the single-image runner and by the schedulers that collect fleet runs.
"""
from __future__ import annotations

import json
from typing import Any


def report_from_output(stdout: str) -> dict[str, Any] | None:
    start = stdout.find("{")
    while start != -1:
        try:
            value = json.loads(stdout[start:])
            return value if isinstance(value, dict) and "checks" in value else None
        except json.JSONDecodeError:
            start = stdout.find("\n{", start + 1)
            start = start + 1 if start != -1 else -1
    return None
