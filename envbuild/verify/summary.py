"""The human summary printed by `envbuild verify`."""
from __future__ import annotations

from envbuild.verify.probe_api import format_text
from envbuild.verify.runner import Report


def summary_text(report: Report) -> str:
    data = report.to_json()
    info = data["probe"]
    gpus = ", ".join(f"{g.get('name')} (cc {g.get('compute_capability') or '?'})" for g in info.get("gpus") or []) or "none"
    head = [
        f"image:   {report.image}",
        f"GPUs:    {gpus}" + ("" if report.gpu_request else "  [static checks only: no GPU asked for]"
                                 if info.get("mode") == "static" else "  [run without a GPU]"),
        f"driver:  {info.get('driver') or '-'} (CUDA up to {info.get('driver_max_cuda') or '-'}); "
        f"image CUDA {info.get('image_cuda') or '-'}",
    ]
    body = format_text(dict(info, checks=report.checks, summary=data["summary"],
                                  mode=info.get("mode", "full"), python=info.get("python", "?"),
                                  elapsed_s=data["elapsed_s"]))
    return "\n".join(head) + "\n" + body
