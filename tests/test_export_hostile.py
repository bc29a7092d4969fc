"""Hostile and careless values in every field that reaches a job definition (tests/
hostile_inputs.py), through `envbuild export KIND`, `envbuild verify --fleet` and
`envbuild resolve --fleet`: each is refused in one line, exit 2, no traceback, before
anything is written or submitted. Run in this process (the same `main` the console script
runs), with the console script itself for a sample."""
from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

import hostile_inputs as h
from envbuild.cli import main

ROOT = Path(__file__).resolve().parent.parent
IMAGE = "127.0.0.1:5555/team/train:1"


def _cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return code, out.getvalue(), err.getvalue()


def _refused(code: int, out: str, err: str) -> str:
    assert code == 2, (code, out[-500:], err[-500:])
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("envbuild: error: "), err[-1000:]
    assert "Traceback" not in err and len(lines[0]) < 2000  # no value echoed at length
    return lines[0]


def _case_id(value) -> str:
    text = repr(value)
    return text if len(text) < 40 else f"{text[:30]}...({len(text)})"


def _fleet_cases(kinds=h.KINDS):
    for kind in kinds:
        for key, value in h.scheduler_cases(kind):
            yield pytest.param(kind, {"scheduler": {key: value}}, id=f"{kind}.{key}={_case_id(value)}")
        for key, values in h.TARGET_VALUES.items():
            for value in values:
                yield pytest.param(kind, {"target": {key: value}}, id=f"{kind}:{key}={_case_id(value)}")
        for name in h.TARGET_NAMES:
            yield pytest.param(kind, {"name": name}, id=f"{kind}:name={_case_id(name)}")


@pytest.mark.parametrize("kind, hostile", list(_fleet_cases()))
def test_export_refuses_hostile_fleet_values(tmp_path, kind, hostile):
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(h.fleet_yaml(kind, **hostile))
    out = tmp_path / "job.out"
    _refused(*_cli("export", kind, "--image", IMAGE, "--fleet", str(fleet), "-o", str(out)))
    assert not out.exists()


def _flag_cases():
    for kind in h.KINDS:
        for flag, values in h.FLAG_VALUES.items():
            for value in values:
                yield pytest.param(kind, flag, value, id=f"{kind} {flag}={_case_id(value)}")
        for name in h.PYTHON_NAMES.get(kind, []):
            yield pytest.param(kind, "--name", name, id=f"{kind} --name={name}")


@pytest.mark.parametrize("kind, flag, value", list(_flag_cases()))
def test_export_refuses_hostile_flags(tmp_path, kind, flag, value):
    out = tmp_path / "job.out"
    args = ["export", kind, "-o", str(out)] + ([] if flag == "--image" else ["--image", IMAGE]) + [f"{flag}={value}"]
    line = _refused(*_cli(*args))
    assert not out.exists()
    assert line.removeprefix("envbuild: error: ").startswith(flag + ":")  # the flag is named


@pytest.mark.parametrize("kind, hostile", list(_fleet_cases()))
def test_verify_fleet_refuses_hostile_fleet_values_before_any_job(tmp_path, kind, hostile):
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(h.fleet_yaml(kind, **hostile))
    work = tmp_path / "work"
    _refused(*_cli("verify", IMAGE, "--fleet", str(fleet), "--static", "--workdir", str(work)))
    assert not work.exists()  # nothing written, so nothing submitted


@pytest.mark.parametrize("image", h.FLAG_VALUES["--image"])
def test_verify_fleet_refuses_a_hostile_image(tmp_path, image):
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(h.fleet_yaml("batch"))
    work = tmp_path / "work"
    _refused(*_cli("verify", image, "--fleet", str(fleet), "--workdir", str(work)))
    assert not work.exists()


@pytest.mark.parametrize("kind, hostile", list(_fleet_cases()))
def test_resolve_fleet_refuses_hostile_fleet_values(tmp_path, kind, hostile):
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(h.fleet_yaml(kind, **hostile))
    _refused(*_cli("resolve", "--framework", "pytorch", "--fleet", str(fleet)))


@pytest.mark.parametrize("args", [
    ["export", "coiled", "--image", 'x"""\nimport os; os.system("id")\n"""'],
    ["export", "k8s", "--image", IMAGE, "--command", 'echo "x'],
    ["export", "k8s", "--image", IMAGE, "--mem", "-5"],
    ["export", "batch", "--image", IMAGE, "--time", "0"],
    ["export", "flyte", "--image", IMAGE, "--name", "class"],
])
def test_the_console_script_prints_one_line_too(args):
    done = subprocess.run([sys.executable, "-m", "envbuild", *args], capture_output=True, text=True, cwd=ROOT,
                          env=dict(os.environ), timeout=120)
    _refused(done.returncode, done.stdout, done.stderr)
