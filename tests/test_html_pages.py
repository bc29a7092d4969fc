"""The HTML pages (`resolve --html`, `matrix grid --html`, `verify --html`) in a real
browser: Debian's headless chromium, driven over the DevTools protocol (tests/browser.py).

Each page is made by the real command, then read from outside: its DOM against the JSON
the same command prints (the page is rendered from it, so they must agree), its layout at
a phone's width (390 px), a desktop's (1200 px) and on paper (print media at an A4
page's printable width), the requests it makes (only its own file), and hostile values,
which must show as text.
"""
from __future__ import annotations

import copy
import json
import os
import stat
import subprocess
from pathlib import Path

import pytest

from browser import look_at
from cli_support import in_process

ROOT = Path(__file__).resolve().parent.parent
RECIPES = ROOT / "recipes"
FLEET = ROOT / "tests" / "data" / "fleets" / "fleet.yaml"
H100_REPORT = ROOT / "tests" / "data" / "verify" / "h100_report.json"
SMI = ROOT / "tests" / "data" / "nvidia_smi"
HOSTILE = "<script>alert(1)</script>"
HOSTILE_NAME = "<img src=x onerror=alert(1)>"  # a file name cannot hold the / of </script>


def envbuild(*args, env=None, cwd=None) -> subprocess.CompletedProcess:
    return in_process(*args, cwd=cwd or ROOT, env=env)


# --- resolve ------------------------------------------------------------------------------------
@pytest.mark.parametrize("recipe", ["pytorch-official.yaml", "pytorch-1.6-cudatoolkit-11.0.yaml"])
def test_resolve_page_shows_what_the_json_says(browser, tmp_path, recipe):
    page = tmp_path / "resolve.html"
    plain = envbuild("resolve", RECIPES / recipe)
    proc = envbuild("resolve", RECIPES / recipe, "--html", page)
    assert proc.returncode == plain.returncode and proc.stdout == plain.stdout  # the page is written besides
    data = json.loads(envbuild("resolve", RECIPES / recipe, "--json").stdout)
    view = look_at(browser, page, tmp_path)
    statuses = view.evaluate("[...document.querySelectorAll('#checks tbody tr')].map(r => "
                             "[r.cells[0].innerText.trim(), r.cells[1].innerText.trim(), r.cells[2].innerText.trim()])")
    assert statuses == [[f"{_glyph(c['status'])} {c['status']}", c["label"], c["detail"]] for c in data["checks"]]
    assert view.evaluate("document.querySelectorAll('#conflicts .card').length") == len(data["conflicts"])
    assert view.evaluate("document.querySelectorAll('#conflicts ol.fixes li').length") == sum(
        len(c["fixes"]) for c in data["conflicts"])
    assert view.evaluate("document.querySelectorAll('#conflicts ul.facts li').length") == sum(
        len(c["facts"]) for c in data["conflicts"])
    verdict = view.evaluate("document.querySelector('header .verdict .badge').innerText.trim()")
    assert verdict == f"{_glyph(data['verdict'])} {data['verdict']}"
    if data["resolved"]:
        assert view.evaluate("document.querySelector('#stack').innerText").count(data["resolved"]["base_image"]["ref"]) == 1


def test_fleet_page_grid_is_the_json_of_each_target(browser, tmp_path):
    page = tmp_path / "fleet.html"
    proc = envbuild("resolve", RECIPES / "pytorch-official.yaml", "--fleet", FLEET, "--html", page)
    assert proc.returncode == 1, proc.stderr  # the fleet has conflicts: the exit code is the command's
    data = json.loads(envbuild("resolve", RECIPES / "pytorch-official.yaml", "--fleet", FLEET, "--json").stdout)
    view = look_at(browser, page, tmp_path)
    grid = view.evaluate("""(() => {
        const table = document.querySelector('#grid table');
        const heads = [...table.tHead.rows[0].cells].map(c => c.innerText.trim());
        return {heads, rows: [...table.tBodies[0].rows].map(r => [...r.cells].map(c => [c.innerText.trim(), c.className]))};
    })()""")
    assert len(grid["rows"]) == len(data["targets"])
    for target, row in zip(data["targets"], grid["rows"]):
        assert row[0][0].splitlines()[0] == target["name"]
        assert _status_class(target["verdict"]) in row[1][1]
        shown = {grid["heads"][i]: cell for i, cell in enumerate(row) if i >= 2}
        for check in target["checks"]:
            assert _status_class(check["status"]) in shown[check["label"]][1], (target["name"], check)
        labels = {c["label"] for c in target["checks"]}
        for label, (text, cls) in shown.items():  # a link the target does not check stays blank
            if label not in labels and label != "warnings":
                assert text == "" and "empty" in cls
        assert shown["warnings"][0] == (f"! {len(target['warnings'])}" if target["warnings"] else "")
    # every target with a conflict has its cards, each fix listed
    for i, target in enumerate(data["targets"]):
        if target["conflicts"]:
            fixes = view.evaluate(f"document.querySelectorAll('#target-{i} .s-conflict ol.fixes li').length")
            assert fixes == sum(len(c["fixes"]) for c in target["conflicts"])
    joint = [c for j in data["joint"] for c in j["conflicts"]]
    assert view.evaluate("document.querySelectorAll('#stack .card').length") == len(joint)


def test_page_file_guards(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text((RECIPES / "pytorch-official.yaml").read_text())
    before = spec.read_bytes()
    for target, words in ((spec, "is an input of this command"), (tmp_path, "is a folder"),
                          (tmp_path / "missing" / "p.html", "its folder does not exist"),
                          ("/dev/null", "is not a regular file")):
        proc = envbuild("resolve", spec, "--html", target)
        assert proc.returncode == 2 and words in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert spec.read_bytes() == before
    proc = envbuild("resolve", spec, "--fleet", FLEET, "--html", FLEET)
    assert proc.returncode == 2 and "is an input of this command" in proc.stderr
    # written whole, in place of an older page, and nothing else left in the folder
    page = tmp_path / "page.html"
    page.write_text("old")
    assert envbuild("resolve", spec, "--html", page).returncode == 0
    assert page.read_text().startswith("<!DOCTYPE html>") and page.read_text().rstrip().endswith("</html>")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["page.html", "spec.yaml"]
    # a link to the page stays a link; the file it leads to gets the page
    (tmp_path / "latest.html").symlink_to(page)
    page.write_text("old")
    assert envbuild("resolve", spec, "--html", tmp_path / "latest.html").returncode == 0
    assert (tmp_path / "latest.html").is_symlink() and page.read_text().startswith("<!DOCTYPE html>")


def test_hostile_spec_name_and_credentials_show_as_text(browser, tmp_path):
    spec = tmp_path / f"{HOSTILE_NAME}.yaml"
    spec.write_text("frameworks: {pytorch: '2.1.2'}\ninstaller: conda\n"
                    "channels: ['https://alice:s3cret@conda.example.com/main', pytorch, nvidia]\n"
                    "target: {driver: 550.54.15, gpus: [A100]}\n")
    page = tmp_path / "page.html"
    assert envbuild("resolve", spec.name, "--html", page, cwd=tmp_path).returncode == 0
    view = look_at(browser, page)
    assert HOSTILE_NAME in view.evaluate("document.querySelector('h1').innerText")
    assert HOSTILE_NAME not in page.read_text()  # escaped in the file: &lt;img ...&gt;
    # the channel's password is masked, as in every output
    assert "https://alice:***@conda.example.com/main" in view.evaluate("document.querySelector('#stack').innerText")
    assert "s3cret" not in page.read_text()


# --- matrix grid -------------------------------------------------------------------------------------
def test_grid_page_and_markdown_show_the_json(browser, tmp_path):
    page = tmp_path / "grid.html"
    args = ("matrix", "grid", "pytorch", ">=2.6", "--fleet", FLEET)
    proc = envbuild(*args, "--html", page)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(envbuild(*args, "--json").stdout)
    view = look_at(browser, page, tmp_path)
    table = view.evaluate("""(() => {
        const table = document.querySelector('#grid table');
        return {heads: [...table.tHead.rows[0].cells].map(c => [c.innerText.replace(/\\s+/g, ' ').trim(), c.className]),
                rows: [...table.tBodies[0].rows].map(r => [...r.cells].map(c => [c.innerText.trim(), c.className]))};
    })()""")
    archs = data["archs"]
    assert [h[0].split("\u00b7")[0].strip() for h in table["heads"][1:-1]] == [a["sm"] for a in archs]
    assert [("mine" in h[1]) for h in table["heads"][1:-1]] == [bool(a["gpus"]) for a in archs]
    assert len(table["rows"]) == len(data["rows"])
    marks = {"sass": "S", "ptx": "P", "sass+ptx": "SP"}
    runs = {"sass": "s-ok", "ptx": "s-warning", "cannot": "s-conflict", "unlisted": "s-unchecked"}
    for row, cells in zip(data["rows"], table["rows"]):
        assert cells[0][0].startswith(f"{row['version']} \u00b7 CUDA {row['cuda']}")
        for arch, (text, cls) in zip(archs, cells[1:-1]):
            carried = row["cells"].get(arch["sm"])
            if carried:
                assert text == marks[carried]
            if arch["gpus"]:  # coloured by how those GPUs run the build
                assert runs[row["runs"][arch["compute_capability"]]["verdict"]] in cls
            elif not carried:
                assert text == "" and "empty" in cls
    # the V100 target cannot run torch 2.7.0+cu128 (no sm_70 in it): a red cell and the summary says so
    row = next(i for i, r in enumerate(data["rows"]) if r["version"] == "2.7.0" and r["cuda"] == "12.8")
    v100 = next(i for i, a in enumerate(archs) if a["sm"] == "sm_70")
    assert "s-conflict" in table["rows"][row][v100 + 1][1]
    assert table["rows"][row][-1][0] == "cannot: NVIDIA V100"

    markdown = envbuild(*args, "--markdown").stdout
    lines = [line for line in markdown.splitlines() if line.startswith("|")]
    assert len(lines) == 2 + len(data["rows"])  # header, alignment, one line per row
    assert all(line.count("|") == len(archs) + 5 for line in lines)  # release, CUDA, builds, archs, your GPUs


def test_grid_from_host_gpus_with_a_hostile_name(browser, tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    query = f"0, {HOSTILE}, GPU-0, 550.54.15, 24576, 8.9, 00000000:00:06.0\n"
    (tmp_path / "query.csv").write_text(query)
    fake = bin_dir / "nvidia-smi"  # a host whose driver names its GPU like that
    fake.write_text(f"#!/bin/sh\ncase \"$*\" in\n  *--query-gpu*) cat '{tmp_path / 'query.csv'}' ;;\n"
                    f"  *) cat '{SMI / 'h100_r580_plain.txt'}' ;;\nesac\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}")
    page = tmp_path / "grid.html"
    proc = envbuild("matrix", "grid", "pytorch", "2.8.0", "--host", "--html", page, env=env)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(envbuild("matrix", "grid", "pytorch", "2.8.0", "--host", "--json", env=env).stdout)
    assert data["gpus"] == [{"name": HOSTILE, "compute_capability": "8.9", "on": ["this host"]}]
    view = look_at(browser, page)
    assert HOSTILE in view.evaluate("document.querySelector('#gpus').innerText")
    assert "&lt;script&gt;" in page.read_text() and HOSTILE not in page.read_text()
    markdown = envbuild("matrix", "grid", "pytorch", "2.8.0", "--host", "--markdown", env=env).stdout
    assert "\\<script\\>" in markdown and "<script>" not in markdown


def test_grid_refuses_what_it_cannot_draw():
    for args, words in ((("jax",), "record no compiled architectures"), (("pytorch", "--gpu", "RTX 3099"), "unknown GPU"),
                        (("tensorflow", "--html", "x.html", "--markdown"), "not allowed with")):
        proc = envbuild("matrix", "grid", *args)
        assert proc.returncode == 2 and words in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr


# --- verify ---------------------------------------------------------------------------------------------
def test_verify_page_bars_against_the_peak(browser, tmp_path):
    import jsonschema

    from envbuild.html import verify_page

    data = json.loads(H100_REPORT.read_text())  # an assembled report: it must be one `verify --json` could print
    jsonschema.Draft202012Validator(json.loads((ROOT / "schema" / "verify.schema.json").read_text())).validate(data)
    page = tmp_path / "verify.html"
    page.write_text(verify_page.render(data))
    view = look_at(browser, page, tmp_path)
    measured = [d for c in data["checks"] if c["name"].startswith("perf.") for d in (c.get("data") or {}).get("devices", [])
                if d.get("measured") is not None]
    bars = view.evaluate("[...document.querySelectorAll('.bar svg')].map(s => "
                         "[s.querySelector('.bar-fill').getAttribute('width'), s.closest('.bar').innerText])")
    assert len(bars) == len(measured) == 3
    for d, (width, text) in zip(measured, bars):
        assert float(width) == pytest.approx(100 * d["measured"] / d["peak"], abs=0.01)
        assert f"{d['measured']:,.1f} {d['unit']}" in text and f"{d['fraction']:.0%}" in text
    rows = view.evaluate("[...document.querySelectorAll('#checks tbody tr')].map(r => r.cells[1].innerText)")
    assert [r.split(" ")[0] for r in rows] == [c["name"] for c in data["checks"]]


def test_verify_fleet_page_has_each_target_and_escapes_probe_output(browser, tmp_path):
    """A probe's report comes from inside someone's image: every value of it is text."""
    from envbuild.html import verify_page

    h100 = json.loads(H100_REPORT.read_text())
    hostile = copy.deepcopy(h100["checks"])
    hostile[0]["details"] = HOSTILE
    for c in hostile:
        if c["name"].startswith("perf."):
            for d in c["data"]["devices"]:
                d["gpu"] = HOSTILE_NAME
    report = {"image": h100["image"], "ok": False, "mode": "full", "elapsed_s": 61.0,
              "summary": {"pass": 1, "fail": 1, "not_run": 0},
              "targets": [{"name": "h100", "kind": "slurm", "gpu": "H100", "status": "pass", "scheduler_job": "42",
                           "state": "COMPLETED", "definition": None, "failed_required": [], "checks": h100["checks"],
                           "probe": h100["probe"]},
                          {"name": "evil", "kind": "k8s", "gpu": "A10G", "status": "fail", "scheduler_job": None,
                           "state": None, "definition": None, "failed_required": ["gpu.nvidia_smi"], "checks": hostile,
                           "probe": dict(h100["probe"], host=HOSTILE)}]}
    page = tmp_path / "fleet.html"
    page.write_text(verify_page.render_fleet(report))
    view = look_at(browser, page, tmp_path)
    assert view.evaluate("document.querySelectorAll('section.target').length") == 2
    assert view.evaluate("document.querySelectorAll('#target-0 .bar svg').length") == 3
    text = view.evaluate("document.body.innerText")
    assert HOSTILE in text and HOSTILE_NAME in text


def _glyph(word: str) -> str:
    from envbuild.html.page import STATUSES, status_of

    return STATUSES[status_of(word)][1]


def _status_class(word: str) -> str:
    from envbuild.html.page import STATUSES, status_of

    return STATUSES[status_of(word)][0]


def test_grid_says_what_resolve_says_of_each_build_on_each_gpu():
    """The grid's verdicts are resolve's GPU -> kernels link, build by build."""
    from envbuild import frameworks, matrix
    from envbuild.resolver import arch_grid
    from envbuild.resolver import resolve
    from envbuild.spec import spec_from_mapping

    m = matrix.load()
    gpus = [{"name": n, "compute_capability": cc, "on": ["--gpu"]}
            for n, cc in (("Tesla K80", "3.7"), ("Tesla V100-SXM2-16GB", "7.0"), ("NVIDIA T4", "7.5"),
                          ("NVIDIA L4", "8.9"), ("GeForce RTX 5090", "12.0"))]
    drivers = {"3.7": "470.239.06"}  # the last branch that drives Kepler; the grid does not judge drivers
    rows = [r for r in frameworks.get("pytorch").rows(m) if r.version in ("0.4.1", "1.0.0", "2.7.0", "2.8.0")]
    data = arch_grid.grid(m, "pytorch", rows, gpus)
    seen = set()
    for row in data["rows"]:
        build = row["builds"][0]
        if build["platforms"] != ["linux-64"]:
            continue
        for g in gpus:
            spec = spec_from_mapping({"frameworks": {"pytorch": f"=={row['version']}"}, "cuda": row["cuda"],
                                      "installer": build["installer"], "target": {"gpus": [g["name"]],
                                                                     "driver": drivers.get(g["compute_capability"], "580.65.06")}})
            answer = resolve(spec, m)
            arch = next(c for c in answer.to_json()["checks"] if c["link"] == "gpu_arch")
            verdict = row["runs"][g["compute_capability"]]["verdict"]
            seen.add(verdict)
            assert (arch["status"] == "conflict") == (verdict == "cannot"), (row["version"], row["cuda"], g, verdict)
            if verdict != "cannot":
                jit = any(w.kind == "ptx_jit" for w in answer.warnings)
                assert jit == (verdict == "ptx"), (row["version"], row["cuda"], g, verdict)
    assert seen >= {"sass", "ptx", "cannot"}
