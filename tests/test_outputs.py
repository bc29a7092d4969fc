"""Output folders: `envbuild dockerfile -o DIR` replaces only its own entries (`Dockerfile`,
`envbuild/`) and never touches, moves or deletes anything else; folders that can never be
outputs are refused in one line. Real CLI, real solve against a local channel of tiny
conda archives."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest

from test_cli_image_e2e import envbuild, ok, one_error_line, write_spec


def snapshot(folder: Path, skip: tuple[str, ...] = ()) -> dict[str, str]:
    """relative path -> sha256 (and mode) of every file under `folder`, except `skip` entries."""
    found = {}
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder)
        if rel.parts[0] in skip or not path.is_file():
            continue
        found[rel.as_posix()] = f"{oct(path.stat().st_mode)}:{hashlib.sha256(path.read_bytes()).hexdigest()}"
    return found


def foreign_files(folder: Path) -> None:
    """What a user keeps in a project folder, including names close to envbuild's own."""
    (folder / "src").mkdir(parents=True, exist_ok=True)
    (folder / "src" / "train.py").write_text("print('train')\n")
    (folder / "NOTES.md").write_text("do not lose me\n")
    (folder / "dockerfile.bak").write_text("FROM scratch\n")
    (folder / ".env").write_text("TOKEN=abc\n")
    (folder / "run.sh").write_text("#!/bin/sh\n")
    os.chmod(folder / "run.sh", 0o755)


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> tuple[Path, Path]:
    """A project folder with a spec and a lock made from it."""
    work = tmp_path_factory.mktemp("outputs")
    spec = write_spec(work, "127.0.0.1:1/outputs/app")
    ok(envbuild("lock", spec, "-o", work / "lock", cwd=work))
    return work, spec


def test_foreign_files_refused_then_kept_byte_identical_with_force(project, tmp_path):
    work, spec = project
    out = tmp_path / "ctx"
    foreign_files(out)
    before = snapshot(out)
    refused = envbuild("dockerfile", spec, "-o", out, "--lock-dir", work / "lock", cwd=work)
    assert refused.returncode == 2
    line = one_error_line(refused)
    assert "files envbuild did not write" in line and "--force" in line
    assert snapshot(out) == before

    ok(envbuild("dockerfile", spec, "-o", out, "--lock-dir", work / "lock", "--force", cwd=work))
    assert (out / "Dockerfile").is_file() and (out / "envbuild" / "plan.json").is_file()
    assert json.loads((out / ".envbuild-outputs").read_text())["owned"] == ["Dockerfile", "envbuild"]
    assert snapshot(out, skip=("Dockerfile", "envbuild", ".envbuild-outputs")) == before

    # The record makes the folder envbuild's to update: no --force needed again, and a file
    # the user adds next to the context later is kept too.
    (out / "later.txt").write_text("added after\n")
    before = snapshot(out, skip=("Dockerfile", "envbuild", ".envbuild-outputs"))
    ok(envbuild("dockerfile", spec, "-o", out, "--lock-dir", work / "lock", cwd=work))
    assert snapshot(out, skip=("Dockerfile", "envbuild", ".envbuild-outputs")) == before
    assert not [p for p in out.iterdir() if p.name.startswith(".envbuild-stage-")]


def test_spec_folder_as_output_keeps_the_spec_and_the_lock(project):
    work, spec = project
    owned = ("Dockerfile", "envbuild", ".envbuild-outputs")
    before = snapshot(work, skip=owned)
    # `-o .` next to the lock folder it builds from: never, not even with --force
    refused = envbuild("dockerfile", spec, "-o", ".", "--lock-dir", "lock", "--force", cwd=work)
    assert refused.returncode == 2 and "holds the lock folder" in one_error_line(refused)
    refused = envbuild("dockerfile", spec, "-o", ".", cwd=work)
    assert refused.returncode == 2 and "did not write" in one_error_line(refused)
    assert snapshot(work) == before
    try:
        ok(envbuild("dockerfile", spec, "-o", ".", "--force", cwd=work))
        assert (work / "Dockerfile").is_file()
        assert snapshot(work, skip=owned) == before  # spec, channel, lock folder: byte-identical
    finally:
        for name in owned:
            target = work / name
            if target.is_dir():
                shutil.rmtree(target)
            else:
                target.unlink(missing_ok=True)


@pytest.mark.parametrize("output, words", [
    ("lock", "holds the lock folder"),  # -o X --lock-dir X
    ("..", "parent of the spec's folder"),
    ("/", "filesystem root"),
    ("/proc/1", "did not write"),
    ("spec.yaml", "not a folder"),
])
def test_folders_that_can_never_be_outputs(project, output, words):
    work, spec = project
    before = snapshot(work)
    force = () if output == "/proc/1" else ("--force",)  # --force never makes these acceptable
    proc = envbuild("dockerfile", spec, "-o", output, "--lock-dir", "lock", *force, cwd=work)
    assert proc.returncode == 2
    assert words in one_error_line(proc)
    assert snapshot(work) == before


def test_lock_folder_inside_the_output_is_refused(project, tmp_path):
    work, spec = project
    (tmp_path / "lock").mkdir()
    for path in (work / "lock").iterdir():
        (tmp_path / "lock" / path.name).write_bytes(path.read_bytes())
    before = snapshot(tmp_path)
    proc = envbuild("dockerfile", spec, "-o", tmp_path, "--lock-dir", tmp_path / "lock", "--force", cwd=work)
    assert proc.returncode == 2 and "holds the lock folder" in one_error_line(proc)
    assert snapshot(tmp_path) == before
