"""What `envbuild resolve` and `envbuild lock` load, checked by module names rather than by
time (times vary with the machine; an import that should not happen shows up here at once).
Also the caches that keep the hashing of the matrix files off a repeated run."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest


ROOT = Path(__file__).resolve().parent.parent

# run one command in a fresh interpreter and print the names of the modules it loaded
CHILD = """
import contextlib, io, json, sys
from envbuild.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    code = main(sys.argv[1:])
print(json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""

# never on the `resolve` path: services, solvers, terminals and the stages after resolve
NOT_FOR_RESOLVE = ("docker", "kubernetes", "rattler", "requests", "urllib3", "rich", "conda_lock", "pydantic", "cupy",
                   "asyncio", "envbuild.lock", "envbuild.dockerfile",
                   "envbuild.image", "envbuild.verify")


def _loaded(args: list[str], cache: Path) -> tuple[int, set[str]]:
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    done = subprocess.run([sys.executable, "-c", CHILD, *args], env=env, capture_output=True, text=True, cwd=ROOT,
                          check=True)
    answer = json.loads(done.stdout.splitlines()[-1])
    return answer["code"], set(answer["modules"])


def _hits(modules: set[str], banned: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if any(m == b or m.startswith(b + ".") for b in banned))


@pytest.mark.parametrize("name", ["pytorch-official.yaml", "pytorch-dlc.yaml"])  # the second has pip packages
def test_resolve_with_warm_caches_loads_no_heavy_library(tmp_path, name):
    recipe = str(ROOT / "recipes" / name)
    code, cold = _loaded(["resolve", recipe], tmp_path)
    assert code == 0
    assert "yaml" in cold  # the first run parses the matrices
    code, warm = _loaded(["resolve", recipe], tmp_path)
    assert code == 0
    assert _hits(warm, NOT_FOR_RESOLVE) == []
    # only the command that runs is imported and declared
    assert "envbuild.commands.resolve" in warm
    assert _hits(warm, ("envbuild.commands.lock", "envbuild.commands.image", "envbuild.commands.matrix")) == []


def test_help_still_lists_every_command():
    done = subprocess.run([sys.executable, "-m", "envbuild", "--help"], capture_output=True, text=True, check=True)
    for name in ("resolve", "matrix", "lock", "dockerfile", "image", "verify", "doctor", "init"):
        assert f"    {name}" in done.stdout


def test_matrix_data_version_is_remembered_until_a_file_changes(tmp_path, monkeypatch):
    import shutil

    from envbuild import matrix
    from envbuild.paths import MATRICES_DIR

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    data = tmp_path / "matrices"
    shutil.copytree(MATRICES_DIR, data)
    for path in data.iterdir():  # files older than the filesystem's timestamp granularity
        os.utime(path, (1_700_000_000, 1_700_000_000))
    first = matrix.load_from(data)
    read = matrix._read_files

    def no_read(directory):
        raise AssertionError("the data version should come from the memo")

    monkeypatch.setattr(matrix, "_read_files", no_read)
    assert matrix.load_from(data).version == first.version  # neither hashed nor parsed again
    monkeypatch.setattr(matrix, "_read_files", read)
    gpus = data / "gpus.yaml"
    gpus.write_text(gpus.read_text() + "\n# a comment changes the data version\n")
    changed = matrix.load_from(data)
    assert changed.version != first.version
    assert changed.version == matrix._read_files(data)[0]
    # the pickle is named by the version and by a checksum of the classes it holds
    assert len(list((tmp_path / "cache" / "envbuild").glob(f"matrices-{changed.version}-gpu*-code*.pickle"))) == 1


def test_lock_loads_the_solver_only_to_solve(tmp_path):
    """`lock` imports py-rattler and asyncio (which drives rattler's coroutines, and brings
    ssl and sockets) when it solves; `lock --check` compares hashes and needs neither.
    conda-lock (its models pull in its whole command-line tool) is never imported."""
    from lock_channels import repodata_channels
    from test_lock_cli import SPEC

    repodata_channels(tmp_path / "channels")
    (tmp_path / "spec.yaml").write_text(SPEC.format(version="2.1.2", cuda="12.1", python="3.10"))

    def loaded(*args: str) -> tuple[int, set[str]]:
        env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
        done = subprocess.run([sys.executable, "-c", CHILD, *args], env=env, capture_output=True, text=True,
                              cwd=tmp_path, check=True)
        answer = json.loads(done.stdout.splitlines()[-1])
        return answer["code"], set(answer["modules"])

    code, solving = loaded("lock", "spec.yaml", "-o", "lock")
    assert code == 0
    assert {"rattler", "asyncio"} <= solving
    # a conda-only lock needs neither the pip lock's modules nor, to check it, TLS
    assert _hits(solving, ("conda_lock", "pydantic", "docker", "requests", "envbuild.lock.pip_lock")) == []
    code, checking = loaded("lock", "spec.yaml", "-o", "lock", "--check")
    assert code == 0
    assert _hits(checking, ("rattler", "asyncio", "conda_lock", "pydantic", "envbuild.lock.pip_lock", "ssl")) == []
