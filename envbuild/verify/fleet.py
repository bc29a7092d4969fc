"""`envbuild verify IMAGE --fleet`: the probe on every target, through its own scheduler.

Each target's job is the probe alone in the image (envbuild/targets/<kind>.py renders it).
Kinds with a `submit` are submitted and waited for; the others get their job definition
written next to the reports with the command to submit it. Targets the caller names in
`skipped` (the stack does not resolve there) are not run, with the reason. The reports
are merged into one JSON document and one JUnit file with a testsuite per target.
"""
from __future__ import annotations

import re
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any, Mapping

from envbuild.fleet import Target
from envbuild.infra import atomic
from envbuild.output.progress import Progress
from envbuild.targets import module
from envbuild.targets.job import Job
from envbuild.verify.junit import junit_tree
from envbuild.verify.probe_api import report_from_output


def job_for(image: str, target: Target, *, static: bool) -> Job:
    return Job(name=f"envbuild-verify-{target.name}"[:63].rstrip("-"), image=image, target=target,
               gpus=1, static_probe=static)


def verify_fleet(image: str | Mapping[str, str], targets: tuple[Target, ...], workdir: Path, *, static: bool = False,
                 timeout: float = 900, kube_context: str | None = None, progress=None,
                 skipped: dict[str, str] | None = None, verdicts: dict[str, str] | None = None,
                 unchecked: dict[str, list] | None = None) -> dict[str, Any]:
    """`image`: the one image every target runs, or each target's own (target name ->
    image, from a fleet manifest). `skipped`: target name -> why it is not run (the stack's
    conflict there). `verdicts`: target name -> the stack's verdict there (ok, unverified,
    conflict), and `unchecked`: target name -> the links not checked there (as `resolve
    --json` lists them), for the report."""
    progress = progress or Progress(sys.stderr)
    image_of = (lambda t: image[t.name]) if isinstance(image, Mapping) else (lambda t: image)
    skipped = skipped or {}
    verdicts, unchecked = verdicts or {}, unchecked or {}
    workdir.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    results: dict[str, dict] = {}
    by_kind: dict[str, list[Job]] = {}
    for t in targets:
        if t.name not in skipped:
            by_kind.setdefault(t.kind, []).append(job_for(image_of(t), t, static=static))
    for kind, jobs in by_kind.items():
        mod = module(kind)
        if hasattr(mod, "submit"):
            kwargs = {"timeout": timeout, **({"context": kube_context} if kind == "k8s" else {})}
            for job_name, result in mod.submit(jobs, workdir, progress, **kwargs).items():
                results[job_name] = result
        else:
            for job in jobs:
                path = workdir / f"{job.name}{mod.SUFFIX}"
                atomic.write_text(path, mod.render(job))
                results[job.name] = {"status": "submitted-manually", "definition": str(path)}
            progress.line(f"{kind}: wrote {len(jobs)} job definition(s) to {workdir}; envbuild does not submit to {kind}")
    progress.done()
    entries = []
    for t in targets:
        job = job_for(image_of(t), t, static=static)
        r = results.get(job.name, {})
        probe = report_from_output(r["printed"]) if "printed" in r else None
        checks = list(probe.get("checks", [])) if probe else []
        failed = [c["name"] for c in checks if c["status"] == "fail" and c.get("required", True)]
        reason = skipped.get(t.name)
        if reason is not None:
            status = "not_run"
        elif probe:
            status = "fail" if failed else "pass"
        elif r.get("status") == "submitted-manually":
            status = "not_run"
        else:
            status, failed = "fail", ["scheduler.job"]
            checks = [{"name": "scheduler.job", "status": "fail", "required": True,
                       "details": f"the job ended {r.get('state', 'without a report')} and printed no probe report",
                       "cause": (r.get("tail") or "").strip()[-500:] or None, "fix": f"read {r.get('output')}"}]
        entries.append({"name": t.name, "kind": t.kind, "gpu": t.describe_gpu(), "image": job.image, "status": status,
                        "resolve_verdict": verdicts.get(t.name), "resolve_unchecked": unchecked.get(t.name, []),
                        "not_run_reason": reason,
                        "scheduler_job": r.get("scheduler_job"), "state": r.get("state"),
                        "definition": r.get("definition") or r.get("manifest"), "failed_required": failed,
                        "checks": checks, "probe": {k: v for k, v in (probe or {}).items() if k not in ("checks", "verdict")}})
    ok = all(e["status"] == "pass" for e in entries)
    # pass: every target passed; fail: one failed; not_run: none failed, but not every one ran
    verdict = "pass" if ok else "fail" if any(e["status"] == "fail" for e in entries) else "not_run"
    return {"verdict": verdict, "image": None if isinstance(image, Mapping) else image, "ok": ok,
            "mode": "static" if static else "full", "elapsed_s": round(time.monotonic() - start, 2),
            "summary": {s: sum(e["status"] == s for e in entries) for s in ("pass", "fail", "not_run")},
            "targets": entries}


def write_junit(path, report: dict[str, Any]) -> None:
    """One testsuite per target (its checks as testcases), in one file."""
    root = ET.Element("testsuites", name="envbuild.verify.fleet")
    for e in report["targets"]:
        if e.get("not_run_reason"):
            checks = [{"name": "resolve.target", "status": "skip", "required": True,
                       "details": f"not run: {e['not_run_reason']}"}]
        else:
            checks = e["checks"] or [{"name": "scheduler.submitted", "status": "skip", "required": True,
                                      "details": f"not run by envbuild: submit {e['definition']}"}]
        suite = junit_tree(checks, suite=f"envbuild.verify.{e['name']}").getroot().find("testsuite")
        root.append(suite)
    root.set("tests", str(sum(int(s.get("tests")) for s in root)))
    root.set("failures", str(sum(int(s.get("failures")) for s in root)))
    ET.indent(root)
    with atomic.output(path, "wb") as fh:
        ET.ElementTree(root).write(fh, encoding="utf-8", xml_declaration=True)


def summary_text(report: dict[str, Any]) -> str:
    lines = []
    for e in report["targets"]:
        extra = f" (job {e['scheduler_job']}, {str(e['state']).lower()})" if e.get("scheduler_job") else ""
        if e["status"] == "not_run":
            extra = f" (not run: {e['not_run_reason']})" if e.get("not_run_reason") else f" (submit {e['definition']})"
        failed = f": failed {', '.join(e['failed_required'])}" if e["failed_required"] else ""
        if e["failed_required"] == ["scheduler.job"]:  # no report: the job's last words say why
            failed = f": {_why(e['checks'][0].get('cause') or '')}"
        lines.append(f"{e['status'].upper():8} {e['name']:<20} {e['gpu']}{extra}{failed}")
    s = report["summary"]
    lines.append(f"verify: {s['pass']} passed, {s['fail']} failed, {s['not_run']} not run by envbuild "
                 f"({report['mode']} probe, {report['elapsed_s']} s)")
    return "\n".join(lines)


def _why(output: str) -> str:
    """The line of a failed job's output that says why: its last error line, else its last line."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    errors = [line for line in lines if re.search(r"error|denied|not found|unable|cannot|fatal", line, re.I)]
    return (errors or lines or ["no output"])[-1][:300]
