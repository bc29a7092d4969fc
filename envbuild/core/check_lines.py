"""The links the resolver checks, and each one's line for a resolution: ok, CONFLICT,
`unchecked` when a fact it needs is unknown (`Resolution.unchecked`: never shown as ok),
or `skipped` when the spec gives nothing to check it against (no driver, no GPU).

The text report (`envbuild.output.report`) prints these lines; `--json` carries them as
`checks[]` (`Resolution.to_json`, and each fleet target's).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from envbuild.core.model import Conflict, Resolution, ResolvedStack

# The links the resolver checks: the conflict kind that reports a failure, the link's
# name in `--json` (`checks[].link`, and `unchecked[].links`: model.LINKS) and its label.
_LINKS = (
    ("platform_unsupported", "platform", "platform"),
    ("framework_cuda_mismatch", "framework_build", "framework build -> CUDA"),
    ("driver_too_old", "driver", "CUDA -> driver"),
    ("gpu_arch_unsupported", "gpu_arch", "GPU -> kernels"),
    ("python_unsupported", "python", "Python"),
    ("cudnn_mismatch", "cudnn", "cuDNN"),
    ("library_abi", "shared_cuda", "frameworks share CUDA"),
    ("base_image_cuda_mismatch", "base_image", "base image"),
)


def check_lines(resolution: Resolution, conflicts: tuple[Conflict, ...] | list[Conflict] | None = None
                ) -> list[tuple[str, str, str]]:
    """(status, link, detail) per link: CONFLICT when the resolver reported that kind;
    `skipped` when the spec gave nothing to check it against (no driver, no GPU);
    `unchecked` when a fact needed to check it is unknown; else ok. `conflicts`: the ones
    to judge by, when more than the resolution's (a fleet target's)."""
    return [(status, label, _text_detail(status, detail)) for status, _name, label, detail in _checks(resolution, conflicts)]


def _text_detail(status: str, detail: str) -> str:
    """The text report prints the conflicts above the checks and the unknown facts below."""
    if status == "CONFLICT":
        return "see above"
    return f"{detail} (below)" if status == "unchecked" else detail


def checks_json(resolution: Resolution, conflicts: tuple[Conflict, ...] | list[Conflict] | None = None
                ) -> list[dict[str, str]]:
    """The check lines as `--json` gives them: `link` (a stable name), `label`, `status`
    (ok, conflict, unchecked, skipped) and `detail`."""
    return [{"link": name, "label": label, "status": status.lower(), "detail": detail}
            for status, name, label, detail in _checks(resolution, conflicts)]


def _checks(resolution: Resolution, conflicts) -> list[tuple[str, str, str, str]]:
    spec, stack = resolution.spec, resolution.resolved
    failed = {c.kind for c in (resolution.conflicts if conflicts is None else conflicts)}
    unchecked = {link for item in resolution.unchecked for link in item.links}
    out = []
    for kind, name, label in _LINKS:
        detail = _check_detail(kind, spec, stack)
        if kind in failed:  # a reported conflict always has its line
            out.append(("CONFLICT", name, label, detail or "see the conflict"))
        elif detail is not None and detail.startswith("not checked"):
            out.append(("skipped", name, label, detail))
        elif name in unchecked:  # an unchecked link always has its line too
            shown = spec.driver if kind == "driver_too_old" else detail  # not what the driver was found to run
            out.append(("unchecked", name, label, f"{shown + ': ' if shown else ''}not checked, a fact it needs is unknown"))
        elif detail is None:
            continue
        else:
            out.append(("ok", name, label, detail))
    return out


def _check_detail(kind: str, spec: Any, stack: ResolvedStack | None) -> str | None:
    """What was checked, in a few words; None when the link does not apply to this spec."""
    resolved = {f.name: f for f in stack.frameworks} if stack else {}
    frameworks = ", ".join(f"{f.name} {r.version} ({r.installer}, CUDA {r.cuda})" if (r := resolved.get(f.name))
                           else f"{f.name} {f.constraint or 'any'}" for f in spec.frameworks)
    if kind == "platform_unsupported":
        return stack.platform if stack else spec.platform
    if kind == "framework_cuda_mismatch":
        return frameworks if spec.frameworks else None
    if kind == "driver_too_old":
        if not spec.driver:
            return "not checked: no target driver (give --driver or --host)"
        return driver_note(stack) if stack and stack.max_driver_cuda else spec.driver
    if kind == "gpu_arch_unsupported":
        if not spec.gpus:
            return "not checked: no target GPU (give --gpu or --host)"
        if stack:
            return ", ".join(f"{g.name} ({g.compute_capability or 'unknown'})" for g in stack.gpus)
        return ", ".join(spec.gpus)
    if kind == "python_unsupported":
        return stack.python if stack else (spec.python or "any version (not pinned)")
    if kind == "cudnn_mismatch":
        return (stack.cudnn if stack else None) or spec.cudnn
    if kind == "library_abi":
        return frameworks if len(spec.frameworks) > 1 else None
    if kind == "base_image_cuda_mismatch":
        if stack and stack.base_image:
            return stack.base_image.ref
        return spec.base_image or (f"{spec.base} image family" if spec.base != "auto" else None)
    return None


def driver_note(stack: ResolvedStack) -> str:
    """What the target's driver runs, for the check line and the stack table."""
    note = f"driver {stack.driver} runs CUDA <= {stack.max_driver_cuda}"
    if stack.driver_cuda and stack.driver_cuda != stack.max_driver_cuda:
        note += f" (reports {stack.driver_cuda}; newer {stack.max_driver_cuda.split('.')[0]}.x minors through minor-version compatibility)"
    return note
