"""Every place envbuild writes keeps what the user had there: the lock folder (`lock -o`,
`--lock-dir`) replaces only files its record proves envbuild wrote, a `--lock-dir` full of
other files is never written into, a file named with `-o` that is a link, device or pipe is
written through or refused (never replaced), and every file and folder envbuild writes gets
the user's umask. Real CLI, real solves against a local channel of tiny conda archives."""
from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import zipfile
from pathlib import Path

import pytest

from cli_support import in_process as envbuild
from test_cli_image_e2e import ENVBUILD, ok, one_error_line
from test_outputs import listing, project  # noqa: F401 - project is a fixture


# --- the lock folder ------------------------------------------------------------------------

def _users_lockfile(lock: Path, outside: Path) -> None:
    (lock / "conda-lock.yml").write_text("# the project's own conda-lock file\n")


def _edited_by_hand(lock: Path, outside: Path) -> None:
    """envbuild's lock, then an edit: the record no longer proves the file."""
    path = lock / "conda-linux-64.lock"
    path.write_text(path.read_text() + "# pinned by hand\n")


def _link_outside(lock: Path, outside: Path) -> None:
    (outside / "conda-lock.yml").write_text("elsewhere\n")
    (lock / "conda-lock.yml").unlink()
    os.symlink(outside / "conda-lock.yml", lock / "conda-lock.yml")


def _fifo_lockfile(lock: Path, outside: Path) -> None:
    (lock / "conda-linux-64.lock").unlink()
    os.mkfifo(lock / "conda-linux-64.lock")


def _fifo_record(lock: Path, outside: Path) -> None:
    (lock / ".envbuild-lock.json").unlink()
    os.mkfifo(lock / ".envbuild-lock.json")


def _record_links_outside(lock: Path, outside: Path) -> None:
    (outside / "shadow").write_text("root:$6$secret:19000:0:99999:7:::\n")
    (lock / ".envbuild-lock.json").unlink()
    os.symlink(outside / "shadow", lock / ".envbuild-lock.json")


REFUSED_LOCK_FOLDERS = {
    "the project's own conda-lock.yml": (_users_lockfile, "conda-lock.yml"),
    "a lockfile edited by hand": (_edited_by_hand, "conda-linux-64.lock"),
    "a lockfile that links outside": (_link_outside, "conda-lock.yml"),
    "a FIFO named like a lockfile": (_fifo_lockfile, "conda-linux-64.lock"),
    "a FIFO as the record": (_fifo_record, ".envbuild-lock.json"),
    "the record linking to a password file": (_record_links_outside, ".envbuild-lock.json"),
}


@pytest.mark.parametrize("case", list(REFUSED_LOCK_FOLDERS))
def test_lock_never_replaces_a_file_it_cannot_prove_it_wrote(project, tmp_path, case):
    """One line, exit 2, before the solve (no "locking" work, no hang on a pipe), the folder
    and whatever its links point at exactly as they were."""
    work, spec = project
    prepare, named = REFUSED_LOCK_FOLDERS[case]
    lock, outside = tmp_path / "lock", tmp_path / "outside"
    outside.mkdir()
    ok(envbuild("lock", spec, "-o", lock, cwd=work))
    prepare(lock, outside)
    before, before_outside = listing(lock), listing(outside)
    proc = envbuild("lock", spec, "-o", lock, cwd=work)
    assert proc.returncode == 2
    line = one_error_line(proc)
    assert named in line and "envbuild did not write" in line and "secret" not in proc.stderr
    assert listing(lock) == before and listing(outside) == before_outside


@pytest.mark.parametrize("name, check, dockerfile", [
    # the lock's own file: both refuse it by name
    ("conda-lock.yml", (2, "is not a regular file"), (2, "is not a regular file")),
    # a name this conda lock does not write: --check reports it, the stale folder is not rewritten
    ("requirements.lock", (1, "is not part of the recorded lock"), (2, "no part of a lock (requirements.lock)")),
])
def test_a_pipe_in_place_of_a_lockfile_is_never_read(project, tmp_path, name, check, dockerfile):
    """`lock --check` and `dockerfile --lock-dir` on a folder where a lockfile's name is a
    FIFO: an answer at once (a read would wait for a writer for ever), the FIFO left there."""
    work, spec = project
    lock = tmp_path / "lock"
    ok(envbuild("lock", spec, "-o", lock, cwd=work))
    (lock / name).unlink(missing_ok=True)
    os.mkfifo(lock / name)
    before = listing(lock)
    for args, (code, words) in ((("lock", spec, "-o", lock, "--check"), check),
                                (("dockerfile", spec, "-o", tmp_path / "ctx", "--lock-dir", lock), dockerfile)):
        proc = envbuild(*args, cwd=work)
        assert proc.returncode == code, proc.stderr
        assert words in (one_error_line(proc) if code == 2 else proc.stdout)
    assert listing(lock) == before


def test_a_forged_record_removes_nothing(project, tmp_path):
    """A record copied from elsewhere or forged, naming the user's files in the lock folder:
    the new lock replaces only what it proves, and leaves the rest (even lock-named files the
    new set does not write) as they were."""
    work, spec = project
    lock = tmp_path / "lock"
    lock.mkdir()
    (lock / "requirements-dev.lock").write_text("flask==3.0.0\n")  # a Rye project's own
    (lock / "notes.txt").write_text("mine\n")
    (lock / ".envbuild-lock.json").write_text(json.dumps({"files": {
        "requirements-dev.lock": "0" * 64, "notes.txt": "0" * 64, "conda-linux-aarch64.lock": "0" * 64}}))
    (lock / "conda-linux-aarch64.lock").write_text("# an older lock the user keeps\n")
    kept = {name: (lock / name).read_bytes() for name in ("requirements-dev.lock", "notes.txt",
                                                          "conda-linux-aarch64.lock")}
    ok(envbuild("lock", spec, "-o", lock, cwd=work))
    assert {name: (lock / name).read_bytes() for name in kept} == kept
    assert json.loads((lock / ".envbuild-lock.json").read_text())["files"].keys() == {
        "conda-lock.yml", "conda-linux-64.lock"}


@pytest.mark.parametrize("output, words", [
    ("/", "filesystem root"),
    ("/dev/full", "not a folder"),
    ("spec-file", "not a folder"),
])
def test_lock_output_that_is_no_folder_is_refused(project, output, words):
    work, spec = project
    target = str(spec) if output == "spec-file" else output
    before = Path(spec).read_bytes()
    proc = envbuild("lock", spec, "-o", target, cwd=work)
    assert proc.returncode == 2 and words in one_error_line(proc)
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode) and Path(spec).read_bytes() == before


def test_lock_dir_full_of_other_files_is_never_written(project, tmp_path):
    """`--lock-dir` naming a folder of other files (a project root, /etc): its lock is read
    when current, but a missing or stale one is never written there; `lock -o` is the one
    door for that."""
    work, spec = project
    etc = tmp_path / "etc"
    etc.mkdir()
    (etc / "passwd").write_text("root:x:0:0:root:/root:/bin/bash\n")
    (etc / "hosts").write_text("127.0.0.1 localhost\n")
    before = listing(etc)
    proc = envbuild("dockerfile", spec, "-o", tmp_path / "ctx", "--lock-dir", etc, cwd=work)
    assert proc.returncode == 2
    line = one_error_line(proc)
    assert f"--lock-dir {etc}" in line and "hosts, passwd" in line and f"envbuild lock -o {etc}" in line
    assert listing(etc) == before and not (tmp_path / "ctx").exists()

    # The explicit door: `lock -o` writes the lock beside the files; then --lock-dir reads it.
    ok(envbuild("lock", spec, "-o", etc, cwd=work))
    ok(envbuild("dockerfile", spec, "-o", tmp_path / "ctx", "--lock-dir", etc, cwd=work))
    assert {k: v for k, v in listing(etc).items() if k in before} == before


def test_lock_dir_of_its_own_is_created_and_rewritten(project, tmp_path):
    work, spec = project
    lock = tmp_path / "new-lock"
    ok(envbuild("dockerfile", spec, "-o", tmp_path / "ctx", "--lock-dir", lock, "--force", cwd=work))
    assert (lock / "conda-lock.yml").is_file()


# --- files named with -o ------------------------------------------------------------------

def _export(out: str, cwd: Path) -> subprocess.CompletedProcess:
    return envbuild("export", "k8s", "--image", "registry.example/team/app:1", "-o", out, cwd=cwd)


def _init(out: str, cwd: Path) -> subprocess.CompletedProcess:
    return envbuild("init", "-o", out, cwd=cwd)


WRITERS = {"export -o": _export, "init -o": _init}


@pytest.mark.parametrize("writer", list(WRITERS))
def test_a_link_is_followed_and_kept(writer, tmp_path):
    (tmp_path / "real").mkdir()
    os.symlink("real/job.yaml", tmp_path / "job.yaml")
    ok(WRITERS[writer]("job.yaml", tmp_path))
    assert (tmp_path / "job.yaml").is_symlink() and (tmp_path / "real" / "job.yaml").stat().st_size > 0


@pytest.mark.parametrize("writer", list(WRITERS))
def test_devices_and_pipes_are_written_through_never_replaced(writer, tmp_path):
    # /dev/null takes it; /dev/full says the disk is full (exit 3); both stay devices
    ok(WRITERS[writer]("/dev/null", tmp_path))
    full = WRITERS[writer]("/dev/full", tmp_path)
    assert full.returncode == 3 and "/dev/full: No space left on device" in one_error_line(full)
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode) and stat.S_ISCHR(os.stat("/dev/full").st_mode)
    # a pipe with a reader gets the text; one without is refused at once, not waited on
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    refused = WRITERS[writer](str(fifo), tmp_path)
    assert refused.returncode == 2 and "nobody reads" in one_error_line(refused)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # a reader that is there before the write
    try:
        ok(WRITERS[writer](str(fifo), tmp_path))
        text = os.read(reader, 1 << 20)  # a job definition or a spec fits the pipe's buffer
    finally:
        os.close(reader)
    assert text and stat.S_ISFIFO(fifo.lstat().st_mode)
    # stdout through /dev/stdout (a pipe here)
    shown = subprocess.run([ENVBUILD, *(["export", "k8s", "--image", "x/y:1"] if writer.startswith("export")
                                        else ["init"]), "-o", "/dev/stdout"],
                           capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert shown.returncode == 0 and ("kind: Job" in shown.stdout or "frameworks:" in shown.stdout)


@pytest.mark.parametrize("writer", list(WRITERS))
@pytest.mark.parametrize("target, words", [(".", "is a folder"), ("/dev/loop-block", "is a block device")])
def test_folders_and_block_devices_are_refused(writer, target, words, tmp_path):
    if target == "/dev/loop-block":
        target = str(tmp_path / "block")
        os.mknod(target, stat.S_IFBLK | 0o600, os.makedev(7, 200))  # a loop device number: never opened
    proc = WRITERS[writer](target, tmp_path)
    assert proc.returncode == 2 and words in one_error_line(proc)
    if target != ".":
        assert stat.S_ISBLK(os.lstat(target).st_mode)


# --- the umask ---------------------------------------------------------------------------

@pytest.mark.parametrize("mask", [0o022, 0o027, 0o077])
def test_every_written_file_gets_the_umask(project, tmp_path, mask):
    """init, export -o, lock -o and dockerfile -o (its record included): files 0666 and
    folders 0777, less the umask, as any tool that creates files gives them."""
    work, spec = project

    def under_umask(*args):
        return subprocess.run([ENVBUILD, *map(str, args)], capture_output=True, text=True, cwd=work, timeout=300,
                              preexec_fn=lambda: os.umask(mask))

    out = tmp_path / "out"
    out.mkdir()
    for args in (("init", "-o", out / "envbuild.yaml"),
                 ("export", "k8s", "--image", "x/y:1", "-o", out / "job.yaml"),
                 ("lock", spec, "-o", out / "lock"),
                 ("dockerfile", spec, "-o", out / "ctx", "--lock-dir", out / "lock")):
        ok(under_umask(*args))
    wrong = {}
    for root, dirs, files in os.walk(out):
        for name in dirs + files:
            path = Path(root) / name
            if path.lstat().st_nlink > 1 and not path.is_dir():
                continue  # a hard link to the user's own archive: its mode is that file's
            mode = stat.S_IMODE(path.lstat().st_mode)
            expected = (0o777 if path.is_dir() else 0o666) & ~mask
            if mode != expected:
                wrong[path.relative_to(out).as_posix()] = oct(mode)
    assert not wrong, (oct(mask), wrong)


# --- the wheelhouse ----------------------------------------------------------------------

PIP_SPEC = """\
name: wheelhouse-guard
cuda: "11.8"
python: "3.11"
target: {driver: "550.54.15", gpus: ["A100"], platform: linux-64}
installer: pip
base_image: rapidsai/base:24.08-cuda11.8-py3.11
packages: {pip: ["einops==0.7.0"]}
"""
EINOPS = "einops-0.7.0-py3-none-any.whl"


def test_wheelhouse_never_replaces_a_file_in_the_way(tmp_path, wheelhouse):
    """A file named like the locked wheel that is not it (the user's own build, a link to
    somewhere else) is moved aside whole, said in one line; pip never gets to delete it. A
    target that cannot be a wheelhouse is refused before the lock (real PyPI)."""
    (tmp_path / "spec.yaml").write_text(PIP_SPEC)
    for target, words in (("/dev/full", "not a folder"), ("/", "filesystem root"), ("spec.yaml", "not a folder")):
        proc = envbuild("wheelhouse", "spec.yaml", "-o", target, "--lock-dir", "lock", cwd=tmp_path)
        assert proc.returncode == 2 and words in one_error_line(proc) and "locking" not in proc.stderr
    assert not (tmp_path / "lock").exists() and stat.S_ISCHR(os.stat("/dev/full").st_mode)

    wh, outside = tmp_path / "wh", tmp_path / "outside"
    shutil.copytree(wheelhouse, wh)  # the installer's own wheels, as a mirror would hold them
    outside.mkdir()
    (wh / EINOPS).write_text("the user's own build\n")
    ok(envbuild("wheelhouse", "spec.yaml", "-o", wh, "--lock-dir", "lock", "-q", cwd=tmp_path))
    assert (wh / f"{EINOPS}.before-envbuild").read_text() == "the user's own build\n"
    assert zipfile.is_zipfile(wh / EINOPS)

    (outside / "mine.whl").write_text("elsewhere\n")
    (wh / EINOPS).unlink()
    os.symlink(outside / "mine.whl", wh / EINOPS)
    proc = ok(envbuild("wheelhouse", "spec.yaml", "-o", wh, "--lock-dir", "lock", "-q", cwd=tmp_path))
    assert f"aside to {wh / EINOPS}.before-envbuild-2" in proc.stderr
    assert os.readlink(wh / f"{EINOPS}.before-envbuild-2") == str(outside / "mine.whl")
    assert (outside / "mine.whl").read_text() == "elsewhere\n" and zipfile.is_zipfile(wh / EINOPS)
