"""`envbuild matrix grid FRAMEWORK --html FILE`: the framework's builds x GPU
architectures, with the GPUs of a fleet or this host highlighted. Rendered from the grid's
JSON object (`matrix grid --json`, schema/matrix.schema.json)."""
from __future__ import annotations

from typing import Any

from envbuild.html.markup import Markup, h, join
from envbuild.html.page import STATUSES, document, section, swatches
from envbuild.resolver.arch_grid import CARRIES, builds_label, your_gpus

# what a cell shows -> its status colour: carried code, and how a highlighted GPU runs a build
_CARRY_STATUS = {"sass": "ok", "sass+ptx": "ok", "ptx": "warning"}
_RUN_STATUS = {"sass": "ok", "ptx": "warning", "cannot": "conflict", "unlisted": "unchecked"}
_RUN_TEXT = {"sass": "(S)", "ptx": "(P)", "cannot": "\u2717", "unlisted": "?"}
_RUN_WORDS = {"sass": "runs a binary", "ptx": "JIT-compiles PTX", "cannot": "cannot run it",
              "unlisted": "not read: the matrices lack the architectures"}


def render(data: dict[str, Any]) -> str:
    framework = data.get("framework")
    columns = data.get("archs") or []
    rows = data.get("rows") or []
    sources: list[str] = []
    for row in rows:
        sources += [s for s in row.get("sources") or [] if s not in sources]
    filters = data.get("filters") or {}
    asked = ", ".join(f"{k} {v}" for k, v in filters.items() if v)
    body = [h("header", {}, h("h1", {}, f"{framework}: builds \u00d7 GPU architectures"),
              h("p", {"class": "lead"}, f"{len(rows)} row{'s' * (len(rows) != 1)}", f" ({asked})" if asked else None,
                ": which builds carry SASS (a binary) or PTX (JIT-compiled by the driver) for which sm_."))]
    if data.get("gpus"):
        body.append(section("Your GPUs", _gpus(data["gpus"]), id="gpus"))
    carried = swatches([("ok", "S", "SASS: a binary for that architecture"), ("ok", "SP", "SASS and PTX"),
                        ("warning", "P", "PTX only: JIT-compiled by the driver at first start")])
    body.append(section("Grid", carried, _run_legend(columns), _grid(data, columns, rows, sources), id="grid"))
    body.append(section("Sources", h("ol", {"class": "sources"},
                                     [h("li", {"id": f"src-{i}", "class": "source"}, s) for i, s in enumerate(sources, 1)]),
                        id="sources"))
    return document(f"envbuild matrix grid {framework}", body, made_from=f"envbuild matrix grid {framework} --json",
                    matrix_version=data.get("matrix_version"))


def _gpus(gpus: list[dict[str, Any]]) -> Markup:
    items = []
    for g in gpus:
        cc = g.get("compute_capability")
        what = f"compute capability {cc}" if cc else "not in the GPU table: no column"
        items.append(h("li", {}, h("strong", {}, g.get("name")), f" ({what})",
                       h("span", {"class": "meta"}, " on ", ", ".join(map(str, g.get("on") or []))) if g.get("on") else None))
    return h("ul", {}, items)


def _run_legend(columns: list[dict[str, Any]]) -> Markup | None:
    if not any(c.get("gpus") for c in columns):
        return None
    return h("div", {}, h("p", {"class": "meta"}, "Highlighted columns are your GPUs' architectures; "
                                                "their colour says how the GPU runs each build:"),
             swatches([(_RUN_STATUS[v], _RUN_TEXT[v], word) for v, word in _RUN_WORDS.items()]))


def _grid(data: dict[str, Any], columns: list[dict[str, Any]], rows: list[dict[str, Any]], sources: list[str]) -> Markup:
    highlighted = any(c.get("gpus") for c in columns)
    heads = []
    for c in columns:
        gpus = ", ".join(c.get("gpus") or [])
        note = h("span", {"class": "gpu-note"}, " \u00b7 ", gpus) if gpus else None
        heads.append(h("th", {"class": "turn mine" if gpus else "turn", "scope": "col", "title": gpus or None},
                       h("span", {}, c.get("sm"), note)))
    head = h("tr", {}, h("th", {"class": "row"}, "release \u00b7 CUDA"), heads,
             h("th", {"class": "row"}, "your GPUs") if highlighted else None)
    body = []
    for row in rows:
        refs = join([h("a", {"href": f"#src-{sources.index(s) + 1}"}, f"[{sources.index(s) + 1}]")
                     for s in row.get("sources") or []], " ")
        marks = [m for m in ("inferred", "secondary") if row.get(m)]
        label = h("th", {"class": "row", "scope": "row"}, f"{row.get('version')} \u00b7 CUDA {row.get('cuda')}",
                  h("div", {"class": "gpu-note"}, builds_label(row), f" ({', '.join(marks)})" if marks else None, " ", refs))
        if row.get("archs") is None:
            cells = [_cell(row, c) if c.get("gpus") else h("td", {"class": "cell empty"}, "") for c in columns]
            if not highlighted:
                cells = [h("td", {"class": f"cell {STATUSES['unchecked'][0]}", "colspan": str(len(columns))},
                           "compiled architectures not read")]
        else:
            cells = [_cell(row, c) for c in columns]
        summary = h("td", {"class": f"summary {_summary_status(row)}"}, your_gpus(row, data)) if highlighted else None
        body.append(h("tr", {}, label, cells, summary))
    return h("div", {"class": "scroll"}, h("table", {"class": "grid"}, h("thead", {}, head), h("tbody", {}, body)))


def _summary_status(row: dict[str, Any]) -> str:
    """The colour of the "your GPUs" cell: the worst of how its GPUs run the row."""
    verdicts = {run.get("verdict") for run in (row.get("runs") or {}).values()}
    worst = next((v for v in ("cannot", "unlisted", "ptx") if v in verdicts), "sass")
    return STATUSES[_RUN_STATUS[worst]][0]


def _cell(row: dict[str, Any], column: dict[str, Any]) -> Markup:
    sm = column.get("sm")
    carried = (row.get("cells") or {}).get(sm)
    mine = " mine" if column.get("gpus") else ""
    if column.get("gpus"):
        run = (row.get("runs") or {}).get(column.get("compute_capability")) or {}
        verdict = run.get("verdict", "unlisted")
        text = CARRIES[carried] if carried else _RUN_TEXT[verdict]
        how = f" via {run['via']}" if run.get("via") and not carried else f": {run['why']}" if run.get("why") else ""
        title = f"{sm}: {', '.join(column['gpus'])} {_RUN_WORDS[verdict]}{how}"
        return h("td", {"class": f"cell {STATUSES[_RUN_STATUS[verdict]][0]}{mine}", "title": title}, text)
    if not carried:
        return h("td", {"class": "cell empty"}, "")
    return h("td", {"class": f"cell {STATUSES[_CARRY_STATUS[carried]][0]}", "title": f"{sm}: {carried}"}, CARRIES[carried])
