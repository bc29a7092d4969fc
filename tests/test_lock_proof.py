"""The lock proof: `envbuild matrix refresh --lock-proof` locks each pip build's
requirement with uv against the real index and records the outcome in
matrices/lockable.yaml; resolve does not complete to what does not lock, and a pin of it
is a `not_lockable` conflict whose fixes are releases that lock.

Resolve is tested on the committed table; a sample of about 20 cases is locked again
against the real PyPI and must agree with it (`network`)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from envbuild import matrix
from envbuild.core.model import FrameworkRequest, Spec
from envbuild.lock import proof
from envbuild.resolver import resolve

M = matrix.load()
# uv's answer for tensorflow[and-cuda]==2.15.0 (uv 0.13, --no-build)
UV_TENSORRT = (
    "  × No solution found when resolving dependencies:\n  ╰─▶ Because tensorrt==8.6.1.post1 has no usable wheels and "
    "tensorflow[and-cuda]==2.15.0 depends on tensorrt==8.6.1.post1, we can conclude that\n      tensorflow[and-cuda]==2.15.0 "
    "cannot be used.\n      And because you require tensorflow[and-cuda]==2.15.0, we can conclude that your requirements "
    "are unsatisfiable.\n\n      hint: Wheels are required for `tensorrt` because building from source is disabled for "
    "all packages (i.e., with `--no-build`)\n")


def _spec(frameworks, **fields) -> Spec:
    return Spec(frameworks=tuple(FrameworkRequest(n, c) for n, c in frameworks.items()), **fields)


def _lockable(framework: str, version: str, python: str, platform: str = "linux-64") -> bool | None:
    for r in M.lock_proofs:
        if (r.framework, r.version, r.platform) == (framework, version, platform) and python in r.pythons.split():
            return r.lockable
    return None


def test_uv_answer_in_one_sentence():
    assert proof.why_not(UV_TENSORRT) == ("tensorrt==8.6.1.post1 has no usable wheels and tensorflow[and-cuda]==2.15.0 "
                                          "depends on tensorrt==8.6.1.post1 (an sdist only, and the lock builds "
                                          "nothing from source)")


def test_the_table_holds_the_tensorflow_215_finding():
    assert _lockable("tensorflow", "2.15.0", "3.11") is False
    assert _lockable("tensorflow", "2.16.1", "3.11") is True
    row = next(r for r in M.lock_proofs if r.version == "2.15.0" and not r.lockable)
    assert "tensorrt==8.6.1.post1" in row.why and row.read and row.source.startswith("uv pip compile --no-build")


def test_a_pinned_release_that_does_not_lock_is_a_conflict_with_releases_that_do():
    r = resolve(_spec({"tensorflow": "2.15.0"}, installer="pip", gpus=("A100",)), M)
    conflict = r.conflicts[0]
    assert conflict.kind == "not_lockable" and "tensorrt==8.6.1.post1" in conflict.message
    assert any("lock proof" in f.text for f in conflict.facts)
    moves = [f.changes["frameworks.tensorflow"] for f in conflict.fixes if "frameworks.tensorflow" in f.changes]
    assert moves
    for version in moves:  # every release offered locks, and resolves
        assert any(r.lockable for r in M.lock_proofs if r.framework == "tensorflow" and r.version == version)
        fixed = next(f for f in conflict.fixes if f.changes.get("frameworks.tensorflow") == version)
        assert resolve(r.spec.with_changes(fixed.changes), M).ok


def test_open_fields_are_not_completed_to_what_does_not_lock():
    # 2.15.0 does not lock at all; 2.14.0 locks on Python 3.9 and 3.10 but not 3.11 (tensorrt 8.5.3.1 has no cp311 wheel)
    assert _lockable("tensorflow", "2.14.0", "3.11") is False and _lockable("tensorflow", "2.14.0", "3.10") is True
    r = resolve(_spec({"tensorflow": "<2.16"}, installer="pip", gpus=("A100",)), M)
    assert r.ok and r.resolved.frameworks[0].version == "2.14.0" and r.resolved.python != "3.11"
    pinned = resolve(_spec({"tensorflow": "2.14.0"}, installer="pip", python="3.11", gpus=("A100",)), M)
    assert [c.kind for c in pinned.conflicts] == ["not_lockable"]
    assert {"python": "3.10"} in [f.changes for f in pinned.conflicts[0].fixes]


def test_cases_are_one_per_requirement_of_the_newest_release_of_each_series():
    cases = proof.cases(M)
    keys = [c.key for c in cases]
    assert len(keys) == len(set(keys))
    jax = [c for c in cases if c.framework == "jax" and c.version == "0.4.38"]
    # one case per Python and platform, not one per CUDA minor of the cuda12 extra
    assert len(jax) == len({(c.requirement, c.platform, c.python) for c in jax}) > 0
    assert not [c for c in cases if c.framework == "jax" and c.version == "0.4.37"]  # 0.4.38 is the newest 0.4
    # what the table says does not lock is proven again, not left out
    assert [c.python for c in cases if c.requirement == "tensorflow[and-cuda]==2.15.0"] == ["3.9", "3.10", "3.11"]
    sample = proof.sample(cases, 20)
    assert 15 <= len(sample) <= 25 and {c.framework for c in sample} >= {"pytorch", "tensorflow", "jax", "cupy"}


def test_answers_are_kept_as_plain_data_and_read_back_offline(tmp_path):
    case = proof.Case("tensorflow", "2.15.0", "tensorflow[and-cuda]==2.15.0", None, "linux-64", "3.11")
    proof.Cache(tmp_path).put(case, proof.Answer(False, "tensorrt is an sdist only", "2026-11-27"))
    assert json.loads((tmp_path / "lock-proof.json").read_text())[case.key]["lockable"] is False
    answers = proof.sweep([case], proof.Cache(tmp_path), glibc="2.39", today="2026-12-01", offline=True)
    assert answers == {case: proof.Answer(False, "tensorrt is an sdist only", "2026-11-27")}
    row, = proof.rows(answers)
    assert row["pythons"] == "3.11" and row["lockable"] is False and row["read"] == "2026-11-27"


@pytest.mark.network
def test_a_sample_locked_again_against_pypi_agrees_with_the_table(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_"))}
    env["PIP_CONFIG_FILE"] = os.devnull
    proc = subprocess.run([sys.executable, "-m", "envbuild", "matrix", "refresh", "--lock-proof", "--sample", "20",
                           "--check", "--cache", str(tmp_path)], capture_output=True, text=True, timeout=900, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "differs" not in proc.stdout
    counts = proc.stdout.splitlines()[2]
    assert counts.startswith("20 cases:") and "0 not checked" in counts, proc.stdout
