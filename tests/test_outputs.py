"""Output folders: `envbuild dockerfile -o DIR` replaces only its own entries (`Dockerfile`,
`envbuild/`) and never touches, moves or deletes anything else; folders that can never be
outputs are refused in one line. Real CLI, real solve against a local channel of tiny
conda archives."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
from pathlib import Path

import pytest

from cli_support import in_process as envbuild
from test_cli_image_e2e import ok, one_error_line, write_spec


OWNED = ("Dockerfile", "envbuild", ".envbuild-outputs")


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
    assert set(json.loads((out / ".envbuild-outputs").read_text())["entries"]) == {"Dockerfile", "envbuild"}
    assert snapshot(out, skip=OWNED) == before

    # The record never turns the check off: the folder still holds the user's files, so
    # every later run needs --force again, and a file added next to the context is kept.
    (out / "later.txt").write_text("added after\n")
    before = snapshot(out)
    refused = envbuild("dockerfile", spec, "-o", out, "--lock-dir", work / "lock", cwd=work)
    assert "did not write (.env, NOTES.md, dockerfile.bak, ...)" in one_error_line(refused)
    assert snapshot(out) == before
    before = snapshot(out, skip=OWNED)
    ok(envbuild("dockerfile", spec, "-o", out, "--lock-dir", work / "lock", "--force", cwd=work))
    assert snapshot(out, skip=OWNED) == before
    assert not [p for p in out.iterdir() if p.name.startswith((".envbuild-stage-", "Dockerfile.", "envbuild."))]


def test_its_own_output_is_replaced_without_force(project, tmp_path):
    """A folder that holds only what envbuild wrote there is envbuild's to update: each run
    replaces the entries the record proves, and leaves nothing behind."""
    work, spec = project
    out = tmp_path / "ctx"
    ok(envbuild("dockerfile", spec, "-o", out, "--lock-dir", work / "lock", cwd=work))
    first = json.loads((out / ".envbuild-outputs").read_text())["entries"]
    ok(envbuild("dockerfile", spec, "-o", out, "--lock-dir", work / "lock", cwd=work))
    assert json.loads((out / ".envbuild-outputs").read_text())["entries"] != first  # new inodes
    assert sorted(p.name for p in out.iterdir()) == [".envbuild-outputs", "Dockerfile", "envbuild"]


def _forged_list(out: Path) -> None:
    """The older record format, naming the user's files as envbuild's."""
    (out / ".envbuild-outputs").write_text(json.dumps({"written_by": "envbuild", "owned": ["notes.txt", "src"]}))


def _forged_entries(out: Path) -> None:
    (out / ".envbuild-outputs").write_text(json.dumps({"written_by": "envbuild", "entries": {
        "notes.txt": "0" * 64, "src": "0" * 64, "Dockerfile": "0" * 64, "envbuild": "0" * 64}}))


def _copied_from_elsewhere(out: Path, donor: Path) -> None:
    """A context and its record copied with `cp -a` from another folder (new inodes)."""
    for name in OWNED:
        source = donor / name
        if source.is_dir():
            shutil.copytree(source, out / name, copy_function=shutil.copy2)
        else:
            shutil.copy2(source, out / name)


def _edited(out: Path, donor: Path) -> None:
    """envbuild's own output, then the user edits the Dockerfile."""
    _copied_from_elsewhere(out, donor)
    for path in (out / "Dockerfile", out / "envbuild"):
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    (out / "Dockerfile").write_text("FROM scratch\n# the user's own\n")
    (out / "envbuild").mkdir()
    (out / "envbuild" / "__init__.py").write_text("print('the project package')\n")


def _links(out: Path, outside: Path) -> None:
    (outside / "secret.txt").write_text("keep me\n")
    (outside / "pkg").mkdir()
    (outside / "pkg" / "mod.py").write_text("x = 1\n")
    os.symlink(outside / "secret.txt", out / "Dockerfile")
    os.symlink(outside / "pkg", out / "envbuild")
    os.symlink(outside / "secret.txt", out / ".envbuild-outputs")


def _special(out: Path, _outside: Path) -> None:
    os.mkfifo(out / "Dockerfile")
    os.mkfifo(out / ".envbuild-outputs")
    (out / "envbuild").mkdir()
    os.mkfifo(out / "envbuild" / "plan.json")


RECORD = ".envbuild-outputs"
HOSTILE = {
    # case: (how the folder is prepared, the owned names envbuild must move aside with --force)
    "forged record (old format) naming notes.txt and src": (lambda out, donor, outside: _forged_list(out), {RECORD}),
    "forged record (fingerprints) naming notes.txt, src and the owned names":
        (lambda out, donor, outside: _forged_entries(out), set()),  # a record only: replaced, nothing else touched
    "the project's own Dockerfile and envbuild/ package":
        (lambda out, donor, outside: _edited(out, donor), {"Dockerfile", "envbuild"}),
    "an output copied with its record from another folder":
        (lambda out, donor, outside: _copied_from_elsewhere(out, donor), {"Dockerfile", "envbuild"}),
    "symlinks at Dockerfile, envbuild/ and the record":
        (lambda out, donor, outside: _links(out, outside), {"Dockerfile", "envbuild", RECORD}),
    "FIFOs at Dockerfile, the record and inside envbuild/":
        (lambda out, donor, outside: _special(out, outside), {"Dockerfile", "envbuild", RECORD}),
}


@pytest.fixture(scope="module")
def donor(project, tmp_path_factory) -> Path:
    """A folder envbuild wrote a context into."""
    work, spec = project
    out = tmp_path_factory.mktemp("donor") / "ctx"
    ok(envbuild("dockerfile", spec, "-o", out, "--lock-dir", work / "lock", cwd=work))
    return out


@pytest.mark.parametrize("case", list(HOSTILE))
def test_hostile_output_folders_lose_nothing(project, donor, tmp_path, case):
    """Without --force: one line, exit 2, the folder as it was. With --force: the user's
    files untouched, the owned names envbuild did not write moved aside whole (one line
    each saying where), never deleted, and nothing followed through a link."""
    work, spec = project
    prepare, moved = HOSTILE[case]
    out, outside = tmp_path / "ctx", tmp_path / "outside"
    outside.mkdir()
    out.mkdir()
    (out / "notes.txt").write_text("my notes\n")
    (out / "src").mkdir()
    (out / "src" / "train.py").write_text("print('train')\n")
    prepare(out, donor, outside)
    before, before_outside = listing(out), snapshot(outside)

    refused = envbuild("dockerfile", spec, "-o", out, "--lock-dir", work / "lock", cwd=work)
    assert refused.returncode == 2 and "did not write" in one_error_line(refused)
    assert listing(out) == before and snapshot(outside) == before_outside

    forced = ok(envbuild("dockerfile", spec, "-o", out, "--lock-dir", work / "lock", "--force", cwd=work))
    said = [line for line in forced.stderr.splitlines() if " aside to " in line]
    assert sorted(said) == sorted(f"envbuild: warning: moved {out / name}, which envbuild did not write, aside to "
                                  f"{out / name}.before-envbuild" for name in moved)
    after = listing(out)
    for rel, kind in before.items():
        top, _, rest = rel.partition("/")
        if top in moved:
            assert after[f"{top}.before-envbuild" + (f"/{rest}" if rest else "")] == kind, rel
        elif top not in OWNED:
            assert after[rel] == kind, rel
    assert snapshot(outside) == before_outside
    assert (out / "Dockerfile").is_file() and not (out / "Dockerfile").is_symlink()
    assert json.loads((out / RECORD).read_text())["entries"].keys() == {"Dockerfile", "envbuild"}


def test_a_second_move_aside_takes_a_free_name(project, tmp_path):
    work, spec = project
    out = tmp_path / "ctx"
    out.mkdir()
    for text in ("first\n", "second\n"):
        (out / "Dockerfile").write_text(text)
        forced = ok(envbuild("dockerfile", spec, "-o", out, "--lock-dir", work / "lock", "--force", cwd=work))
        (out / "Dockerfile").unlink()
    assert (out / "Dockerfile.before-envbuild").read_text() == "first\n"
    assert (out / "Dockerfile.before-envbuild-2").read_text() == "second\n"
    assert f"aside to {out / 'Dockerfile.before-envbuild-2'}" in forced.stderr


def listing(folder: Path) -> dict[str, str]:
    """relative path -> what it is (file content hash, link target, fifo, folder), without
    opening pipes or following links."""
    found = {}
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            path = Path(root) / name
            rel = path.relative_to(folder).as_posix()
            mode = path.lstat().st_mode
            if path.is_symlink():
                found[rel] = f"link:{os.readlink(path)}"
            elif stat.S_ISFIFO(mode):
                found[rel] = "fifo"
            elif stat.S_ISDIR(mode):
                found[rel] = "dir"
            else:
                found[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def test_spec_folder_as_output_keeps_the_spec_and_the_lock(project):
    work, spec = project
    before = snapshot(work, skip=OWNED)
    # `-o .` next to the lock folder it builds from: never, not even with --force
    refused = envbuild("dockerfile", spec, "-o", ".", "--lock-dir", "lock", "--force", cwd=work)
    assert refused.returncode == 2 and "holds the lock folder" in one_error_line(refused)
    refused = envbuild("dockerfile", spec, "-o", ".", cwd=work)
    assert refused.returncode == 2 and "did not write" in one_error_line(refused)
    assert snapshot(work) == before
    try:
        ok(envbuild("dockerfile", spec, "-o", ".", "--force", cwd=work))
        assert (work / "Dockerfile").is_file()
        assert snapshot(work, skip=OWNED) == before  # spec, channel, lock folder: byte-identical
    finally:
        for name in OWNED:
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
    ("/dev/full", "not a folder"),
    ("fifo", "not a folder"),
])
def test_folders_that_can_never_be_outputs(project, output, words):
    work, spec = project
    if output == "fifo":
        os.mkfifo(work / "fifo")
    before = snapshot(work)
    force = () if output == "/proc/1" else ("--force",)  # --force never makes these acceptable
    proc = envbuild("dockerfile", spec, "-o", output, "--lock-dir", "lock", *force, cwd=work)
    assert proc.returncode == 2
    assert words in one_error_line(proc)
    assert snapshot(work) == before
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)
    if output == "fifo":
        assert stat.S_ISFIFO((work / "fifo").lstat().st_mode)
        (work / "fifo").unlink()


def test_lock_folder_inside_the_output_is_refused(project, tmp_path):
    work, spec = project
    (tmp_path / "lock").mkdir()
    for path in (work / "lock").iterdir():
        (tmp_path / "lock" / path.name).write_bytes(path.read_bytes())
    before = snapshot(tmp_path)
    proc = envbuild("dockerfile", spec, "-o", tmp_path, "--lock-dir", tmp_path / "lock", "--force", cwd=work)
    assert proc.returncode == 2 and "holds the lock folder" in one_error_line(proc)
    assert snapshot(tmp_path) == before
