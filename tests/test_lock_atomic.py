"""A lock is replaced as one unit: `envbuild lock` SIGKILLed at every step of writing leaves
the old set or the new set (never a mix), `lock --check` agrees, stale staging folders are
cleaned by the next run, and two concurrent locks into one folder are serialised.

The runs are the real CLI (`envbuild.cli.main`, forked from a warm helper so that each
costs well under a second) against local channels; the kill points come from the
ENVBUILD_FAULT_STEP hook in envbuild/lock/folder.py.
"""
from __future__ import annotations

import json
import select
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from envbuild.lock import folder
from envbuild.lock.check import check
from envbuild.resolver import resolve
from envbuild.spec import load_spec
from lock_channels import repodata_channels


# dozens of real solves per test: kill sweeps and concurrent writers
pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent
SPEC = """\
name: atomic
frameworks: {{pytorch: "2.1.2"}}
cuda: "12.1"
python: "3.10"
target: {{driver: "{driver}", gpus: ["A100-80GB"], platform: linux-64}}
installer: conda
channels: [./channels/pytorch, ./channels/nvidia, ./channels/main]
"""
WAITED = "waiting for another envbuild run"


@pytest.fixture(scope="module")
def run():
    """run(*jobs) -> answers; the jobs of one call run at the same time."""
    helper = subprocess.Popen([sys.executable, str(HERE / "lock_forks.py")], cwd=HERE,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def run_jobs(*jobs: dict) -> list[dict]:
        helper.stdin.write(json.dumps(list(jobs)) + "\n")
        helper.stdin.flush()
        ready, _, _ = select.select([helper.stdout], [], [], 120)
        assert ready, "the envbuild runs did not finish within 120 s"
        return json.loads(helper.stdout.readline())

    yield run_jobs
    helper.stdin.close()
    helper.wait(30)


@pytest.fixture(scope="module")
def project(tmp_path_factory, run):
    """Spec A and spec B (another driver: every file of the lock differs) and their locks."""
    root = tmp_path_factory.mktemp("atomic")
    repodata_channels(root / "channels")
    (root / "a.yaml").write_text(SPEC.format(driver="535.104.05"))
    (root / "b.yaml").write_text(SPEC.format(driver="550.54.14"))
    sets = {}
    for name in ("a", "b"):
        (answer,) = run(lock_job(root, name, root / f"ref-{name}"))
        assert answer["status"] == 0, answer["stderr"]
        sets[name] = lock_set(root / f"ref-{name}")
    assert set(sets["a"]) == set(sets["b"]) and all(sets["a"][n] != sets["b"][n] for n in sets["a"])
    specs = {name: load_spec(root / f"{name}.yaml") for name in ("a", "b")}
    return {"root": root, "sets": sets, "specs": {n: (s, resolve(s)) for n, s in specs.items()}}


def lock_job(root: Path, spec: str, out: Path, *extra: str, **env: str) -> dict:
    return {"argv": ["lock", f"{spec}.yaml", "-o", str(out), *extra], "cwd": str(root), "env": env}


def lock_set(path: Path) -> dict[str, bytes]:
    """The lock as a reader sees it: every lockfile and the hash record."""
    return {p.name: p.read_bytes() for p in path.iterdir()
            if p.is_file() and (folder.is_lock_file(p.name) or p.name == folder.RECORD)}


def leftovers(path: Path) -> list[str]:
    """Staging and commit folders in or beside the lock folder."""
    names = [p.name for p in path.iterdir() if p.name.startswith(folder.STAGE) or p.name == folder.COMMIT]
    return names + [p.name for p in path.parent.iterdir() if folder.STAGE in p.name]


def which(project, state: dict[str, bytes]) -> str | None:
    return next((name for name, files in project["sets"].items() if files == state), None)


def agrees(project, run, target: Path, state_name: str | None) -> None:
    """`lock --check` (the CLI, for spec B) and check() (for spec A) call the folder up to
    date exactly when it holds that spec's whole set."""
    (answer,) = run(lock_job(project["root"], "b", target, "--check"))
    assert answer["status"] == (0 if state_name == "b" else 1), answer["stdout"] + answer["stderr"]
    spec, resolution = project["specs"]["a"]
    assert (not check(spec, resolution, None, target)) == (state_name == "a")


@pytest.mark.parametrize("layout", ["own folder", "shared folder"])
def test_kill_sweep_leaves_the_old_or_the_new_set(project, run, tmp_path, layout):
    """SIGKILL `envbuild lock b.yaml` at each step of replacing lock A by lock B."""
    results = []
    for step in range(1, 60):
        work = tmp_path / f"step-{step}"
        target = work / "lock" if layout == "own folder" else work
        target.mkdir(parents=True)
        if layout == "shared folder":  # a project folder: the lock next to the user's files
            (work / "README.md").write_text("the user's file\n")
        for name, data in project["sets"]["a"].items():
            (target / name).write_bytes(data)
        (answer,) = run(lock_job(project["root"], "b", target, ENVBUILD_FAULT_STEP=str(step), ENVBUILD_FAULT_TRACE="1"))
        if answer["status"] == 0:
            break
        assert answer["status"] == -9, answer["stderr"]
        killed_at = answer["stderr"].strip().splitlines()[-1].split(": ", 2)[-1]
        state = which(project, lock_set(target))
        outcome = state
        if state is None:
            # Only a shared folder can be caught mid-switch, and only after its commit point:
            # the raw files are refused, and the first envbuild run that reads the folder
            # (here `lock --check`) rolls the switch forward, so every reader sees set b.
            assert layout == "shared folder" and (target / folder.COMMIT).is_dir(), (step, killed_at)
            assert any("interrupted" in p for p in folder.verify(target))
            agrees(project, run, target, "b")
            state, outcome = which(project, lock_set(target)), "mid-switch, rolled forward to b by the reader"
            assert state == "b"
        agrees(project, run, target, state)
        if layout == "shared folder":
            assert (work / "README.md").read_text() == "the user's file\n"
        results.append((step, killed_at, outcome))
        shutil.rmtree(work)
    else:
        pytest.fail("the lock never finished without a kill")
    print(f"\n{layout}: {len(results)} kill points")
    for step, killed_at, outcome in results:
        print(f"  step {step:2d} killed at {killed_at!r:32} -> {outcome}")
    assert len(results) >= 10
    outcomes = {outcome for _, _, outcome in results}
    assert {"a", "b"} <= outcomes  # the sweep covered both sides of the switch


def test_next_run_removes_staging_folders_of_killed_runs(project, run, tmp_path):
    for layout, target in (("own", tmp_path / "own" / "lock"), ("shared", tmp_path / "shared")):
        target.mkdir(parents=True)
        (target.parent / "keep.txt").write_text("mine\n")
        (answer,) = run(lock_job(project["root"], "a", target, ENVBUILD_FAULT_STEP="5"))  # killed while writing
        assert answer["status"] == -9
        assert leftovers(target), layout
        (answer,) = run(lock_job(project["root"], "b", target))
        assert answer["status"] == 0, answer["stderr"]
        assert leftovers(target) == [] and which(project, lock_set(target)) == "b"
        assert (target.parent / "keep.txt").read_text() == "mine\n"


@pytest.mark.parametrize("layout, trials", [("own folder", 20), ("shared folder", 6)])
def test_two_concurrent_locks_into_one_folder(project, run, tmp_path, layout, trials):
    """Lock A and lock B started together, many times: the writes never interleave, the
    folder ends with one whole set, check agrees, and the second writer says it waited."""
    target = tmp_path / "lock"
    target.mkdir()
    if layout == "shared folder":
        (target / "README.md").write_text("the user's file\n")
    waited = []
    for _ in range(trials):
        hold = {"ENVBUILD_FAULT_HOLD": "0.1"}  # each writer holds its sealed set a moment: they meet
        answers = run(lock_job(project["root"], "a", target, **hold), lock_job(project["root"], "b", target, **hold))
        assert [a["status"] for a in answers] == [0, 0], [a["stderr"] for a in answers]
        state = which(project, lock_set(target))
        assert state in ("a", "b") and leftovers(target) == []
        assert folder.verify(target) == []
        spec, resolution = project["specs"][state]
        assert check(spec, resolution, None, target) == []
        waited.append(sum(WAITED in a["stderr"] for a in answers))
    print(f"\n{layout}: writers that waited, per trial: {waited}")
    assert all(n <= 1 for n in waited)  # never both
    assert sum(waited) >= trials // 2  # the hold makes them meet in most trials; the later one says so


def test_a_users_file_with_a_lock_name_is_never_removed(project, run, tmp_path):
    """A project folder with the user's own requirements.lock: `envbuild lock -o .` for a
    conda-only spec leaves it alone (only files its own record lists are ever removed), and
    `--check` points at it, since a reader of the folder would take it for part of the lock."""
    (tmp_path / "requirements.lock").write_text("flask==3.0.0\n")
    for spec in ("a", "b"):
        (answer,) = run(lock_job(project["root"], spec, tmp_path))
        assert answer["status"] == 0, answer["stderr"]
    assert (tmp_path / "requirements.lock").read_text() == "flask==3.0.0\n"
    (answer,) = run(lock_job(project["root"], "b", tmp_path, "--check"))
    assert answer["status"] == 1 and "requirements.lock is not part of the recorded lock" in answer["stdout"]
