"""The operating system says no: disk full (a tiny tmpfs), file-size limit (`ulimit -f`),
a read-only bind mount. Each ends in one line naming the path and what to do, exit 3,
and the previous outputs byte-identical. Then hostile spec inputs (devices, a FIFO, a
folder, a 50 MB file): exit 2 within 2 s, memory bounded.

The mounts need root (CI runs the suite as root); a machine where mounting fails makes
these tests fail with the reason, never skip."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lock_channels import repodata_channels
from test_cli_image_e2e import write_spec
from test_outputs import snapshot

ENVBUILD = shutil.which("envbuild")
SPEC = """\
name: faults
frameworks: {pytorch: "2.1.2"}
cuda: "12.1"
python: "3.10"
target: {driver: "535.104.05", gpus: ["A100-80GB"], platform: linux-64}
installer: conda
channels: [./channels/pytorch, ./channels/nvidia, ./channels/main]
"""


def envbuild(*args, cwd: Path, shell_prefix: str = "") -> subprocess.CompletedProcess:
    command = [ENVBUILD, *map(str, args)]
    if shell_prefix:  # e.g. `ulimit -f 8;` applies to envbuild alone
        command = ["bash", "-c", f"{shell_prefix} exec \"$@\"", "envbuild", *command]
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=300)


def one_line_exit_3(proc: subprocess.CompletedProcess, *words: str) -> str:
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    errors = [line for line in lines if line.startswith("envbuild: error: ")]
    assert len(errors) == 1 and lines[-1] == errors[0], proc.stderr  # progress lines may come first
    for word in words:
        assert word in errors[0], errors[0]
    return errors[0]


def mount(*args: str) -> None:
    done = subprocess.run(["mount", *args], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.fail(f"`mount {' '.join(args)}` failed ({done.stderr.strip()}): these tests need root "
                    "and permission to mount (run the suite as root, e.g. in the CI container)")


@pytest.fixture
def mounts():
    made: list[Path] = []
    yield made
    for path in reversed(made):
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("faults")
    repodata_channels(root / "channels")
    (root / "a.yaml").write_text(SPEC)
    (root / "b.yaml").write_text(SPEC.replace("535.104.05", "550.54.14"))
    return root


def lock_set(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}


@pytest.mark.slow
def test_disk_full(project, tmp_path, mounts):
    disk = tmp_path / "disk"
    disk.mkdir()
    mount("-t", "tmpfs", "-o", "size=1m", "tmpfs", str(disk))
    mounts.append(disk)
    assert envbuild("lock", "a.yaml", "-o", disk / "lock", cwd=project).returncode == 0
    before = lock_set(disk / "lock")
    with open(disk / "filler", "wb", buffering=0) as filler:  # fill the rest of the filesystem
        try:
            while True:
                filler.write(b"\0" * 4096)
        except OSError:
            pass
    proc = envbuild("lock", "b.yaml", "-o", disk / "lock", cwd=project)
    line = one_line_exit_3(proc, "No space left on device", str(disk / "lock"), "free space")
    print(f"\n{line}")
    assert lock_set(disk / "lock") == before  # the old lock, whole
    assert sorted(p.name for p in disk.iterdir()) == ["filler", "lock"]  # no staging left behind
    check = envbuild("lock", "a.yaml", "-o", disk / "lock", "--check", cwd=project)
    assert check.returncode == 0, check.stdout


@pytest.mark.slow
def test_file_size_limit(project, tmp_path):
    out = tmp_path / "lock"
    assert envbuild("lock", "a.yaml", "-o", out, cwd=project).returncode == 0
    before = lock_set(out)
    # conda-lock.yml is about 11 kB: past an 8 kB limit the write fails with EFBIG
    proc = envbuild("lock", "b.yaml", "-o", out, cwd=project, shell_prefix="ulimit -f 8;")
    line = one_line_exit_3(proc, "File too large", "ulimit -f")
    print(f"\n{line}")
    assert lock_set(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lock"]


@pytest.mark.slow
def test_read_only_folder(project, tmp_path, mounts):
    out = tmp_path / "ro"
    lock = out / "lock"
    assert envbuild("lock", "a.yaml", "-o", lock, cwd=project).returncode == 0
    spec = write_spec(tmp_path, "127.0.0.1:1/faults/app")
    assert envbuild("lock", spec, "-o", out / "ctx-lock", cwd=tmp_path).returncode == 0
    assert envbuild("dockerfile", spec, "-o", out / "ctx", "--lock-dir", out / "ctx-lock", cwd=tmp_path).returncode == 0
    before = snapshot(out)
    mount("--bind", str(out), str(out))
    mounts.append(out)
    mount("-o", "remount,bind,ro", str(out))

    proc = envbuild("lock", "b.yaml", "-o", lock, cwd=project)
    print("\n" + one_line_exit_3(proc, f"{lock}: Read-only file system", "writable"))
    proc = envbuild("dockerfile", spec, "-o", out / "ctx", "--lock-dir", out / "ctx-lock", cwd=tmp_path)
    print(one_line_exit_3(proc, "Read-only file system", str(out / "ctx"), "writable"))
    proc = envbuild("lock", "b.yaml", "-o", out / "new" / "lock", "--json", cwd=project)
    print(one_line_exit_3(proc, "Read-only file system"))
    assert '"kind": "environment"' in proc.stdout and '"exit_code": 3' in proc.stdout
    assert snapshot(out) == before


@pytest.mark.parametrize("kind", ["/dev/zero", "/dev/urandom", "fifo", "folder", "50 MB file", "link to /dev/zero",
                                  "stdin from /dev/zero"])
def test_special_spec_inputs_are_refused_at_once(tmp_path, kind):
    path = {"/dev/zero": "/dev/zero", "/dev/urandom": "/dev/urandom"}.get(kind, str(tmp_path / "spec.yaml"))
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "folder":
        os.mkdir(path)
    elif kind == "50 MB file":
        with open(path, "wb") as handle:
            for _ in range(50):
                handle.write(b"#" * (1024 * 1024))
    elif kind == "link to /dev/zero":
        os.symlink("/dev/zero", path)
    stdin = open("/dev/zero", "rb") if kind.startswith("stdin") else None
    args = ["resolve", "-" if stdin else path]
    # The child's own peak (VmHWM): wait4's ru_maxrss would include the peak it inherits from
    # this test process through fork and exec.
    hwm = tmp_path / "hwm"
    measured = ("import os, sys\nfrom envbuild.cli import main\ntry:\n    code = main(sys.argv[1:])\n"
                "finally:\n    open(os.environ['HWM'], 'w').write(next(line for line in open('/proc/self/status')"
                " if line.startswith('VmHWM')))\nsys.exit(code)\n")
    try:
        proc = subprocess.run([sys.executable, "-c", measured, *args], cwd=tmp_path, stdin=stdin or subprocess.DEVNULL,
                              capture_output=True, env={**os.environ, "HWM": str(hwm)}, timeout=30)
    finally:
        if stdin:
            stdin.close()
    err = proc.stderr.decode()
    peak_mib = int(hwm.read_text().split()[1]) / 1024
    print(f"\n{kind}: exit {proc.returncode}, peak {peak_mib:.0f} MiB: {err.strip()}")
    assert proc.returncode == 2, err
    assert len(err.strip().splitlines()) == 1 and err.startswith("envbuild: error: ")
    assert peak_mib < 64  # far below the input's size: nothing was read whole (the timeout above: a hang guard)
