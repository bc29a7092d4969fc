"""`envbuild env` and `envbuild run`: a spec's environment installed on this host.

Conda environments come from a local channel of real package archives (tests/lock_channels.py):
its `python` is a venv over this machine's /usr/bin/python3, so the prefix runs its own
`python` (sys.prefix is the prefix) and imports the `torch` module the channel's pytorch
build installs; `torch-check` is an entry point whose shebang is conda-build's prefix
placeholder, so running it proves the prefix was linked for its final path. Pip
environments come from the real PyPI (marked `network`).
"""
from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import yaml

from cli_support import in_process
from envbuild.core.model import Spec
from envbuild.hostenv.request import Host, for_host
from envbuild.infra.errors import EnvironmentProblem
from lock_channels import PYTORCH_CU124_PACKAGES, TORCH_CHECK, archive_channel
from test_ci_output import validate

ROOT = Path(__file__).resolve().parent.parent
ENVBUILD = shutil.which("envbuild")
PRINT_TORCH = "import sys, torch; print(torch.__version__, torch.version.cuda, sys.prefix)"


def envbuild(*args, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    assert ENVBUILD, "the envbuild console script is on PATH (pip install -e .)"
    return subprocess.run([ENVBUILD, *map(str, args)], capture_output=True, text=True, cwd=cwd, env=env, timeout=600)


def ok(proc: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    return proc


def error_line(proc: subprocess.CompletedProcess) -> str:
    """Bad input or a missing piece: no traceback, one `envbuild: error:` line, last."""
    assert "Traceback" not in proc.stderr + proc.stdout
    lines = proc.stderr.strip().splitlines()
    assert lines and lines[-1].startswith("envbuild: error:"), proc.stderr
    assert sum(line.startswith("envbuild: error:") for line in lines) == 1, proc.stderr
    return lines[-1]


@pytest.fixture(scope="module")
def channel(tmp_path_factory) -> Path:
    """PyTorch 2.4.1 for CUDA 12.4 (and its CPU twin), `torch-check`, and `broken`: a
    package whose archive was damaged after the channel was indexed (what a truncated
    download or a tampered mirror serves)."""
    folder = tmp_path_factory.mktemp("env-channel") / "channel"
    broken = ("broken", "1.0", "0", "linux-64", [], [])
    asyncio.run(archive_channel(folder, PYTORCH_CU124_PACKAGES + [TORCH_CHECK, broken]))
    archive = folder / "linux-64" / "broken-1.0-0.tar.bz2"
    data = bytearray(archive.read_bytes())
    data[len(data) // 2] ^= 0xFF
    archive.write_bytes(bytes(data))
    return folder


@pytest.fixture(scope="module")
def train(channel, tmp_path_factory) -> dict:
    """The default spec's environment, created once: the tests that only run commands in it
    or read it share it (those that change it or its inputs make their own)."""
    folder = tmp_path_factory.mktemp("train")
    spec = conda_spec(folder, channel)
    return {"folder": folder, "spec": spec, "created": env_json(envbuild("env", spec, "--json", cwd=folder))}


def conda_spec(folder: Path, channel: Path, packages=("torch-check",), name: str = "train") -> Path:
    spec = {"name": name, "frameworks": {"pytorch": "2.4.1"}, "python": "3.11",
            "target": {"driver": "550.54.15", "gpus": ["A100"], "platform": "linux-64"},
            "installer": "conda", "channels": [channel.as_uri()], "packages": {"conda": list(packages)},
            "env": {"OMP_NUM_THREADS": "3"}}
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def env_json(proc: subprocess.CompletedProcess) -> dict:
    data = json.loads(ok(proc).stdout)
    validate("env", data)
    return data


def no_staging_left(prefix: Path) -> bool:
    return not [p for p in prefix.parent.iterdir() if ".envbuild-stage-" in p.name or ".envbuild-old-" in p.name]


# --- conda environments from the local channel ---------------------------------------------

@pytest.mark.slow
def test_a_conda_environment_runs_its_own_python(train):
    tmp_path, spec, data = train["folder"], train["spec"], train["created"]
    prefix = tmp_path / ".envbuild" / "envs" / "train"  # the default: beside the spec, named after it
    assert data["action"] == "created" and Path(data["prefix"]).resolve() == prefix
    assert data["verdict"] in ("ok", "unverified") and (data["verdict"] == "ok") == (not data["unchecked"])
    assert data["installer"] == "conda" and data["python"] == "3.11.9" and data["interpreter"] is None
    assert {"name": "pytorch", "version": "2.4.1", "manager": "conda"} in data["packages"]
    assert data["lock"]["files"] == [".envbuild-lock.json", "conda-linux-64.lock", "conda-lock.yml"]
    assert data["resolved"]["base_image"] is None  # installed on the host: no image
    if data["target"]["source"] == "spec":  # a machine without an NVIDIA driver says so
        assert any("no NVIDIA driver" in w for w in data["warnings"])
        assert data["target"] == {"driver": "550.54.15", "gpus": ["A100"], "source": "spec"}

    run = ok(envbuild("run", spec, "--", "python", "-c", PRINT_TORCH, cwd=tmp_path))
    assert run.stdout.split() == ["2.4.1", "12.4", str(prefix)]  # the GPU build, from the prefix's own python
    # an entry point linked for the final path, although it was installed in a staging folder
    assert ok(envbuild("run", spec, "--", "torch-check", cwd=tmp_path)).stdout.split() == ["2.4.1", "12.4", str(prefix)]
    assert (prefix / "bin" / "torch-check").read_text().startswith(f"#!{prefix}/bin/python3\n")
    assert no_staging_left(prefix)


@pytest.mark.slow
def test_a_project_folder_environment_needs_no_spec_argument(channel, tmp_path):
    """`envbuild.yaml` in the current folder is the spec; its environment is `default`."""
    conda_spec(tmp_path, channel).rename(tmp_path / "envbuild.yaml")
    data = env_json(envbuild("env", "--json", cwd=tmp_path))
    prefix = tmp_path / ".envbuild" / "envs" / "default"
    assert Path(tmp_path / data["prefix"]).resolve() == prefix
    run = ok(envbuild("run", "--", "python", "-c", PRINT_TORCH, cwd=tmp_path))
    assert run.stdout.split() == ["2.4.1", "12.4", str(prefix)]


@pytest.mark.slow
def test_a_second_env_with_an_unchanged_lock_does_nothing(train):
    tmp_path, spec, first = train["folder"], train["spec"], train["created"]
    prefix = Path(tmp_path / first["prefix"])
    marker = prefix / ".envbuild" / "env.json"
    before = (prefix.stat().st_ino, marker.stat().st_mtime_ns, marker.read_bytes())
    again = envbuild("env", spec, "--json", cwd=tmp_path)
    data = env_json(again)
    assert data["action"] == "unchanged" and data["lock"]["sha256"] == first["lock"]["sha256"]
    assert "locking" not in again.stderr and "installing" not in again.stderr
    assert (prefix.stat().st_ino, marker.stat().st_mtime_ns, marker.read_bytes()) == before
    text = ok(envbuild("env", spec, cwd=tmp_path)).stdout
    assert "is up to date" in text and "nothing to do" in text


@pytest.mark.slow
def test_a_changed_spec_updates_the_environment_in_place(channel, tmp_path):
    spec = conda_spec(tmp_path, channel, packages=())
    first = env_json(envbuild("env", spec, "--json", cwd=tmp_path))
    prefix = tmp_path / first["prefix"]
    assert not (prefix / "bin" / "torch-check").exists()
    spec = conda_spec(tmp_path, channel, packages=("torch-check",))
    data = env_json(envbuild("env", spec, "--json", cwd=tmp_path))
    assert data["action"] == "updated" and data["lock"]["sha256"] != first["lock"]["sha256"]
    assert ok(envbuild("run", spec, "--", "torch-check", cwd=tmp_path)).stdout.split()[0] == "2.4.1"
    assert no_staging_left(prefix)


@pytest.mark.slow
def test_two_envs_at_once_build_it_once(channel, tmp_path):
    """The second run waits for the first (an flock beside the prefix), then finds the
    environment current."""
    spec = conda_spec(tmp_path, channel)
    runs = [subprocess.Popen([ENVBUILD, "env", str(spec), "--json"], cwd=tmp_path, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True) for _ in range(2)]
    answers = [run.communicate(timeout=600) for run in runs]
    assert [run.returncode for run in runs] == [0, 0], answers
    assert sorted(json.loads(out)["action"] for out, _ in answers) == ["created", "unchanged"]
    assert no_staging_left(tmp_path / ".envbuild" / "envs" / "train")


@pytest.mark.slow
def test_a_failing_install_leaves_the_old_environment_working(channel, tmp_path):
    spec = conda_spec(tmp_path, channel)
    first = env_json(envbuild("env", spec, "--json", cwd=tmp_path))
    prefix = tmp_path / first["prefix"]
    marker = (prefix / ".envbuild" / "env.json").read_bytes()
    lock = (prefix / ".envbuild" / "lock" / "conda-lock.yml").read_bytes()
    # The lock solves (the channel's index lists `broken`), the install fails on its archive.
    spec = conda_spec(tmp_path, channel, packages=("torch-check", "broken"))
    failed = envbuild("env", spec, cwd=tmp_path)
    assert failed.returncode == 3
    line = error_line(failed)
    assert "broken-1.0-0.tar.bz2" in line and "the environment was left as it was" in line
    assert (prefix / ".envbuild" / "env.json").read_bytes() == marker
    assert (prefix / ".envbuild" / "lock" / "conda-lock.yml").read_bytes() == lock
    spec = conda_spec(tmp_path, channel)  # the spec as it was: its environment is current and runs
    run = ok(envbuild("run", spec, "--", "torch-check", cwd=tmp_path))
    assert run.stdout.split() == ["2.4.1", "12.4", str(prefix)] and "installing" not in run.stderr
    assert no_staging_left(prefix)


@pytest.mark.slow
def test_an_unverified_stack_is_installed_with_a_warning_and_refused_under_strict(channel, tmp_path):
    """A GPU the matrices do not know leaves its architecture unchecked: the environment is
    made, saying what was not checked; --strict refuses it before anything is written."""
    spec = conda_spec(tmp_path, channel)
    strict = in_process("env", spec, "--gpu", "Quantum 9000", "--strict", cwd=tmp_path)
    assert strict.returncode == 1 and "Traceback" not in strict.stderr
    assert not (tmp_path / ".envbuild" / "envs" / "train").exists()
    proc = envbuild("env", spec, "--gpu", "Quantum 9000", "--json", cwd=tmp_path)
    data = env_json(proc)
    assert data["verdict"] == "unverified" and data["action"] == "created"
    assert [item["links"] for item in data["unchecked"]] == [["gpu_arch"]]
    assert "unverified (gpu_arch not checked)" in proc.stderr


@pytest.mark.slow
def test_a_prefix_holding_files_envbuild_did_not_write_is_refused(channel, tmp_path):
    spec = conda_spec(tmp_path, channel)
    mine = tmp_path / "project"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine\n")
    proc = in_process("env", spec, "--prefix", mine, cwd=tmp_path)  # refusals only read: run here
    assert proc.returncode == 2
    assert "holds files envbuild did not write (notes.txt)" in error_line(proc)
    assert [p.name for p in mine.iterdir()] == ["notes.txt"] and (mine / "notes.txt").read_text() == "mine\n"
    for bad, why in ((spec, "exists and is not a folder"), (tmp_path, "the current folder or a folder above it"),
                     (Path("/"), "the filesystem root")):
        proc = in_process("env", spec, "--prefix", bad, cwd=tmp_path)
        assert proc.returncode == 2 and why in error_line(proc)
    link = tmp_path / "link"
    link.symlink_to(mine)
    proc = envbuild("run", spec, "--prefix", link, "--", "true", cwd=tmp_path)
    assert proc.returncode == 2 and "is a symbolic link" in error_line(proc)


@pytest.mark.slow
def test_an_index_credential_is_never_written_into_the_environment(channel, tmp_path):
    spec = conda_spec(tmp_path, channel)
    proc = envbuild("env", spec, "--index-url", "https://ci:s3cret-token@mirror.example/simple", "--json",
                    cwd=tmp_path)
    prefix = tmp_path / env_json(proc)["prefix"]
    assert "s3cret-token" not in proc.stdout + proc.stderr
    assert not [p for p in prefix.rglob("*") if p.is_file() and not p.is_symlink() and b"s3cret-token" in p.read_bytes()]
    assert "https://mirror.example/simple" in (prefix / ".envbuild" / "env.json").read_text()


@pytest.mark.slow
def test_run_passes_the_exit_code_through(train):
    tmp_path, spec = train["folder"], train["spec"]
    assert envbuild("run", spec, "--", "python", "-c", "import sys; sys.exit(7)", cwd=tmp_path).returncode == 7
    quiet = envbuild("run", spec, "--", "python", "-c", "print('only this')", cwd=tmp_path)
    assert quiet.stdout == "only this\n" and quiet.stderr == ""  # a current environment adds nothing
    missing = envbuild("run", spec, "--", "no-such-command-here", cwd=tmp_path)
    assert missing.returncode == 127 and "no-such-command-here: command not found" in error_line(missing)
    nothing = envbuild("run", spec, cwd=tmp_path)
    assert nothing.returncode == 2 and "put it after `--`" in error_line(nothing)


@pytest.mark.slow
def test_run_sources_the_activation_scripts_a_conda_prefix_ships(channel, tmp_path):
    spec = conda_spec(tmp_path, channel)
    prefix = tmp_path / env_json(envbuild("env", spec, "--json", cwd=tmp_path))["prefix"]
    scripts = prefix / "etc" / "conda" / "activate.d"
    scripts.mkdir(parents=True)
    (scripts / "cuda.sh").write_text('export ENVBUILD_TEST_ACTIVATED="$CONDA_PREFIX"\n')
    run = ok(envbuild("run", spec, "--", "sh", "-c", 'echo "$ENVBUILD_TEST_ACTIVATED $CONDA_PREFIX $OMP_NUM_THREADS"',
                      cwd=tmp_path))
    assert run.stdout.split() == [str(prefix), str(prefix), "3"]  # the spec's `env` too, as in the image


# --- the request for this host --------------------------------------------------------------

SPEC = Spec(name="train", driver="550.54.15", gpus=("A100",), platform="linux-aarch64", base="pytorch",
            base_image="pytorch/pytorch:2.4.1-cuda12.4-cudnn9-runtime", base_facts=(("python", "3.11"),))


def test_the_host_driver_and_gpus_replace_the_spec_target():
    host = Host(platform="linux-64", glibc="2.35", driver="580.65.06", gpus=("H100-80GB",))
    request = for_host(SPEC, host, target_from_flags=False)
    assert (request.spec.driver, request.spec.gpus, request.spec.platform) == ("580.65.06", ("H100-80GB",), "linux-64")
    assert (request.spec.base, request.spec.base_image, request.spec.base_facts) == ("auto", None, ())  # no image
    assert not dataclasses.replace(request.spec, image_repository="registry.example/train").image_build  # a host
    assert request.target_source == "host"
    assert any("replaced by this host's (driver 580.65.06, H100-80GB)" in n for n in request.notes)
    assert any("this environment is for this host's linux-64" in n for n in request.notes)


def test_without_a_driver_the_spec_target_stands_with_a_warning():
    request = for_host(SPEC, Host("linux-64", "2.36", None, ()), target_from_flags=False)
    assert (request.spec.driver, request.spec.gpus, request.target_source) == ("550.54.15", ("A100",), "spec")
    assert any("this host has no NVIDIA driver, so the environment is for the spec's target (driver 550.54.15, A100)"
               in n for n in request.notes)


def test_the_command_line_target_wins_over_the_host():
    host = Host(platform="linux-64", glibc="2.35", driver="580.65.06", gpus=("H100-80GB",))
    request = for_host(SPEC, host, target_from_flags=True)
    assert (request.spec.driver, request.target_source) == ("550.54.15", "flags")


def test_a_host_envbuild_cannot_install_for_is_an_environment_problem():
    with pytest.raises(EnvironmentProblem, match="this host is osx-arm64"):
        for_host(SPEC, Host("osx-arm64", None, None, ()), target_from_flags=False)


# --- pip environments ------------------------------------------------------------------------

def test_a_missing_python_names_the_one_needed_and_how_to_get_it(tmp_path):
    """No interpreter on PATH, none installed by uv, downloads off: one line, exit 3, before
    anything is locked or written."""
    spec = tmp_path / "cupy.yaml"
    spec.write_text((ROOT / "recipes" / "cupy.yaml").read_text() + 'python: "3.12"\n')
    (tmp_path / "empty").mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "UV_PYTHON")}
    env.update(PATH=str(tmp_path / "empty"), UV_PYTHON_DOWNLOADS="never",
               UV_PYTHON_INSTALL_DIR=str(tmp_path / "uv-pythons"))
    # envbuild by this interpreter's absolute path: a console script may be a shim that needs PATH
    proc = subprocess.run([sys.executable, "-m", "envbuild", "env", str(spec)], capture_output=True, text=True,
                          cwd=tmp_path, env=env, timeout=600)
    assert proc.returncode == 3
    line = error_line(proc)
    assert "the environment needs Python 3.12, and this host has none" in line
    assert "uv python install 3.12" in line
    assert not (tmp_path / ".envbuild" / "envs" / "cupy").exists()


@pytest.mark.network
def test_the_cupy_recipe_installs_from_pypi_and_imports_the_locked_cupy(tmp_path):
    """recipes/cupy.yaml on this host, from the real PyPI: uv checks every wheel against the
    lock's sha256; CuPy imports without a GPU and reports the locked version."""
    spec = tmp_path / "cupy.yaml"
    shutil.copy(ROOT / "recipes" / "cupy.yaml", spec)
    data = env_json(envbuild("env", spec, "--json", cwd=tmp_path))
    assert data["installer"] == "pip" and data["action"] == "created"
    assert {"pylock.toml", "requirements.lock"} <= set(data["lock"]["files"])
    locked = {p["name"]: p["version"] for p in data["packages"]}
    assert locked["cupy-cuda12x"].startswith("13.")
    prefix = tmp_path / data["prefix"]
    assert (prefix / "pyvenv.cfg").read_text().count("relocatable = true") == 1
    run = ok(envbuild("run", spec, "--", "python", "-c",
                      "import sys, cupy; print(cupy.__version__, sys.prefix)", cwd=tmp_path))
    assert run.stdout.split() == [locked["cupy-cuda12x"], str(prefix)]
    assert env_json(envbuild("env", spec, "--json", cwd=tmp_path))["action"] == "unchanged"


@pytest.mark.network
@pytest.mark.parametrize("depth", ["short", "deep"])
def test_pip_packages_of_a_conda_environment_get_scripts_that_name_its_python(channel, tmp_path, depth):
    """The lock's pip section goes into the conda prefix (from the real PyPI, hash-checked);
    the console script pip writes names the final prefix's python, not the staging folder's:
    on its first line, or in a deep folder (a first line over 127 bytes) through /bin/sh.
    The short folder is one of its own under /tmp: pytest's folders may be deep already."""
    with tempfile.TemporaryDirectory(dir="/tmp") as short:
        work = Path(short) if depth == "short" else tmp_path / ("deep-" * 20)
        work.mkdir(exist_ok=True)
        _mixed_environment_scripts(channel, work, depth)


def _mixed_environment_scripts(channel: Path, work: Path, depth: str) -> None:
    spec = work / "mixed.yaml"
    spec.write_text(yaml.safe_dump({"name": "mixed", "frameworks": {"pytorch": "2.4.1"}, "python": "3.11",
                                    "target": {"driver": "550.54.15", "gpus": ["A100"]}, "installer": "conda",
                                    "channels": [channel.as_uri()], "packages": {"pip": ["tqdm==4.67.1"]}}))
    data = env_json(envbuild("env", spec, "--json", cwd=work))
    prefix = work / data["prefix"]
    assert {"name": "tqdm", "version": "4.67.1", "manager": "pip"} in data["packages"]
    script = (prefix / "bin" / "tqdm").read_text()
    python = f"{prefix}/bin/python"
    if depth == "short":
        assert script.startswith(f"#!{python}\n")
    else:
        assert len(f"#!{python}") > 127 and script.startswith(f"#!/bin/sh\n'''exec' '{python}' ")
    assert ok(envbuild("run", spec, "--", "tqdm", "--version", cwd=work)).stdout.strip() == "4.67.1"
    direct = subprocess.run([prefix / "bin" / "tqdm", "--version"], capture_output=True, text=True)
    assert ok(direct).stdout.strip() == "4.67.1"
