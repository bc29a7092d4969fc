"""The command line leaves without tearing the interpreter down (envbuild.cli.leave): what
it printed must still arrive whole, with the exit code, and the atexit work must be done."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
BUFFERED = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}  # stdout buffered, as a user's shell runs it


def _fleet(tmp_path: Path, n: int = 100) -> Path:
    rows = yaml.safe_load((ROOT / "matrices" / "gpus.yaml").read_text())["gpus"]
    names = [r["name"] for r in rows][:n]
    targets = {f"t{i:03d}": {"gpu": name, "driver": "580.65.06", "scheduler": {"kind": "slurm", "partition": "gpu"}}
               for i, name in enumerate(names)}
    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump({"targets": targets}))
    return path


def test_whole_answer_arrives_through_a_file_and_a_pipe(tmp_path):
    fleet = _fleet(tmp_path)
    args = ["resolve", "--framework", "pytorch", "--fleet", str(fleet)]
    argv = [sys.executable, "-m", "envbuild", *args]
    piped = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, env=BUFFERED)
    with open(tmp_path / "out.txt", "w") as out:  # a file is block-buffered: only a flush writes the tail
        to_file = subprocess.run(argv, stdout=out, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=BUFFERED)
    written = (tmp_path / "out.txt").read_text()
    assert len(written) > 16 * 1024  # more than one write buffer
    assert piped.stdout == written
    assert written.rstrip().splitlines()[-1].startswith("verdict: ")  # the summary, printed last
    assert piped.returncode == to_file.returncode == (0 if "verdict: ok" in written else 1)
    with_json = subprocess.run(argv + ["--json"], capture_output=True, text=True, cwd=ROOT, env=BUFFERED)
    assert len(json.loads(with_json.stdout)["targets"]) == 100
    assert with_json.returncode == piped.returncode


LEAVE = """
import atexit, pathlib, sys, threading, time
from envbuild.cli import leave
out = pathlib.Path(sys.argv[1])
atexit.register(lambda: (out / "atexit").write_text("ran"))
if sys.argv[2] == "thread":  # a non-daemon thread still working: the exit must wait for it
    threading.Thread(target=lambda: (time.sleep(0.3), (out / "thread").write_text("done"))).start()
sys.stdout.write("the tail that sits in the buffer")
sys.stderr.write("and on stderr")
leave(3)
"""


def test_leave_flushes_runs_atexit_and_waits_for_threads(tmp_path):
    for mode in ("plain", "thread"):
        done = subprocess.run([sys.executable, "-c", LEAVE, str(tmp_path), mode], capture_output=True, text=True,
                              cwd=ROOT, env=BUFFERED)
        assert (done.returncode, done.stdout, done.stderr) == (3, "the tail that sits in the buffer", "and on stderr")
        assert (tmp_path / "atexit").read_text() == "ran"
    assert (tmp_path / "thread").read_text() == "done"


def test_error_exit_code_and_atexit_work_survive(tmp_path):
    env = {**BUFFERED, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    bad = subprocess.run([sys.executable, "-m", "envbuild", "resolve", "--gpu", "A100", "--driver", "not-a-driver"],
                         capture_output=True, text=True, cwd=ROOT, env=env)
    assert bad.returncode == 2
    # every mistake is reported, one line each: the driver, and that nothing names what to resolve
    lines = bad.stderr.splitlines()
    assert len(lines) == 2 and all(line.startswith("envbuild: error: ") for line in lines), lines
    # the dataclass code cache is written by an atexit handler
    assert list((tmp_path / "cache" / "envbuild").glob("dataclass-code-*.marshal"))


def test_a_profiler_still_gets_to_write_its_results(tmp_path):
    out = tmp_path / "resolve.prof"
    done = subprocess.run([sys.executable, "-m", "cProfile", "-o", str(out), "-m", "envbuild", "resolve",
                           str(ROOT / "recipes" / "cupy.yaml")], capture_output=True, text=True, cwd=ROOT, env=BUFFERED)
    assert done.returncode == 0, done.stderr
    assert out.stat().st_size > 0
