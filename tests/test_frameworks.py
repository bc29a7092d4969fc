"""Frameworks as plugins: the registry, the protocol, and the rule that no code outside
`envbuild/frameworks/` tests a framework's name (the probe, one standalone file, excepted)."""
from __future__ import annotations

import ast
import inspect
import json
import re
from pathlib import Path

import pytest

from envbuild import frameworks, matrix
from envbuild.frameworks.__main__ import main, schema_texts
from envbuild.frameworks.base import Framework, Refresh, View
from envbuild.spec.validate import canonical_framework

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "envbuild"
NAMES = ("pytorch", "tensorflow", "jax", "rapids", "cupy")  # the frameworks this tree ships

# Hooks every plugin must implement itself (the base class only says "not implemented").
REQUIRED = ("builds", "pins")

# Places outside the plugins where a framework's name may be a tested value, each with why.
# (path relative to envbuild/, text of the line) -> reason
ALLOWED: dict[tuple[str, str], str] = {}


@pytest.fixture(scope="module")
def m() -> matrix.Matrices:
    return matrix.load()


def test_the_registry_is_the_plugin_modules():
    """A framework is a module of envbuild/frameworks/ that defines PLUGIN, named for it,
    listed in its plugin's order; each has its matrix file and its table."""
    modules = sorted(p.stem for p in PACKAGE.joinpath("frameworks").glob("*.py")
                     if re.search(r"^PLUGIN = ", p.read_text(), re.M))
    assert sorted(frameworks.names()) == modules
    assert tuple(p.name for p in frameworks.all()) == frameworks.names()
    assert [p.order for p in frameworks.all()] == sorted(p.order for p in frameworks.all())
    assert frameworks.names() == NAMES  # the shipped ones, in the order every listing shows them
    for name in frameworks.names():
        assert (ROOT / "matrices" / f"{name}.yaml").is_file()
    assert set(matrix.load().framework_rows) == set(frameworks.names())
    with pytest.raises(KeyError):
        frameworks.get("keras")


def test_the_runtime_protocol_is_small_and_the_refresh_hooks_are_apart():
    """What the resolver, lock and images ask is on `Framework`; `envbuild matrix` and
    `envbuild matrix refresh` ask objects of their own."""
    members = [n for n in vars(Framework) if not n.startswith("_")]
    assert len(members) <= 16, members
    assert not [n for n in members if n.startswith("index_") or n in ("matrix_columns", "select_rows")]
    for plugin in frameworks.all():
        assert isinstance(plugin.view, View) and isinstance(plugin.refresh, Refresh)


@pytest.mark.parametrize("name", NAMES)
def test_each_plugin_implements_the_protocol(name, m):
    plugin = frameworks.get(name)
    assert isinstance(plugin, Framework) and plugin.name == name
    assert plugin is frameworks.get(name)  # one instance per framework
    for owner, base, hook in [(plugin, Framework, h) for h in REQUIRED] + [(plugin.view, View, "columns")]:
        assert getattr(type(owner), hook) is not getattr(base, hook), f"{name} does not implement {hook}"
        assert list(inspect.signature(getattr(owner, hook)).parameters) == \
            list(inspect.signature(getattr(base, hook)).parameters)[1:]
    # every attribute the protocol declares has the declared type
    for attr, declared in vars(Framework).items():
        if attr.startswith("_") or callable(declared):
            continue
        assert isinstance(getattr(plugin, attr), type(declared) if declared is not None else (str, type(None))), attr
    rows = plugin.rows(m)
    assert rows, f"{name}: its matrix table is empty"
    assert all(isinstance(r, plugin.row_type) and (r.source or r.reason) for r in rows)
    from envbuild.resolver.context import index

    builds = index(m).builds[name]
    assert builds and {b.framework for b in builds} == {name}
    conda, pip, _index_url = plugin.pins(builds[0])
    assert conda or pip
    headers, body = plugin.view.columns(list(rows[:3]), lambda a: "", lambda r: "")
    assert body and all(len(cells) == len(headers) for cells in body)


def test_the_published_schemas_name_the_registry():
    """The JSON schemas stay static files (they are published): their framework enums are
    written from the registry by `python -m envbuild.frameworks`, and are current."""
    for path, text in schema_texts().items():
        assert path.read_text() == text, f"{path.name} is stale: run python -m envbuild.frameworks"
    assert main(["--check"]) == 0
    spec = json.loads((ROOT / "schema" / "spec.schema.json").read_text())
    names, pattern = spec["properties"]["frameworks"]["propertyNames"]["anyOf"]
    assert names["enum"] == list(frameworks.aliases())
    for written in ("cupy-cuda12x", "cupy-cuda102", "cudf-cu11", "cuml-cu12", "jax-cuda12-plugin", "jax-cuda13-pjrt"):
        assert re.match(pattern["pattern"], written) and canonical_framework(written) is not None
    for written in ("cupy-cuda", "torch-cu12", "jax-cuda12"):
        assert not re.match(pattern["pattern"], written)
    assert json.loads((ROOT / "schema" / "matrix.schema.json").read_text())["properties"]["framework"]["enum"] == \
        list(frameworks.names())


def test_every_alias_maps_back_to_its_framework():
    seen = {}
    for plugin in frameworks.all():
        for alias in (plugin.name, *plugin.spelling.aliases):
            assert alias not in seen, f"{alias} is claimed by {seen.get(alias)} and {plugin.name}"
            seen[alias] = plugin.name
            assert canonical_framework(alias) == (plugin.name, None)
            assert canonical_framework(alias.upper()) == (plugin.name, None)
        for pattern, digits_are in plugin.spelling.cuda_in_name:
            assert digits_are in ("major", "variant") and re.compile(pattern).groups >= 1
        for cpu in plugin.spelling.cpu_only:
            assert canonical_framework(cpu) is None  # a CPU build is refused, never resolved
    assert frameworks.aliases() == seen
    assert canonical_framework("cupy-cuda12x") == ("cupy", "12")
    assert canonical_framework("cupy-cuda102") == ("cupy", "10.2")
    assert canonical_framework("cudf-cu11") == ("rapids", "11")
    assert canonical_framework("jax-cuda12-plugin") == ("jax", "12")


def test_the_rapids_pip_index_is_data(m):
    """The index of the -cuXX wheels comes from matrices/rapids.yaml, not from code."""
    from packaging.version import Version

    assert {r.pip_index_url for r in frameworks.get("rapids").rows(m) if Version(r.version) >= Version("23.04")} == {"https://pypi.nvidia.com"}
    from envbuild.resolver.context import index

    builds = index(m).builds["rapids"]
    # '' states that a release has no pip packages (RAPIDS' began with 22.10): conda builds only
    assert not [b for b in builds if b.installer == "pip" and b.row.pip_index_url == ""]
    pip = next(b for b in builds if b.installer == "pip" and Version(b.version) >= Version("23.04"))
    assert frameworks.get("rapids").pins(pip).index_url == "https://pypi.nvidia.com"
    assert "pypi.nvidia.com" not in "".join(p.read_text() for p in PACKAGE.rglob("*.py"))


# --- no framework name tested outside the plugins -------------------------------------------------
def _named(node: ast.AST) -> list[ast.Constant]:
    """The framework names a node holds as a value: "jax", or ("pytorch", "tensorflow")."""
    if isinstance(node, ast.Constant) and node.value in NAMES:
        return [node]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [e for e in node.elts if isinstance(e, ast.Constant) and e.value in NAMES]
    return []


def name_tests(source: str) -> list[tuple[int, str]]:
    """(line, name) of every place `source` tests or keys on a framework name: comparisons
    (`==`, `in`), dict keys, subscripts, `.get(name)`, set literals and match cases."""
    found = []
    for node in ast.walk(ast.parse(source)):
        values: list[ast.Constant] = []
        if isinstance(node, ast.Compare):
            for operand in (node.left, *node.comparators):
                values += _named(operand)
        elif isinstance(node, ast.Dict):
            for key in node.keys:
                values += _named(key) if key is not None else []
        elif isinstance(node, ast.Subscript):
            values += _named(node.slice)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr in ("get", "setdefault", "pop") and node.args:
            values += _named(node.args[0])
        elif isinstance(node, ast.Set):
            values += _named(node)
        elif isinstance(node, ast.MatchValue):
            values += _named(node.value)
        found += [(v.lineno, v.value) for v in values]
    return sorted(set(found))


def scan(package: Path) -> list[tuple[str, int, str, str]]:
    hits = []
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package).as_posix()
        if rel.startswith("frameworks/") or rel == "verify/probe.py":
            continue
        text = path.read_text()
        lines = text.splitlines()
        for line, name in name_tests(text):
            hits.append((rel, line, name, lines[line - 1].strip()))
    return hits


def test_the_scan_finds_name_tests():
    """The scan is real: each way of testing a name is found, and plain use is not."""
    caught = name_tests('if b.framework == "jax": pass\n'
                        'x = b.framework in ("pytorch", "tensorflow")\n'
                        'y = {"cupy": 1}\n'
                        'z = table["rapids"]\n'
                        'w = ix.builds.get("cupy", [])\n'
                        'v = frozenset({"tensorflow"})\n')
    assert [line for line, _ in caught] == [1, 2, 2, 3, 4, 5, 6]
    assert name_tests('FRAMEWORKS = ("pytorch", "jax")\nprint("jax")\nf(framework="cupy")\n'
                      'if name == "torch": pass\n') == []


def test_no_framework_name_is_tested_outside_the_plugins():
    hits = scan(PACKAGE)
    unexplained = [h for h in hits if (h[0], h[3]) not in ALLOWED]
    assert not unexplained, "framework names tested outside envbuild/frameworks/ (add a hook to the plugin):\n" + \
        "\n".join(f"  envbuild/{rel}:{line}: {name!r} in {text}" for rel, line, name, text in unexplained)
    stale = set(ALLOWED) - {(h[0], h[3]) for h in hits}
    assert not stale, f"allowlist entries that no longer match: {sorted(stale)}"
