"""`envbuild matrix grid FRAMEWORK`: which builds carry SASS or PTX for which GPU
architecture, and how the GPUs of a fleet or this host run each build.

`grid()` answers with the JSON object (`matrix --json`, schema/matrix.schema.json);
`text()` and `markdown()` render that object for a terminal and for a README or a pull
request comment (`envbuild.html.grid_page` renders it as a page). How a GPU runs a build
is the resolver's own judgement of its GPU -> kernels link (`envbuild.resolver.checks.gpu_runs_build`):
whether the build's CUDA toolkit can generate code for the GPU, then what the build carries.

One row per release and CUDA variant whose builds carry the same architectures (pip and
conda builds of a release that differ get a row each).
"""
from __future__ import annotations

from typing import Any

from envbuild import frameworks
from envbuild.core.values import ComputeCapability, CudaVersion
from envbuild.resolver.checks import gpu_runs_build
from envbuild.resolver.context import index

# what a build carries for one architecture, as the grid's cells say it
CARRIES = {"sass": "S", "ptx": "P", "sass+ptx": "SP"}


def grid(m: Any, framework: str, rows: list, gpus: list[dict[str, Any]],
         filters: dict[str, str | None] | None = None) -> dict[str, Any]:
    """The grid of `rows` (the framework's matrix rows, selected by `filters`) with `gpus`
    highlighted: [{"name", "compute_capability" (None: not in the GPU table), "on": [...]}]."""
    plugin = frameworks.get(framework)
    grouped: dict[tuple, dict[str, Any]] = {}
    for r in rows:
        archs = tuple(plugin.spelled_out_archs(r.archs)) if r.archs is not None else None
        key = (r.version, r.cuda, archs)
        row = grouped.get(key)
        if row is None:
            row = grouped[key] = {"version": r.version, "cuda": r.cuda, "builds": [],
                                  "archs": list(archs) if archs is not None else None,
                                  "sources": [], "inferred": False, "secondary": False}
        row["builds"].append({"installer": getattr(r, "installer", "pip"), "package": getattr(r, "package", "") or None,
                              "platforms": list(getattr(r, "platforms", ()) or ())})
        if r.source not in row["sources"]:
            row["sources"].append(r.source)
        row["inferred"] = row["inferred"] or bool(r.inferred)
        row["secondary"] = row["secondary"] or bool(r.secondary)
    ccs = sorted({ComputeCapability.parse(g["compute_capability"]) for g in gpus if g.get("compute_capability")})
    columns: set[ComputeCapability] = set(ccs)
    ix = index(m)
    for row in grouped.values():
        row["cells"] = _cells(row["archs"])
        columns |= {ComputeCapability.parse(sm) for sm in row["cells"]}
        cuda = CudaVersion.parse(row["cuda"])
        row["runs"] = {str(cc): _runs(row["archs"], cuda, cc, ix) for cc in ccs}
    archs = [{"sm": f"sm_{cc.sm}", "compute_capability": str(cc),
              "gpus": [g["name"] for g in gpus if g.get("compute_capability") == str(cc)]} for cc in sorted(columns)]
    return {"verdict": "ok", "query": "grid", "matrix_version": m.version, "framework": framework, "filters": dict(filters or {}),
            "archs": archs, "gpus": gpus, "rows": list(grouped.values())}


def _cells(archs: list[str] | None) -> dict[str, str]:
    """sm_XY -> sass, ptx or sass+ptx, for each architecture the list carries."""
    cells: dict[str, str] = {}
    for a in archs or ():
        kind, _, num = a.partition("_")
        sm = f"sm_{num}"
        have = cells.get(sm)
        this = "sass" if kind == "sm" else "ptx"
        cells[sm] = this if have in (None, this) else "sass+ptx"
    return dict(sorted(cells.items(), key=lambda item: ComputeCapability.parse(item[0])))


def _runs(archs: list[str] | None, cuda: CudaVersion, cc: ComputeCapability, ix: Any) -> dict[str, Any]:
    """How a GPU of `cc` runs the row, as resolve judges it (`verdict`: sass, ptx, cannot or
    unlisted), the code it runs (`via`: the sm_ binary or compute_ PTX) and why not."""
    verdict = gpu_runs_build(archs, cuda, cc, ix)
    via = why = None
    if verdict == "sass":
        binaries = [ComputeCapability.parse(a) for a in archs or () if a.startswith("sm_")]
        best = max((b for b in binaries if b.major == cc.major and b.minor <= cc.minor), default=None)
        via = f"sm_{best.sm}" if best is not None else None
    elif verdict == "ptx":
        ptx = [ComputeCapability.parse(a) for a in archs or () if a.startswith("compute_")]
        best = max((p for p in ptx if p <= cc), default=None)
        via = f"compute_{best.sm}" if best is not None else None
    elif verdict == "cannot":
        toolkit = ix.toolkit_runs_on(cuda, cc)
        why = (f"no sm_{cc.major}x binary up to sm_{cc.sm} and no PTX up to compute_{cc.sm} in the build" if toolkit
               else f"CUDA {cuda} cannot generate code for sm_{cc.sm}")
    else:
        why = (f"the matrices do not list what CUDA {cuda} compiles for" if ix.toolkit_sms(cuda) is None
               else "the build's compiled architectures were not read")
    return {"verdict": verdict, "via": via, "why": why}


# --- text and Markdown ---------------------------------------------------------------------------
def builds_label(row: dict[str, Any]) -> str:
    """`pip +cu128, conda` or `pip (win-64)`: the builds a row stands for."""
    parts = []
    for b in row["builds"]:
        text = b["installer"] + (f" {b['package']}" if b.get("package") else "")
        if b.get("platforms") and b["platforms"] != ["linux-64"]:
            text += f" ({', '.join(b['platforms'])})"
        if text not in parts:
            parts.append(text)
    return ", ".join(parts)


def cell_text(row: dict[str, Any], column: dict[str, Any]) -> str:
    """What a row carries for a column, and in a highlighted column how its GPUs run it
    where the column's own architecture is not carried (`(S)`: an older binary of its
    major, `(P)`: JIT from older PTX, `x`: cannot, `?`: not read)."""
    carried = CARRIES.get(row["cells"].get(column["sm"], ""), "")
    if carried or not column["gpus"]:
        return carried
    runs = row["runs"].get(column["compute_capability"], {}).get("verdict")
    return {"sass": "(S)", "ptx": "(P)", "cannot": "x", "unlisted": "?"}.get(runs, "")


def your_gpus(row: dict[str, Any], data: dict[str, Any]) -> str:
    """One cell: `all` when every highlighted GPU runs the row from a binary, else the
    GPUs that cannot run it, JIT-compile it, or whose answer is not known."""
    verdicts: dict[str, list[str]] = {}
    for g in data["gpus"]:
        if g.get("compute_capability"):
            verdict = row["runs"].get(g["compute_capability"], {}).get("verdict", "unlisted")
            verdicts.setdefault(verdict, []).append(g["name"])
    if not verdicts:
        return ""
    if set(verdicts) == {"sass"}:
        return "all"
    words = {"cannot": "cannot", "ptx": "JIT", "unlisted": "not read"}
    return "; ".join(f"{words[v]}: {', '.join(verdicts[v])}" for v in words if v in verdicts)


def _table(data: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    columns = data["archs"]
    headers = ["release", "CUDA", "builds"] + [c["sm"] + ("*" if c["gpus"] else "") for c in columns]
    highlighted = any(c["gpus"] for c in columns)
    if highlighted:
        headers.append("your GPUs")
    body = []
    for row in data["rows"]:
        builds = builds_label(row) + ("" if row["archs"] is not None else " (archs not read)")
        line = [row["version"], row["cuda"], builds] + [cell_text(row, c) for c in columns]
        if highlighted:
            line.append(your_gpus(row, data))
        body.append(line)
    return headers, body


def legend_lines(data: dict[str, Any]) -> list[str]:
    lines = ["S = SASS (a binary for that architecture), P = PTX (JIT-compiled by the driver), SP = both."]
    marked = [c for c in data["archs"] if c["gpus"]]
    if marked:
        lines.append("* your GPUs: " + "; ".join(f"{c['sm']} {', '.join(c['gpus'])}" for c in marked)
                     + ". In their columns (S) = runs an older binary of its major, (P) = JIT from older PTX, "
                       "x = cannot run it (no code for it, or its CUDA cannot generate any), ? = not read.")
    unknown = [g["name"] for g in data["gpus"] if not g.get("compute_capability")]
    if unknown:
        lines.append(f"not in the GPU table (no column): {', '.join(unknown)}")
    return lines


def text(data: dict[str, Any]) -> str:
    headers, body = _table(data)
    widths = [max(len(str(x)) for x in col) for col in zip(headers, *body)]
    lines = ["  ".join(str(cell).ljust(w) for cell, w in zip(line, widths)).rstrip() for line in [headers, *body]]
    return "\n".join([f"{data['framework']}: builds x GPU architectures", *lines, "", *legend_lines(data)])


def markdown(data: dict[str, Any]) -> str:
    """A GitHub-flavoured Markdown table that fits a README or a pull request comment."""
    headers, body = _table(data)

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(_md(c) for c in cells) + " |"

    out = [f"**{_md(data['framework'])}: builds x GPU architectures** (matrices {_md(data['matrix_version'])})", "",
           line(headers), "|" + "|".join(":-:" if h.startswith("sm_") else "---" for h in headers) + "|"]
    out += [line(row) for row in body]
    out += [""] + [_md(x) for x in legend_lines(data)]
    return "\n".join(out) + "\n"


def _md(value: Any) -> str:
    """A value as Markdown table text: pipes, markup and line breaks cannot end the cell
    or become links, emphasis, code or HTML."""
    out = []
    for ch in str(value):
        if ch in "\\`*_[]<>|~&":
            out.append("\\" + ch)
        elif ch in "\r\n":
            out.append(" ")
        else:
            out.append(ch)
    return "".join(out)
