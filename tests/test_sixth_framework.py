"""A new framework is its matrix file and its plugin module: in a copy of the source tree,
adding Apache MXNet as `matrices/mxnet.yaml` and `envbuild/frameworks/mxnet.py`, then running
the two generators (`python -m envbuild.matrix`, `python -m envbuild.frameworks`), changes no
other file, and `envbuild resolve` judges MXNet requests like any other framework's."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NEW = ROOT / "tests" / "data" / "sixth_framework"
TREE = ("envbuild", "matrices", "schema", "Dockerfiles")  # what the package and its generators read
ADDED = {"matrices/mxnet.yaml", "envbuild/frameworks/mxnet.py"}
REGENERATED = {"envbuild/data/matrices.json", "schema/spec.schema.json", "schema/matrix.schema.json"}


def _digests(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and not p.is_symlink() and "__pycache__" not in p.parts}


def _run(tree: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run([sys.executable, *args], cwd=tree, env=env, capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> tuple[Path, set[str]]:
    """The copied tree with MXNet added, and the files that changed."""
    tree = tmp_path_factory.mktemp("sixth") / "src"
    for name in TREE:
        shutil.copytree(ROOT / name, tree / name, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
    before = _digests(tree)
    shutil.copy(NEW / "mxnet.yaml", tree / "matrices" / "mxnet.yaml")
    shutil.copy(NEW / "mxnet.py", tree / "envbuild" / "frameworks" / "mxnet.py")
    for generator in ("envbuild.matrix", "envbuild.frameworks"):
        done = _run(tree, "-m", generator)
        assert done.returncode == 0, done.stderr
    after = _digests(tree)
    changed = {path for path in after if before.get(path) != after[path]} | (set(before) - set(after))
    return tree, changed


def test_a_new_framework_changes_only_its_own_files_and_the_generated_ones(tree):
    root, changed = tree
    assert changed == ADDED | REGENERATED
    assert _run(root, "-m", "envbuild.matrix", "--check").returncode == 0
    assert _run(root, "-m", "envbuild.frameworks", "--check").returncode == 0
    schema = json.loads((root / "schema" / "matrix.schema.json").read_text())
    assert schema["properties"]["framework"]["enum"][-1] == "mxnet"


def _resolve(root: Path, *args: str) -> tuple[int, dict]:
    done = _run(root, "-m", "envbuild", "resolve", *args, "--json")
    return done.returncode, json.loads(done.stdout)


def test_resolve_judges_the_new_framework(tree):
    root, _ = tree
    code, fits = _resolve(root, "--framework", "mxnet==1.9.1", "--driver", "470.57.02", "--python", "3.8")
    assert code == 0 and fits["verdict"] == "ok", fits
    [mxnet] = fits["resolved"]["frameworks"]
    assert (mxnet["name"], mxnet["cuda"], mxnet["pip_requirements"]) == ("mxnet", "11.2", ["mxnet-cu112==1.9.1"])
    # the CUDA 10.2 wheel where the request asks for that CUDA
    code, older = _resolve(root, "--framework", "mxnet", "--cuda", "10.2", "--driver", "470.57.02", "--python", "3.8")
    assert code == 0 and older["resolved"]["frameworks"][0]["pip_requirements"] == ["mxnet-cu102==1.9.1"]
    # a driver older than every build's CUDA is a conflict, with its cause
    code, old = _resolve(root, "--framework", "mxnet", "--driver", "418.40.04", "--python", "3.8")
    assert code == 1 and old["verdict"] == "conflict"
    assert [c["kind"] for c in old["conflicts"]] == ["driver_too_old"]


def test_envbuild_matrix_shows_its_table(tree):
    root, _ = tree
    done = _run(root, "-m", "envbuild", "matrix", "mxnet", "--json")
    assert done.returncode == 0, done.stderr
    assert [(r["package"], r["cuda"]) for r in json.loads(done.stdout)["rows"]] == \
        [("mxnet-cu102", "10.2"), ("mxnet-cu112", "11.2")]


def test_the_shipped_tree_does_not_know_it():
    assert not (ROOT / "envbuild" / "frameworks" / "mxnet.py").exists()
    assert "mxnet" not in (ROOT / "envbuild" / "data" / "matrices.json").read_text()
