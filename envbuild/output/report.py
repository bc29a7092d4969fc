"""Human-readable output of a `Resolution`: conflicts first, then the resolved stack as a
compact table, then one line per check (ok, CONFLICT, unchecked, skipped: `envbuild.core.check_lines`),
the facts that were unknown, the warnings, then the verdict.

Plain text that reads the same in a terminal and in a CI log; colour only when asked
(the caller turns it on for a tty without NO_COLOR). Fixes are shown as the flags that
apply them, so a user can paste them onto the command line.
"""
from __future__ import annotations

import shlex
from typing import Any

from envbuild.core.check_lines import check_lines, driver_note
from envbuild.core.model import Conflict, Fix, Resolution, ResolvedStack
from envbuild.output import say

MAX_FIXES = 3
MAX_FACTS = 3  # per conflict in text output; --json carries all of them
_COLOURS = {"red": "31", "yellow": "33", "green": "32", "bold": "1", "dim": "2"}
# Fix.changes key -> the flag that sets it (see envbuild.spec.cli_args)
_FLAGS = {
    "cuda": "--cuda", "cudnn": "--cudnn", "python": "--python", "driver": "--driver",
    "installer": "--installer", "platform": "--platform", "base_image": "--base", "base": "--base",
}


def render(resolution: Resolution, *, colour: bool = False) -> str:
    paint = _painter(colour)
    lines: list[str] = []
    for conflict in resolution.conflicts:
        lines += _conflict(conflict, paint)
        lines.append("")
    if resolution.resolved is not None:
        judged = "an image build" if resolution.spec.image_build else "a host (no image asked; --for image judges an image build)"
        lines.append(paint("bold", "Resolved stack") + f" for {judged}")
        lines += ["  " + row for row in _table(_stack_rows(resolution.resolved))]
        lines.append("")
    lines.append(paint("bold", "Checks"))
    for status, link, detail in check_lines(resolution):
        colour = {"ok": "green", "CONFLICT": "red", "unchecked": "yellow"}.get(status, "dim")
        lines.append(f"  {paint(colour, f'{status:<9}')} {link:<24} {detail}".rstrip())
    for item in resolution.unchecked:
        lines.append(f"  {paint('yellow', 'unknown  ')} {item.message}")
    for warning in resolution.warnings:
        lines.append(f"  {paint('yellow', 'warn     ')} {warning.kind}: {warning.message}")
        lines += [f"    fix {i}: {format_fix(fix)}" for i, fix in enumerate(warning.fixes[:MAX_FIXES], 1)]
    lines.append("")
    lines.append(_verdict(resolution, paint))
    return "\n".join(lines)


def say_unchecked(resolution: Resolution) -> None:
    """An unverified stack goes on (without --strict), saying on stderr what was not checked."""
    for item in resolution.unchecked:
        say.warning(f"unverified ({', '.join(item.links)} not checked): {item.message}")


def format_fix(fix: Fix) -> str:
    """`use cudatoolkit 10.2  [--cuda 10.2]`: the description and the flags that apply it."""
    flags = fix_flags(fix)
    return f"{fix.description}  [{flags}]" if flags else fix.description


def fix_flags(fix: Fix) -> str:
    parts: list[str] = []
    for key, value in fix.changes.items():
        if key.startswith("frameworks."):
            name = key.split(".", 1)[1]
            if value is None:
                parts.append(f"(drop {name})")
            else:
                text = str(value)
                parts += ["--framework", shlex.quote(f"{name}=={text}" if text[:1].isdigit() else f"{name}{text}")]
        elif key == "gpus":
            for gpu in value or ():
                parts += ["--gpu", shlex.quote(str(gpu))]
        elif value is None:
            parts.append(f"(any {key})")  # no flag unsets a value; the spec key is left out
        elif key in _FLAGS:
            parts += [_FLAGS[key], shlex.quote(str(value))]
        else:
            parts.append(f"{key}={value}")
    return " ".join(parts)


def _conflict(conflict: Conflict, paint: Any) -> list[str]:
    lines = [f"{paint('red', 'CONFLICT')} [{conflict.kind}] {conflict.message}"]
    lines += [f"  {_fact(f)}" for f in conflict.facts[:MAX_FACTS]]
    if len(conflict.facts) > MAX_FACTS:
        lines.append(f"  ... {len(conflict.facts) - MAX_FACTS} more facts in --json")
    fixes = conflict.fixes[:MAX_FIXES]
    if not fixes:
        lines.append("  no fix found within the matrices")
    for i, fix in enumerate(fixes, 1):
        lines.append(f"  fix {i}: {format_fix(fix)}")
    return lines


def _fact(fact: Any) -> str:
    marks = [m for m, on in (("inferred", fact.inferred), ("secondary source", fact.secondary)) if on]
    note = f" ({', '.join(marks)})" if marks else ""
    return f"because {fact.text}{note} - {fact.source}"


def _stack_rows(stack: ResolvedStack) -> list[tuple[str, str, str]]:
    rows: list[tuple[str, str, str]] = []
    for fw in stack.frameworks:
        how = fw.installer
        if fw.installer == "pip" and fw.pip_requirements:
            how += ": " + " ".join(fw.pip_requirements)
            if fw.pip_index_url:
                how += f" from {fw.pip_index_url}"
        elif fw.conda_specs:
            how += ": " + " ".join(fw.conda_specs)
        if fw.archs:
            how += f"; kernels {_archs(fw.archs)}"
        rows.append((fw.name, fw.version, how))
    driver = driver_note(stack) if stack.driver and stack.max_driver_cuda else ""
    rows.append(("cuda", stack.cuda or "-", driver))
    if stack.cudnn:
        rows.append(("cudnn", stack.cudnn, ""))
    rows.append(("python", stack.python, ""))
    if stack.driver:
        rows.append(("driver", stack.driver, ""))
    for gpu in stack.gpus:
        kind = {True: ", data center", False: ""}.get(gpu.datacenter, "")
        rows.append(("gpu", gpu.name, f"compute capability {gpu.compute_capability or 'unknown'}{kind}"))
    channels = f"; channels {', '.join(stack.channels)}" if stack.channels else ""
    rows.append(("installer", stack.installer, f"platform {stack.platform}{channels}"))
    if stack.base_image is not None:
        rows.append(("base image", stack.base_image.ref, stack.base_image.why))
    return rows


def _archs(archs: tuple[str, ...]) -> str:
    """`sm_50 .. sm_90 + compute_90` rather than a dozen names."""
    sass = [a for a in archs if a.startswith("sm_")]
    ptx = [a for a in archs if a.startswith("compute_")]
    text = f"{sass[0]}..{sass[-1]}" if len(sass) > 2 else " ".join(sass)
    if ptx:
        text += (" + " if text else "") + " ".join(ptx) + " (PTX)"
    return text


def _table(rows: list[tuple[str, str, str]]) -> list[str]:
    width0 = max(len(r[0]) for r in rows)
    # a long value (an image reference) overflows instead of widening every row
    width1 = max((len(r[1]) for r in rows if len(r[1]) <= 24), default=0)
    return [f"{a:<{width0}}  {b:<{width1}}  {c}".rstrip() for a, b, c in rows]


def _verdict(resolution: Resolution, paint: Any) -> str:
    n_conf, n_warn, n_unchecked = len(resolution.conflicts), len(resolution.warnings), len(resolution.unchecked)
    counts = f"{n_conf} conflict{'s' * (n_conf != 1)}, "
    if n_unchecked:
        counts += f"{n_unchecked} unknown fact{'s' * (n_unchecked != 1)}, "
    counts += f"{n_warn} warning{'s' * (n_warn != 1)}"
    colour = {"ok": "green", "unverified": "yellow"}.get(resolution.verdict, "red")
    where = resolution.spec.source or "command line"
    line = f"verdict: {paint(colour, resolution.verdict)} ({counts}) for {where}"
    if resolution.verdict == "unverified":
        line += "; refused under --strict" if resolution.spec.strict else "; --strict refuses it"
    return line


def _painter(colour: bool):
    def paint(name: str, text: str) -> str:
        return f"\033[{_COLOURS[name]}m{text}\033[0m" if colour else text

    return paint
