"""JUnit XML for CI systems: one testcase per check.

fail -> <failure type="SIGNATURE">, skip -> <skipped>, warn -> a passing testcase whose <system-out> says
WARN (CI dashboards show it without failing the build). A failed check that is not
required (performance) is written as passing with its failure in <system-out>, matching
the exit code.
"""
from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from typing import Any

from envbuild.infra import atomic


def junit_tree(checks: list[dict[str, Any]], suite: str = "envbuild.verify", elapsed_s: float = 0.0,
               properties: dict[str, str] | None = None) -> ET.ElementTree:
    failures = sum(1 for c in checks if c["status"] == "fail" and c.get("required", True))
    skipped = sum(1 for c in checks if c["status"] == "skip")
    root = ET.Element("testsuites", name=suite, tests=str(len(checks)), failures=str(failures))
    ts = ET.SubElement(root, "testsuite", name=suite, tests=str(len(checks)), failures=str(failures),
                       errors="0", skipped=str(skipped), time="%.3f" % elapsed_s)
    if properties:  # what the checks ran on: image, GPUs, driver
        props = ET.SubElement(ts, "properties")
        for key, value in properties.items():
            ET.SubElement(props, "property", name=key, value=str(value))
    for c in checks:
        group = c["name"].split(".", 1)[0]
        case = ET.SubElement(ts, "testcase", classname=f"{suite}.{group}", name=c["name"],
                             time="%.3f" % float(c.get("time_s") or 0.0))
        text = c.get("details") or ""
        extra = "\n".join(f"{k}: {c[k]}" for k in ("cause", "fix") if c.get(k))
        if c["status"] == "fail" and c.get("required", True):
            failure = ET.SubElement(case, "failure", message=(c.get("cause") or text)[:500],
                                    type=str(c.get("signature") or (c.get("data") or {}).get("signature")
                                             or "check_failed"))
            failure.text = "\n".join(x for x in (text, extra) if x)
        elif c["status"] == "skip":
            ET.SubElement(case, "skipped", message=text[:500])
        if c["status"] in ("warn", "pass") or (c["status"] == "fail" and not c.get("required", True)):
            out = ET.SubElement(case, "system-out")
            out.text = f"{c['status'].upper()}: " + "\n".join(x for x in (text, extra) if x)
    ET.indent(root)
    return ET.ElementTree(root)


def write_junit(path: str | os.PathLike, checks: list[dict[str, Any]], suite: str = "envbuild.verify",
                elapsed_s: float = 0.0, properties: dict[str, str] | None = None) -> None:
    """Write atomically: a failed run never leaves a half-written file behind."""
    with atomic.output(path, "wb") as fh:
        junit_tree(checks, suite, elapsed_s, properties).write(fh, encoding="utf-8", xml_declaration=True)
