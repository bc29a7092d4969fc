"""`envbuild doctor`: what this machine can run (driver, CUDA, GPUs, Docker, NVIDIA runtime)."""
from __future__ import annotations

import argparse
import json

from envbuild.hostenv import hostinfo
from envbuild.verify import probe_api


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print the findings as JSON")
    parser.add_argument("--probe", action="store_true",
                        help="also run the full probe here (CuPy/framework checks of this Python), without performance")


def run(args: argparse.Namespace) -> int:
    host = hostinfo.detect(require_driver=False)
    findings = {
        "driver": host.driver,
        "max_cuda": host.max_cuda,
        "gpus": [{"name": n, "compute_capability": cc, "sm": f"sm_{probe_api.sm_of(cc)}" if cc else None} for n, cc in host.gpus],
        "docker": {"ok": host.docker_ok, "error": host.docker_error},
        "nvidia_runtime": host.nvidia_runtime_ok,
        "cdi_specs": list(host.cdi),
        "notes": list(host.notes),
        "can_run": _can_run(host),
    }
    if args.probe:
        findings["probe"] = probe_api.probe_here("--no-perf")
    ok = bool(host.driver and host.gpus and host.gpu_containers_ok)
    findings["ok"] = ok
    findings["verdict"] = "ok" if ok else "fail"  # fail: this host cannot run GPU containers
    if args.json:
        print(json.dumps(findings, indent=2))
    else:
        print(_text(findings))
    return 0 if ok else 1


def _can_run(host) -> str:
    if not host.driver:
        return "no GPU workloads: no NVIDIA driver on this host"
    major = (host.max_cuda or "0").split(".")[0]
    archs = ", ".join(sorted({f"sm_{s}" for s in (_sm(cc) for _, cc in host.gpus) if s})) or "unknown"
    return (f"images with CUDA <= {host.max_cuda} (and other CUDA {major}.x minors through minor-version "
            f"compatibility), built for {archs} or with PTX for an older architecture")


def _sm(cc):
    return probe_api.sm_of(cc) if cc else None


def _text(f: dict) -> str:
    yes = lambda b: "yes" if b else "no"  # noqa: E731
    lines = [
        f"NVIDIA driver:    {f['driver'] or 'not found'}",
        f"newest CUDA:      {f['max_cuda'] or '-'}",
        "GPUs:             " + ("; ".join(f"{g['name']} (cc {g['compute_capability'] or '?'}, {g['sm'] or '?'})"
                                         for g in f["gpus"]) or "none"),
        f"Docker engine:    {yes(f['docker']['ok'])}" + (f" ({f['docker']['error']})" if f["docker"]["error"] else ""),
        f"NVIDIA runtime:   {yes(f['nvidia_runtime'])}",
        f"CDI specs:        {', '.join(f['cdi_specs']) or 'none'}",
        f"can run:          {f['can_run']}",
    ]
    lines += [f"note: {n}" for n in f["notes"]]
    if "probe" in f:
        lines.append(probe_api.format_text(f["probe"]))
    if not f["ok"]:
        lines.append("verdict: this host cannot run GPU containers"
                     + ("" if f["driver"] else " (install the NVIDIA driver)")
                     + ("" if f["docker"]["ok"] else " (start the Docker engine)")
                     + ("" if f["nvidia_runtime"] or f["cdi_specs"] else
                        " (install the NVIDIA Container Toolkit or generate a CDI spec)"))
    return "\n".join(lines)
