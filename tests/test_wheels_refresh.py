"""matrices/wheels.yaml: the index reader, `envbuild matrix refresh`, and the resolver's
use of the wheel files (a Python without a wheel is never chosen nor accepted)."""
from __future__ import annotations

import functools
import http.server
import shutil
import threading
from pathlib import Path

import pytest
import yaml
from packaging.utils import parse_wheel_filename
from packaging.version import Version

from envbuild import matrix
from envbuild.cli import main
from envbuild.core.model import FrameworkRequest, Spec
from envbuild.infra import pypi
from envbuild.matrix import refresh
from envbuild.resolver import resolve
from envbuild.resolver.context import index
from envbuild.spec import load_spec

ROOT = Path(__file__).resolve().parent.parent
M = matrix.load()
RECIPES = sorted((ROOT / "recipes").glob("*.yaml"))


def _spec(frameworks, **kw) -> Spec:
    kw.setdefault("platform", "linux-64")
    kw.setdefault("installer", "pip")
    return Spec(frameworks=tuple(FrameworkRequest(n, v) for n, v in frameworks.items()), **kw)


# --- the resolver and the committed data ------------------------------------------------------------
@pytest.mark.parametrize("path", RECIPES, ids=lambda p: p.name)
def test_every_recipe_python_has_a_wheel_of_its_build(path):
    r = resolve(load_spec(path), M)
    if not r.ok:
        return
    ix = index(M)
    for f in r.resolved.frameworks:
        if f.installer != "pip":
            continue
        build = next(b for b in ix.builds[f.name] if b.version == f.version and str(b.cuda) == f.cuda
                     and b.installer == "pip")
        if build.wheels is not None:
            assert r.resolved.python in build.wheels.pythons(r.resolved.platform), (f, build.wheels.label)


def test_cupy_13_is_not_completed_to_a_python_without_wheels():
    r = resolve(load_spec(ROOT / "recipes/cupy.yaml"), M)
    # cupy-cuda12x 13.x has wheels for 3.9-3.13 only; the base image's python3 picks among them
    assert r.ok and r.resolved.python in {"3.9", "3.10", "3.11", "3.12", "3.13"}
    # the completion step itself, before any base image narrows it: the newest Python with a wheel
    from envbuild.resolver import analyse
    from envbuild.resolver.complete import combine

    a = analyse(load_spec(ROOT / "recipes/cupy.yaml"), index(M))
    assert combine(a.outcomes, a.req)[0].python == "3.13"


def test_a_pinned_python_without_a_wheel_is_python_unsupported_naming_the_newest_with_one():
    r = resolve(_spec({"cupy": "13.*"}, cuda="12.4", python="3.14"), M)
    assert [c.kind for c in r.conflicts] == ["python_unsupported"]
    c = r.conflicts[0]
    assert "3.13" in c.message and "3.14" in c.message
    assert c.facts and all(f.source == "https://pypi.org/simple/cupy-cuda12x/" for f in c.facts)
    for fix in c.fixes:
        assert resolve(r.spec.with_changes(fix.changes), M).ok


def test_a_pinned_cupy_release_is_judged_by_its_own_wheels():
    def wheel_conflicts(python):
        r = resolve(_spec({"cupy": "13.6.0"}, cuda="12.4", python=python), M)
        return [c for c in r.conflicts if "wheels (cupy-cuda12x 13.6.0)" in c.message]

    assert wheel_conflicts("3.13") == []  # (a base image may still lack that Python: another check)
    assert [c.kind for c in wheel_conflicts("3.14")] == ["python_unsupported"]


def test_rows_written_by_refresh_read_back_unchanged():
    rows = refresh.rows_of(M)
    assert len(rows) > 500
    reread = yaml.safe_load(refresh.render(rows))["releases"]
    assert refresh.diff(rows, reread) == ([], 0)


def test_committed_torch_defaults_agree_with_the_pypi_default_flags():
    from envbuild import frameworks

    assert frameworks.get("pytorch").refresh.findings(M, refresh.rows_of(M), "https://pypi.org/simple") == []


# --- errors: one line, exit 3, credentials masked --------------------------------------------------------
def test_an_unreachable_index_is_exit_3_with_the_url_masked(capsys, tmp_path):
    code = main(["matrix", "refresh", "--check", "--index-url", "http://user:s3cret@127.0.0.1:9/simple"])
    err = capsys.readouterr().err
    assert code == 3 and err.count("\n") == 1
    assert "user:***@127.0.0.1:9" in err and "s3cret" not in err


def test_offline_without_a_cached_answer_is_exit_3(capsys, tmp_path):
    code = main(["matrix", "refresh", "--check", "--offline", "--cache", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 3 and "no cached answer" in err and err.count("\n") == 1


# --- a local PEP 503 index (HTML only), as many mirrors serve -----------------------------------------------
def _serve(folder: Path):
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def test_pip_config_index_url_is_honoured(tmp_path, monkeypatch):
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "index.html").write_text(
        '<a href="torch-2.5.1-cp312-cp312-manylinux1_x86_64.whl">torch-2.5.1-cp312-cp312-manylinux1_x86_64.whl</a>')
    server = _serve(tmp_path)
    try:
        conf = tmp_path / "pip.conf"
        conf.write_text(f"[global]\nindex-url = http://127.0.0.1:{server.server_port}/\n")
        monkeypatch.delenv("PIP_INDEX_URL", raising=False)
        monkeypatch.setenv("PIP_CONFIG_FILE", str(conf))
        ix = pypi.SimpleIndex()
        assert ix.url == f"http://127.0.0.1:{server.server_port}"
        assert [f["filename"] for f in ix.files("torch")] == ["torch-2.5.1-cp312-cp312-manylinux1_x86_64.whl"]
    finally:
        server.shutdown()


@pytest.mark.network
def test_a_tls_failure_is_exit_3_naming_the_url(tmp_path, monkeypatch, capsys):
    import subprocess

    key, cert = tmp_path / "k.pem", tmp_path / "ca.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
                    "-days", "1", "-subj", "/CN=not-your-ca"], check=True, capture_output=True)
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(cert))
    assert main(["matrix", "refresh", "--check", "--index-url", pypi.PYPI]) == 3
    err = capsys.readouterr().err
    assert "TLS failure" in err and "https://pypi.org/simple/" in err and err.count("\n") == 1


def test_html_only_index_is_read(tmp_path):
    wheel = "cupy_cuda12x-13.6.0-cp311-cp311-manylinux2014_x86_64.whl"
    page = tmp_path / "cupy-cuda12x"
    page.mkdir()
    (page / "index.html").write_text(
        f'<html><body><a href="../files/{wheel}#sha256=00" data-requires-python="&gt;=3.9">{wheel}</a></body></html>')
    server = _serve(tmp_path)
    try:
        ix = pypi.SimpleIndex(f"http://127.0.0.1:{server.server_port}", cache=tmp_path / "cache")
        files = ix.files("cupy_cuda12x")
        assert [f["filename"] for f in files] == [wheel] and files[0]["requires-python"] == ">=3.9"
        assert ix.files("no-such-project") == []
    finally:
        server.shutdown()


# --- against the real PyPI ----------------------------------------------------------------------------------
def _subset(tmp_path: Path) -> Path:
    """A matrices folder that knows torch 2.5.1, tensorflow 2.16.1, jax 0.4.38 and cupy-cuda12x."""
    data = tmp_path / "matrices"
    data.mkdir()
    for path in (ROOT / "matrices").glob("*.yaml"):
        shutil.copy(path, data / path.name)
    docs = {name: yaml.safe_load((data / name).read_text()) for name in ("pytorch.yaml", "tensorflow.yaml", "jax.yaml", "cupy.yaml")}
    docs["pytorch.yaml"]["builds"] = [r for r in docs["pytorch.yaml"]["builds"] if str(r["version"]) == "2.5.1"]
    docs["tensorflow.yaml"]["builds"] = [r for r in docs["tensorflow.yaml"]["builds"] if str(r["version"]) == "2.16.1"]
    docs["jax.yaml"]["releases"] = [r for r in docs["jax.yaml"]["releases"] if str(r["version"]) == "0.4.38"]
    docs["cupy.yaml"]["packages"] = [r for r in docs["cupy.yaml"]["packages"] if r["package"] == "cupy-cuda12x"]
    for name, doc in docs.items():
        (data / name).write_text(yaml.safe_dump(doc))
    (data / "rapids.yaml").write_text("releases: []\n")
    (data / "wheels.yaml").write_text("releases: []\n")
    return data


@pytest.fixture(scope="module")
def refreshed(tmp_path_factory):
    """The subset refreshed once from the real PyPI, its raw answers kept in a cache."""
    tmp = tmp_path_factory.mktemp("refresh")
    data, cache = _subset(tmp), tmp / "cache"
    code = main(["matrix", "refresh", "--data", str(data), "--cache", str(cache), "--index-url", pypi.PYPI])
    assert code == 0
    return data, cache


@pytest.mark.network
def test_refresh_of_a_subset_agrees_with_the_committed_data(refreshed):
    data, _cache = refreshed
    fresh = refresh.rows_of(matrix.load_from(data))
    committed = {(r["package"], r["version"]): r for r in refresh.rows_of(M)}
    assert {r["package"] for r in fresh} >= {"torch", "tensorflow", "jax", "jaxlib", "jax-cuda12-plugin", "cupy-cuda12x"}
    lines, count = refresh.diff([committed[(r["package"], r["version"])] for r in fresh
                                 if (r["package"], r["version"]) in committed], fresh)
    assert count == 0, lines
    torch = next(r for r in fresh if r["package"] == "torch")
    assert torch["cuda"] == "12.4"  # nvidia-cuda-runtime-cu12==12.4.127 in its Requires-Dist
    report = (data / "wheels.diff").read_text()
    assert report.startswith("# envbuild matrix refresh ")
    assert "note     torch 2.5.1:" not in report  # its CUDA was read: no note says otherwise


@pytest.mark.network
def test_refresh_check_offline_from_the_cache_agrees_then_sees_a_change(refreshed, tmp_path, capsys):
    data, cache = refreshed
    assert main(["matrix", "refresh", "--check", "--offline", "--cache", str(cache), "--data", str(data)]) == 0
    changed = tmp_path / "changed"
    shutil.copytree(data, changed)
    text = (changed / "wheels.yaml").read_text()
    (changed / "wheels.yaml").write_text(text.replace("linux-64: '3.9 3.10 3.11 3.12 3.13'", "linux-64: '3.9 3.10 3.11 3.12 3.13 3.14'", 1))
    capsys.readouterr()
    out_file = tmp_path / "diff.txt"
    assert main(["matrix", "refresh", "--check", "--offline", "--cache", str(cache), "--data", str(changed),
                 "--diff", str(out_file)]) == 1
    assert "changed " in capsys.readouterr().out and "changed " in out_file.read_text()


def _live_pythons(name: str, version: str, platform_suffix: str = "x86_64") -> set[str]:
    files = pypi.SimpleIndex(pypi.PYPI).files(name)
    out = set()
    for f in files:
        try:
            _n, v, _b, tags = parse_wheel_filename(f["filename"])
        except Exception:  # noqa: BLE001 - sdists
            continue
        if v == Version(version):
            out |= {f"{t.interpreter[2]}.{t.interpreter[3:]}" for t in tags
                    if t.interpreter.startswith("cp") and "linux" in t.platform and t.platform.endswith(platform_suffix)}
    return out


@pytest.mark.network
def test_resolved_python_has_live_wheels_for_cupy_and_jax():
    cupy = resolve(load_spec(ROOT / "recipes/cupy.yaml"), M).resolved
    series = [v for v in M.wheels if v.package == "cupy-cuda12x" and v.version.startswith("13.")]
    assert any(cupy.python in _live_pythons("cupy-cuda12x", r.version) for r in series)
    jax = resolve(load_spec(ROOT / "recipes/jax.yaml"), M).resolved
    version = jax.frameworks[0].version
    assert jax.python in _live_pythons("jaxlib", version)
    assert jax.python in _live_pythons("jax-cuda12-plugin", version)


@pytest.mark.network
def test_metadata_without_pep658_is_read_from_the_wheel_with_range_requests(tmp_path):
    from envbuild.frameworks.pytorch import cuda_of_wheel

    ix = pypi.SimpleIndex(pypi.PYPI, cache=tmp_path)
    wheel = next(f for f in ix.files("torch")
                 if f["filename"] == "torch-2.14.1-cp311-cp311-manylinux_2_28_x86_64.whl")
    text = ix.metadata(wheel)  # a ~550 MB wheel: only its zip directory and METADATA are fetched
    assert cuda_of_wheel(text) == "13.0"
    assert pypi.SimpleIndex(pypi.PYPI, cache=tmp_path, offline=True).metadata(wheel) == text
