"""`envbuild resolve --html FILE`: the verdict, the stack chosen, each conflict with its
facts and fixes, the check per link; with `--fleet`, a target x link grid coloured by
verdict. Rendered from `resolve --json`'s object (schema/resolve.schema.json)."""
from __future__ import annotations

from typing import Any

from envbuild.html.markup import Markup, h, join
from envbuild.html.page import (STATUSES, badge, document, kv, legend, problem_card, section, status_of)

GRID_STATUSES = ("ok", "unchecked", "warning", "conflict", "skipped")


def render(data: dict[str, Any], *, source: str) -> str:
    """One spec's resolution. `source`: the spec's path (or "command line")."""
    body = [_heading("Resolve", source, data), _problems(data, "conflicts", "unchecked")]
    if data.get("resolved"):
        body.append(section("Stack", _stack(data["resolved"]), id="stack"))
    body.append(section("Checks", _checks_table(data.get("checks") or []),
                        legend(("ok", "unchecked", "conflict", "skipped")), id="checks"))
    body.append(_problems(data, "warnings"))
    return document(f"envbuild resolve: {source}", body, made_from="envbuild resolve --json",
                    matrix_version=data.get("matrix_version"))


def render_fleet(data: dict[str, Any], *, source: str, fleet: str) -> str:
    """A spec resolved against every target of a fleet (`resolve --fleet --json`)."""
    targets = data.get("targets") or []
    counts = {}
    for t in targets:
        counts[t.get("verdict")] = counts.get(t.get("verdict"), 0) + 1
    tally = ", ".join(f"{n} {word}" for word, n in counts.items())
    body = [_heading("Fleet resolve", f"{source} on {fleet}", data,
                     h("p", {"class": "lead"}, f"{len(targets)} target{'s' * (len(targets) != 1)}: {tally or 'none'}"))]
    body.append(section("Stack for all targets", _joint(data), id="stack"))
    body.append(section("Targets \u00d7 links", _grid(targets), legend(GRID_STATUSES, {
        "ok": "ok: the link holds", "warning": "warnings (count)", "skipped": "skipped: nothing to check it against",
    }), h("p", {"class": "meta"}, "Blank: the link does not apply to this spec. A target's name leads to its "
                                  "conflicts, unchecked links and warnings."), id="grid"))
    details = [_target_details(i, t) for i, t in enumerate(targets) if _has_details(t)]
    if details:
        body.append(section("Conflicts, unchecked links and warnings by target", details, id="targets"))
    return document(f"envbuild resolve --fleet: {source} on {fleet}", body, made_from="envbuild resolve --fleet --json",
                    matrix_version=data.get("matrix_version"))


# --- parts ---------------------------------------------------------------------------------------
def _heading(what: str, subject: str, data: dict[str, Any], *more: Any) -> Markup:
    facts = [("verdict", badge(data.get("verdict"))), ("judged for", data.get("judged_for")),
             ("spec hash", h("code", {}, str(data.get("spec_hash") or "")[:16]) if data.get("spec_hash") else None),
             ("matrices", h("code", {}, data.get("matrix_version")) if data.get("matrix_version") else None)]
    return h("header", {}, h("h1", {}, f"{what}: ", h("span", {"class": "mono"}, subject)),
             h("div", {"class": "verdict"}, kv(facts)), more)


_PROBLEMS = {"conflicts": ("Conflicts", "conflict"), "unchecked": ("Not checked: a fact is unknown", "unchecked"),
             "warnings": ("Warnings", "warning")}


def _problems(data: dict[str, Any], *keys: str) -> list[Markup]:
    """A section of cards per kind of problem the resolution has."""
    out = []
    for key in keys:
        title, word = _PROBLEMS[key]
        if data.get(key):
            out.append(section(title, [problem_card(item, word) for item in data[key]], id=key))
    return out


def _stack(stack: dict[str, Any]) -> list[Markup]:
    gpus = "; ".join(f"{g.get('name')} (compute capability {g.get('compute_capability') or 'unknown'})"
                     for g in stack.get("gpus") or [])
    driver = stack.get("driver")
    if driver and stack.get("max_driver_cuda"):
        driver = f"{driver} (runs CUDA \u2264 {stack['max_driver_cuda']})"
    base = stack.get("base_image") or {}
    rows = [("CUDA", stack.get("cuda") or "-"), ("cuDNN", stack.get("cudnn")), ("Python", stack.get("python")),
            ("driver", driver), ("GPUs", gpus or None), ("platform", stack.get("platform")),
            ("installer", stack.get("installer")),
            ("channels", ", ".join(stack["channels"]) if stack.get("channels") else None),
            ("base image", h("span", {}, h("code", {}, base.get("ref")), h("div", {"class": "meta"}, base.get("why")))
             if base else None)]
    frameworks = stack.get("frameworks") or []
    table = h("div", {"class": "scroll"}, h("table", {"class": "rows"},
        h("thead", {}, h("tr", {}, [h("th", {}, c) for c in ("framework", "version", "installer", "CUDA", "installs", "kernels")])),
        h("tbody", {}, [h("tr", {},
            h("td", {"data-label": "framework"}, h("strong", {}, f.get("name"))),
            h("td", {"data-label": "version"}, f.get("version")),
            h("td", {"data-label": "installer"}, f.get("installer")),
            h("td", {"data-label": "CUDA"}, f.get("cuda") or "-"),
            h("td", {"data-label": "installs"}, _installs(f)),
            h("td", {"data-label": "kernels"}, " ".join(f.get("archs") or []) or "not read"))
            for f in frameworks])))
    return [table if frameworks else None, kv(rows)]


def _installs(f: dict[str, Any]) -> list[Any]:
    lines = [h("code", {}, p) for p in (f.get("pip_requirements") or f.get("conda_specs") or [])]
    out: list[Any] = []
    for i, line in enumerate(lines):
        out += [" " if i else None, line]
    if f.get("pip_index_url"):
        out.append(h("div", {"class": "meta"}, "from ", f["pip_index_url"]))
    return out


def _checks_table(checks: list[dict[str, Any]]) -> Markup:
    return h("div", {"class": "scroll"}, h("table", {"class": "rows"},
        h("thead", {}, h("tr", {}, h("th", {}, "status"), h("th", {}, "link"), h("th", {}, "what was checked"))),
        h("tbody", {}, [h("tr", {}, h("td", {"class": "lead-cell"}, badge(c.get("status"))),
                             h("td", {"class": "lead-cell"}, h("strong", {}, c.get("label"))),
                             h("td", {}, c.get("detail"))) for c in checks])))


def _joint(data: dict[str, Any]) -> list[Any]:
    joint = data.get("joint") or []
    conflicts = [c for j in joint for c in j.get("conflicts") or []]
    if data.get("resolved") and not conflicts:
        return [h("p", {}, "One stack runs on every selected target:"), _stack(data["resolved"])]
    alone = [(t.get("name"), t.get("alone_choice")) for t in data.get("targets") or [] if t.get("alone_choice")]
    out: list[Any] = [h("p", {}, badge("conflict"), " No single stack works on all selected targets:")]
    out += [problem_card(c, "conflict") for c in conflicts]
    if alone:
        out.append(h("p", {}, "What targets would get alone:"))
        out.append(h("ul", {}, [h("li", {}, h("strong", {}, name), ": ", choice) for name, choice in alone]))
    return out


def _grid(targets: list[dict[str, Any]]) -> Markup:
    # every target's links, in the order they come: a link one target lacks (cuDNN where no
    # stack was chosen) goes right after the link before it in the target that has it
    order: list[str] = []
    labels: dict[str, str] = {}
    for t in targets:
        before = -1
        for c in t.get("checks") or []:
            link = c.get("link")
            if link not in labels:
                labels[link] = c.get("label")
                order.insert(before + 1, link)
            before = order.index(link)
    links = {link: labels[link] for link in order}
    head = h("tr", {}, h("th", {"class": "row"}, "target"),
             [h("th", {"class": "turn", "scope": "col"}, h("span", {}, label)) for label in ("verdict", *links.values())],
             h("th", {"class": "turn", "scope": "col"}, h("span", {}, "warnings")))
    rows = []
    for i, t in enumerate(targets):
        by_link = {c.get("link"): c for c in t.get("checks") or []}
        name = t.get("name")
        gpu = (t.get("gpu") or "no GPU") + (f" {t['mig']}" if t.get("mig") else "")
        where = h("div", {"class": "gpu-note"}, gpu, f" \u00b7 {t['driver']}" if t.get("driver") else None)
        label = h("a", {"href": f"#target-{i}"}, name) if _has_details(t) else name
        verdict = t.get("verdict")
        cls, glyph, _meaning = STATUSES[status_of(verdict)]
        cells = [h("td", {"class": f"cell {cls}", "title": f"verdict: {verdict}"}, glyph)]
        cells += [_cell(by_link.get(link), label_) for link, label_ in links.items()]
        n_warn = len(t.get("warnings") or [])
        cells.append(h("td", {"class": f"cell {STATUSES['warning'][0]}", "title": f"{n_warn} warning(s)"},
                       f"! {n_warn}") if n_warn else h("td", {"class": "cell empty"}, ""))
        rows.append(h("tr", {}, h("th", {"class": "row", "scope": "row"}, label, where), cells))
    return h("div", {"class": "scroll"}, h("table", {"class": "grid"}, h("thead", {}, head), h("tbody", {}, rows)))


def _cell(check: dict[str, Any] | None, label: str) -> Markup:
    if check is None:
        return h("td", {"class": "cell empty", "title": f"{label}: does not apply"}, "")
    cls, glyph, _meaning = STATUSES[status_of(check.get("status"))]
    return h("td", {"class": f"cell {cls}", "title": f"{label}: {check.get('status')}: {check.get('detail')}"}, glyph)


def _has_details(t: dict[str, Any]) -> bool:
    return bool(t.get("conflicts") or t.get("unchecked") or t.get("warnings") or t.get("alone_choice"))


def _target_details(i: int, t: dict[str, Any]) -> Markup:
    where = [("GPU", t.get("gpu")), ("MIG", t.get("mig")), ("driver", t.get("driver")),
             ("GPU memory", f"{t['gpu_memory_gib']:g} GiB" if t.get("gpu_memory_gib") else None),
             ("scheduler", t.get("scheduler")), ("platform", t.get("platform"))]
    line = join([h("span", {"class": "fact"}, key, " ", h("strong", {}, value)) for key, value in where if value],
                " \u00b7 ")
    cards = ([problem_card(c, "conflict") for c in t.get("conflicts") or []]
             + [problem_card(u, "unchecked") for u in t.get("unchecked") or []]
             + [problem_card(w, "warning") for w in t.get("warnings") or []])
    alone = h("p", {}, "Alone it would get: ", h("strong", {}, t["alone_choice"])) if t.get("alone_choice") else None
    return h("div", {"class": "target", "id": f"target-{i}"},
             h("h3", {}, t.get("name"), " ", badge(t.get("verdict"))), h("p", {"class": "meta"}, line), alone, cards)
