"""The layers of envbuild, checked on the source: which package may import which.

The import graph is read with `ast` from every module under envbuild/, module-level and
function-level (lazy) imports alike, since a lazy import is still a dependency. The rules
(docs/architecture.md):

* spec reads the user's request only: it imports neither the matrices nor the host.
* dockerfile reads the lock folder only through the reading API of envbuild/lock/folder.py;
  it writes no lock file.
* dockerfile and verify read no matrix: neither envbuild.matrix nor the matrices' folder
  (envbuild.infra.paths.MATRICES_DIR); the pipeline hands them what the tables say as values.
* image builds and pushes; it does not run verification. verify checks an image against its
  recorded expectations; it does not resolve specs again.
* matrix is data: it imports no stage (resolver, lock, dockerfile, image, verify).
* No import cycle between packages.
* infra (files, errors, URLs, PyPI) imports nothing else of envbuild; core (the values) imports
  infra only; output (what the terminal shows) imports core and infra only.
* The top of envbuild/ holds at most ten modules: the rest lives in packages named for what
  they hold.
* Imports sit at the top of a module; only the heavy optional libraries are imported
  inside the functions that use them.
* The probe (envbuild/verify/probe.py) is a standalone script: only envbuild/verify/probe_api.py
  imports it, by public names only, and it imports no envbuild module.

A rule that today's code still breaks is listed in KNOWN_VIOLATIONS with its reason. The
list can only shrink: the test fails on a new violation and also on a listed one that is
gone (then delete its line).
"""
from __future__ import annotations

import ast
import collections
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "envbuild"

# The reading API of envbuild/lock/folder.py: names, record, check, and rolling forward a
# write that was killed after its commit point (every reader does that first).
FOLDER_READERS = frozenset({
    "CONDA_LOCKFILE", "PIP_LOCKFILE", "BASE_RECORD", "RECORD", "explicit_name", "pip_lock_name", "is_lock_file",
    "sha256_file", "read_record", "read_conda_lockfile", "read_lock_text", "verify", "recover", "BASE_PACKAGES",
    "read_base_packages",
})

KNOWN_VIOLATIONS: dict[str, str] = {}  # none left; a new entry needs its one-line reason

# What may be imported inside a function (docs/architecture.md, Imports): the heavy optional
# libraries, so that a command that does not use them never loads them.
LAZY_LIBRARIES = frozenset({"docker", "requests", "urllib3", "rattler", "asyncio", "conda_lock", "kubernetes", "rich"})
# runs alone inside images, on Python 3.6 and later: imports the GPU libraries it checks
# (and what an old Python may lack) only where they are present
STANDALONE = frozenset({"envbuild.verify.probe"})


def _modules() -> dict[str, Path]:
    modules = {}
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


MODULES = _modules()


def _resolve(name: str) -> str | None:
    """The envbuild module `name` is, or lies in (`envbuild.lock.folder.update` -> the module)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imports(module: str) -> dict[str, set[str]]:
    """module imported -> the names used from it (`from M import a`, `import M` then `M.a`)."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    # `if TYPE_CHECKING:` imports name types for annotations only; they never run, so
    # they are no dependency (a module may name a type of the layer that uses it)
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            node.body = []
    found: dict[str, set[str]] = collections.defaultdict(set)
    aliases: dict[str, str] = {}  # local name -> module it is bound to
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("envbuild"):
                    target = _resolve(alias.name)
                    found[target]
                    if alias.asname:
                        aliases[alias.asname] = target
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([node.module] if node.module else []))
            if not base.startswith("envbuild"):
                continue
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                if submodule in MODULES:  # `from envbuild.lock import folder`: the module folder
                    found[submodule]
                    aliases[alias.asname or alias.name] = submodule
                else:
                    found[_resolve(base)].add(alias.name)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases:
            found[aliases[node.value.id]].add(node.attr)
    found.pop(module, None)
    found.pop("envbuild", None)  # the root package holds only the version
    return found


GRAPH = {module: _imports(module) for module in MODULES}
# every package and top-level module of envbuild (a rule lists what it allows from these)
STAGES_AND_MORE = frozenset(module.split(".")[1] for module in MODULES if "." in module)


def package(module: str) -> str:
    """envbuild.lock.folder -> lock; envbuild.cli -> cli; the root package -> envbuild."""
    return module.split(".")[1] if "." in module else module


def _edges(source: str, *targets: str):
    for module, imported in sorted(GRAPH.items()):
        if package(module) == source:
            for target in sorted(imported):
                if package(target) in targets:
                    yield module, target, imported[target]


def violations() -> set[str]:
    found = set()
    for source, targets in [("spec", ("matrix", "hostenv")), ("image", ("verify",)), ("verify", ("resolver",)),
                            ("matrix", ("resolver", "lock", "dockerfile", "image", "verify"))]:
        found |= {f"{module} -> {target}" for module, target, _ in _edges(source, *targets)}
    # the ground floors: infra leans on nothing of envbuild, core on infra only, output on both
    for source, allowed in [("infra", {"infra"}), ("core", {"core", "infra"}), ("output", {"output", "core", "infra"})]:
        found |= {f"{module} -> {target}" for module, target, _ in _edges(source, *STAGES_AND_MORE)
                  if package(target) not in allowed}
    for source in ("dockerfile", "verify"):
        found |= {f"{module} -> {target}" for module, target, _ in _edges(source, "matrix")}
        found |= {f"{module} -> {target}.MATRICES_DIR" for module, target, names in _edges(source, "infra")
                  if target == "envbuild.infra.paths" and "MATRICES_DIR" in names}
    for module, target, names in _edges("dockerfile", "lock"):
        if target != "envbuild.lock.folder":
            found.add(f"{module} -> {target}")
        else:
            found |= {f"{module} -> {target}.{name}" for name in names - FOLDER_READERS}
    return found | cycles()


def package_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = collections.defaultdict(set)
    for module, imported in GRAPH.items():
        graph[package(module)] |= {package(t) for t in imported if package(t) != package(module)}
    return graph


def cycles() -> set[str]:
    """Each package edge that closes a cycle, as `cycle: a -> b`: a imports b, and b reaches a."""
    graph = package_graph()

    def reaches(start: str, goal: str) -> bool:
        seen, todo = set(), [start]
        while todo:
            node = todo.pop()
            if node == goal:
                return True
            if node not in seen:
                seen.add(node)
                todo.extend(graph.get(node, ()))
        return False

    return {f"cycle: {a} -> {b}" for a, targets in graph.items() for b in targets if reaches(b, a)}


def test_the_graph_sees_lazy_and_relative_imports():
    # commands._spec imports the host (hostenv.hostinfo) to read --host: the edge is seen
    assert "envbuild.hostenv.hostinfo" in GRAPH["envbuild.commands._spec"]
    # `from envbuild.lock import folder` then `folder.update(...)`: the name used is seen
    assert "update" in GRAPH["envbuild.lock.base_record"]["envbuild.lock.folder"]
    assert "envbuild.lock.conda_lockfile" in GRAPH["envbuild.lock.base_record"]
    assert len(GRAPH) > 100


def test_the_top_of_the_package_holds_few_modules():
    top = sorted(path.name for path in ROOT.glob("*.py"))
    assert len(top) <= 10, f"envbuild/ holds {len(top)} modules at its top: {top}"


def test_no_new_layer_violation():
    new = violations() - set(KNOWN_VIOLATIONS)
    assert sorted(new) == [], "an import reaches across a layer (docs/architecture.md)"


def imports_inside_functions() -> list[str]:
    found = []
    for module, path in sorted(MODULES.items()):
        if module in STANDALONE:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for function in ast.walk(tree):
            if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(function):
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom):
                    names = ["." * node.level + (node.module or "")]
                else:
                    continue
                if any(name.split(".")[0] not in LAZY_LIBRARIES for name in names):
                    found.append(f"{module}:{node.lineno}: {ast.unparse(node)}")
    return sorted(set(found))


def test_imports_sit_at_the_top():
    assert imports_inside_functions() == [], "import it at the top of the module (docs/architecture.md, Imports)"


def test_known_violations_only_shrink():
    gone = set(KNOWN_VIOLATIONS) - violations()
    assert sorted(gone) == [], "fixed: delete these lines from KNOWN_VIOLATIONS"


# --- the probe: a standalone script, reached only through its shared module -----------------------
PROBE = "envbuild.verify.probe"
PROBE_API = "envbuild.verify.probe_api"


def test_only_the_shared_module_imports_the_probe():
    """The probe runs inside images, apart from envbuild: what the host uses of it is the
    list in envbuild/verify/probe_api.py, so no other module imports it. That module
    imports nothing else of envbuild, so every layer may use it."""
    importers = sorted(module for module, imported in GRAPH.items() if PROBE in imported)
    assert importers == [PROBE_API]
    assert sorted(GRAPH[PROBE_API]) == [PROBE]


def test_the_host_uses_no_private_name_of_the_probe():
    names = GRAPH[PROBE_API][PROBE] | {name for imported in GRAPH.values() for name in imported.get(PROBE_API, ())}
    assert names and sorted(n for n in names if n.startswith("_")) == []
    assert "report_from_output" in GRAPH["envbuild.verify.fleet"][PROBE_API]  # the scan sees these names


def test_the_probe_imports_nothing_but_the_standard_library_at_its_top():
    """The probe imports no envbuild module anywhere, and at module level only the standard
    library: the GPU libraries it checks (and PyYAML for the bundled matrices) are imported
    inside the checks that use them, when present."""
    tree = ast.parse(MODULES[PROBE].read_text(encoding="utf-8"))
    everywhere = [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]
    names = [a.name for n in everywhere if isinstance(n, ast.Import) for a in n.names]
    names += [n.module or "" for n in everywhere if isinstance(n, ast.ImportFrom)]
    assert [n for n in names if n.split(".")[0] == "envbuild" or not n] == []
    top = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    top_names = [a.name for n in top if isinstance(n, ast.Import) for a in n.names]
    top_names += [n.module for n in top if isinstance(n, ast.ImportFrom)]
    assert top_names and [n for n in top_names if n.split(".")[0] not in sys.stdlib_module_names] == []


def test_no_module_beside_the_probe_hides_a_standard_one():
    """The probe runs each GPU library's checks as `python .../probe.py --child GROUP`, which
    puts the probe's folder first on sys.path: a module there named like a standard one (an
    `html` package, say) would be imported in its place by the library under test."""
    folder = MODULES[PROBE].parent
    beside = {p.stem for p in folder.glob("*.py")} | {p.name for p in folder.iterdir() if (p / "__init__.py").exists()}
    assert sorted(beside & set(sys.stdlib_module_names)) == []
