"""`envbuild verify --html FILE`: each check with its status and signature, and the
probe's measured bandwidth and TFLOP/s as bars against the GPU's published peak
(matrices/gpu_peak.yaml); with `--fleet`, an overview and the same per target. Rendered
from `verify --json`'s object (schema/verify.schema.json, or the fleet report)."""
from __future__ import annotations

from typing import Any

from envbuild.html.markup import Markup, h
from envbuild.html.page import badge, document, kv, legend, section
from envbuild.verify.probe_api import PERF_WARN_FRACTION

_LEGEND = ("pass", "warn", "fail", "skip")
_LABELS = {"pass": "pass", "warn": "warning (never fails the run)", "fail": "fail",
           "skip": "skipped (not installed, not asked, or no GPU for it)"}


def render(data: dict[str, Any]) -> str:
    """One image verified on this host's GPUs (`verify IMAGE --json`)."""
    probe = data.get("probe") or {}
    body = [h("header", {}, h("h1", {}, "Verify: ", h("span", {"class": "mono"}, data.get("image"))),
              h("div", {"class": "verdict"}, kv([("verdict", badge(data.get("verdict"))), *_ran_on(probe),
                                                  ("GPUs asked", data.get("gpu_request") or "none"),
                                                  ("checks", _counts(data.get("summary") or {})),
                                                  ("time", f"{data.get('elapsed_s')} s")])))]
    body.append(section("Performance against the published peak", _perf(data.get("checks") or []), id="perf"))
    body.append(section("Checks", legend(_LEGEND, _LABELS), _checks(data.get("checks") or []), id="checks"))
    return document(f"envbuild verify: {data.get('image')}", body, made_from="envbuild verify --json")


def render_fleet(data: dict[str, Any]) -> str:
    """An image verified on every target of a fleet (`verify IMAGE --fleet --json`)."""
    targets = data.get("targets") or []
    verdict = data.get("verdict") or ("pass" if data.get("ok") else "fail")
    summary = data.get("summary") or {}
    counts = ", ".join(f"{summary.get(k, 0)} {w}" for k, w in (("pass", "passed"), ("fail", "failed"),
                                                                ("not_run", "not run by envbuild")))
    probe = "only the checks that need no GPU" if data.get("mode") == "static" else "every check"
    image = data.get("image") or f"each target's own image ({data.get('manifest')})"
    body = [h("header", {}, h("h1", {}, "Verify on a fleet: ", h("span", {"class": "mono"}, image)),
              h("div", {"class": "verdict"}, kv([("verdict", badge(verdict)), ("targets", counts),
                                                  ("probe", f"{data.get('mode')} ({probe})"),
                                                  ("time", f"{data.get('elapsed_s')} s")])))]
    statuses = legend(("pass", "fail", "not_run"), {"not_run": "not run: envbuild wrote the job, you submit it"})
    body.append(section("Targets", _overview(targets), statuses, id="targets"))
    for i, t in enumerate(targets):
        probe = t.get("probe") or {}
        where = [("status", badge(t.get("status"))), ("GPU", t.get("gpu")),
                 ("image", h("code", {}, t.get("image")) if not data.get("image") else None), ("scheduler", t.get("kind")),
                 ("job", " ".join(str(x) for x in (t.get("scheduler_job"), t.get("state")) if x) or None),
                 ("job definition", h("code", {}, t.get("definition")) if t.get("definition") else None), *_ran_on(probe)]
        parts = [h("h2", {}, "Target ", h("span", {"class": "mono"}, t.get("name"))), kv(where)]
        if t.get("checks"):
            parts += [h("h3", {}, "Performance against the published peak"), _perf(t["checks"]),
                      h("h3", {}, "Checks"), _checks(t["checks"])]
        body.append(h("section", {"class": "target", "id": f"target-{i}"}, parts))
    body.append(section("Legend", legend(_LEGEND, _LABELS), id="legend"))
    return document(f"envbuild verify --fleet: {image}", body, made_from="envbuild verify --fleet --json")


# --- parts ---------------------------------------------------------------------------------------
def _ran_on(probe: dict[str, Any]) -> list[tuple[str, Any]]:
    gpus = "; ".join(f"{g.get('name')} (compute capability {g.get('compute_capability') or '?'})"
                     for g in probe.get("gpus") or [])
    driver = probe.get("driver")
    if driver and probe.get("driver_max_cuda"):
        driver = f"{driver} (runs CUDA \u2264 {probe['driver_max_cuda']})"
    return [("GPUs seen", gpus or None), ("driver", driver), ("image CUDA", probe.get("image_cuda")),
            ("host", probe.get("host"))]


def _counts(summary: dict[str, Any]) -> str:
    return ", ".join(f"{summary.get(k, 0)} {k}" for k in ("pass", "warn", "fail", "skip"))


def _overview(targets: list[dict[str, Any]]) -> Markup:
    rows = []
    for i, t in enumerate(targets):
        failed = ", ".join(t.get("failed_required") or []) or None
        rows.append(h("tr", {}, h("td", {"class": "lead-cell"}, badge(t.get("status"))),
                      h("td", {"class": "lead-cell"}, h("a", {"href": f"#target-{i}"}, h("strong", {}, t.get("name")))),
                      h("td", {"data-label": "GPU"}, t.get("gpu")),
                      h("td", {"data-label": "scheduler"}, t.get("kind")),
                      h("td", {"data-label": "failed"}, failed or "-")))
    return h("div", {"class": "scroll"}, h("table", {"class": "rows"}, h("thead", {}, h("tr", {}, [
        h("th", {}, c) for c in ("status", "target", "GPU", "scheduler", "required checks failed")])), h("tbody", {}, rows)))


def _perf(checks: list[dict[str, Any]]) -> list[Markup]:
    """A bar per measured device of every perf check, its length the fraction of the peak."""
    out = []
    bars = 0
    sources: list[str] = []  # the peaks' sources, each said once below the bars
    for c in checks:
        if not str(c.get("name", "")).startswith("perf."):
            continue
        devices = (c.get("data") or {}).get("devices") or []
        measured = [d for d in devices if d.get("measured") is not None]
        if not measured:
            out.append(h("p", {"class": "bar"}, h("code", {}, c.get("name")), " ", badge(c.get("status")), " ",
                         c.get("details")))
        for d in measured:
            out.append(_bar(c.get("name"), d))
            bars += 1
            if d.get("peak") and d.get("peak_source") and d["peak_source"] not in sources:
                sources.append(d["peak_source"])
    if sources:
        out.append(h("p", {"class": "source"}, "Peaks from matrices/gpu_peak.yaml: ", "; ".join(sources)))
    if not out:
        out.append(h("p", {"class": "meta"}, "No performance checks in this report (--no-perf, or the static probe)."))
    elif bars:
        out.append(h("p", {"class": "meta"}, f"The dashed line is {PERF_WARN_FRACTION:.0%} of the peak: below it "
                                              "the check warns (throttled or shared GPU, low clocks, a slow code path). "
                                              "Tensor-core peaks are dense (without sparsity)."))
    return out


def _bar(name: str, d: dict[str, Any]) -> Markup:
    value, peak, unit = float(d["measured"]), d.get("peak"), d.get("unit") or ""
    head = [h("code", {}, name), " ", badge(d.get("status")), " device ", d.get("device"), " ", d.get("gpu"), ": ",
            h("strong", {}, f"{value:,.1f} {unit}")]
    if not peak:
        return h("div", {"class": "bar"}, h("div", {"class": "label"}, head, " (no published peak for this GPU)"))
    fraction = value / float(peak)
    head += [f" of {float(peak):,.1f} {unit} peak = ", h("strong", {}, f"{fraction:.0%}")]
    width = max(0.0, min(fraction, 1.0)) * 100
    status = {"pass": "s-ok", "warn": "s-warning"}.get(d.get("status") or "", "s-skipped")
    svg = h("svg", {"viewBox": "0 0 100 10", "preserveAspectRatio": "none", "role": "img",
                    "aria-label": f"{value:.1f} of {float(peak):.1f} {unit} ({fraction:.0%} of the peak)"},
            h("rect", {"class": "bar-track", "x": "0", "y": "0", "width": "100", "height": "10",
                       "vector-effect": "non-scaling-stroke"}),
            h("rect", {"class": f"bar-fill {status}", "x": "0", "y": "0", "width": f"{width:.2f}", "height": "10"}),
            h("line", {"class": "bar-half", "x1": f"{PERF_WARN_FRACTION * 100:g}", "x2": f"{PERF_WARN_FRACTION * 100:g}",
                       "y1": "0", "y2": "10", "vector-effect": "non-scaling-stroke"}))
    return h("div", {"class": "bar"}, h("div", {"class": "label"}, head), svg)


def _checks(checks: list[dict[str, Any]]) -> Markup:
    rows = []
    for c in checks:
        more = [h("div", {}, h("strong", {}, "cause: "), c["cause"]) if c.get("cause") else None,
                h("div", {}, h("strong", {}, "fix: "), c["fix"]) if c.get("fix") else None]
        rows.append(h("tr", {}, h("td", {"class": "lead-cell"}, badge(c.get("status"))),
                      h("td", {"class": "lead-cell"}, h("code", {}, c.get("name")),
                        h("span", {"class": "meta"}, " (optional)") if c.get("required") is False else None),
                      h("td", {"data-label": "signature"}, h("code", {}, c["signature"])) if c.get("signature")
                      else h("td", {}, ""),
                      h("td", {}, c.get("details"), more)))
    return h("div", {"class": "scroll"}, h("table", {"class": "rows"}, h("thead", {}, h("tr", {}, [
        h("th", {}, x) for x in ("status", "check", "signature", "details")])), h("tbody", {}, rows)))
