"""A pip environment over a base image uses what the base's Python already carries: the
lock is solved with the base's versions as constraints, the lock folder records which pins
the base provides, and the image installs only the others.

A stand-in framework base carries two packages (installed with pip from the test
wheelhouse); the index offers newer versions of both. Built and run with the real engine."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest
import yaml

import image_support as support
from cli_support import in_process
from envbuild import matrix
from envbuild.core.model import Resolution
from envbuild.dockerfile.locked import without_base_pins
from envbuild.image.facts import read_local
from envbuild.lock import base_packages
from envbuild.lock.pip_lock import PipPin
from envbuild.resolver import resolve
from envbuild.spec import load_spec
from image_support import TEST_NAMESPACE
from test_ci_output import validate
from test_cli_image_e2e import ok

ROOT = Path(__file__).resolve().parent.parent
NVIDIA_ENV = 'ENV CUDA_VERSION=12.4.1 NV_CUDA_LIB_VERSION=12.4.1-1 NVIDIA_REQUIRE_CUDA="cuda>=12.4"\n'


# --- without services ---------------------------------------------------------------------------
def test_pins_the_base_carries_are_left_out_of_the_installed_lock_with_their_hashes():
    text = ("--index-url https://pypi.org/simple\n"
            "acme-core==1.0 \\\n    --hash=sha256:aa \\\n    --hash=sha256:bb\n"
            "acme-app==1.0 \\\n    --hash=sha256:cc\n"
            "acme-util==2.1 \\\n    --hash=sha256:dd\n")
    kept = without_base_pins(text, {"acme-core": "1.0", "acme-util": "2.0"})
    assert kept == ("--index-url https://pypi.org/simple\n"
                    "acme-app==1.0 \\\n    --hash=sha256:cc\n"
                    "acme-util==2.1 \\\n    --hash=sha256:dd\n")


def test_constraints_follow_the_base_except_where_the_spec_asks_otherwise():
    base = base_packages.BaseContents("acme/base:1", "test", {"acme-core": "1.0", "acme-util": "2.0",
                                                              "torch": "2.8.0+cu128"})
    wanted, forced = base_packages.constraints(base, ("acme_app==1.0", "acme-util==2.1", "torch==2.8.0"))
    assert wanted == ("acme-core==1.0", "torch==2.8.0")  # a local label is constrained by its public version
    assert forced == {"acme-util": "acme-util==2.1"}


def test_the_resolved_framework_build_in_the_base_is_used_under_its_pypi_form():
    """pytorch/pytorch:2.8.0-cuda12.8 carries torch 2.8.0+cu128; the lock names PyPI's torch==2.8.0,
    which is that very build (the resolver's pypi_default): it is the base's, not reinstalled."""
    resolution = resolve(load_spec(ROOT / "recipes" / "pytorch-official.yaml"))
    carried, note = base_packages.contents(resolution, matrix.load())
    assert note is None and carried.exact_only and "pytorch/pytorch Dockerfile" in carried.source
    assert carried.packages == {"torch": "2.8.0+cu128", "torchvision": "0.23.0+cu128", "torchaudio": "2.8.0+cu128"}
    pins = (PipPin("torch", "2.8.0", ("sha256:aa",)), PipPin("torchvision", "0.23.0", ("sha256:bb",)),
            PipPin("sympy", "1.14.0", ("sha256:cc",)))
    found = base_packages.split(carried, pins, resolution, None)
    assert found.from_base == {"torch": "2.8.0", "torchvision": "0.23.0"} and found.differs == {}


def test_a_base_envbuild_knows_nothing_about_installs_everything_and_says_why():
    from envbuild.core.model import Spec

    resolution = resolve(Spec(pip_packages=("six==1.16.0",), installer="pip", base_image="acme.example/ml:1",
                              base_facts=(("python", "3.11"), ("cuda", "12.4"))), matrix.load())
    carried, note = base_packages.contents(resolution, matrix.load(), read_local)
    assert carried is None
    assert note.startswith("what the base image acme.example/ml:1 carries is not known (the local engine does not "
                           "hold it), so every locked package is installed; `docker pull acme.example/ml:1`")


# --- the real index, engine and registry ---------------------------------------------------------
@pytest.fixture(scope="module")
def acme(tmp_path_factory, wheelhouse):
    """(a wheelhouse with pip and every acme wheel, a local index serving them): acme_app needs
    acme_core and acme_util; the index has newer versions of both than the base carries."""
    root = tmp_path_factory.mktemp("acme-wheels")
    wheels = root / "wheels"
    shutil.copytree(wheelhouse, wheels, ignore=shutil.ignore_patterns("py_rattler*", ".*"))
    made = [support.make_wheel(wheels, "acme_core", v, f"VERSION = '{v}'\n") for v in ("1.0", "1.1")]
    made += [support.make_wheel(wheels, "acme_util", v, f"VERSION = '{v}'\n") for v in ("2.0", "2.1")]
    made.append(support.make_wheel(wheels, "acme_app", "1.0", "VERSION = '1.0'\n",
                                   requires=("acme_core>=1.0", "acme_util>=2.0")))
    return wheels, support.simple_index(root / "simple", made)


@pytest.fixture(scope="module")
def framework_base(acme, base_image, registry, docker_client) -> str:
    """The stand-in with NVIDIA's CUDA env and acme_core 1.0 and acme_util 2.0 installed by pip
    into its python3 (as a framework image carries its framework), kept in the local engine."""
    wheels, _index = acme
    pip = next(wheels.glob("pip-*.whl")).name
    files = {f"w/{p.name}": p.read_bytes() for p in wheels.glob("*.whl") if p.name.startswith(("pip-", "acme_"))}
    files["Dockerfile"] = (
        f"FROM {base_image}\n{NVIDIA_ENV}COPY w/ /tmp/w/\n"
        f"RUN python3 /tmp/w/{pip}/pip install --no-index --find-links /tmp/w --break-system-packages "
        "--no-cache-dir acme_core==1.0 acme_util==2.0 && rm -rf /tmp/w\n").encode()
    ref = f"{registry}/{TEST_NAMESPACE}/acme/framework-base:2024.1"
    support.build_image(docker_client, ref, files)
    return ref


def spec_on(folder: Path, base: str, *pip: str) -> Path:
    path = folder / f"spec-{uuid.uuid4().hex[:6]}.yaml"
    path.write_text(yaml.safe_dump({"name": "acme-app", "cuda": "12.4", "installer": "pip",
                                    "target": {"driver": "550.54.15"}, "base_image": base,
                                    "packages": {"pip": list(pip)}}, sort_keys=False))
    return path


def run_in(image: str, code: str) -> list[str]:
    proc = subprocess.run(["docker", "run", "--rm", image, "python", "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.split()


@pytest.mark.docker
def test_what_the_base_carries_is_used_from_it(framework_base, acme, tmp_path):
    wheels, index = acme
    spec = spec_on(tmp_path, framework_base, "acme_app==1.0")
    locked = json.loads(ok(in_process("lock", spec, "-o", tmp_path / "lock", "--index-url", index.as_uri(), "--json",
                                      cwd=tmp_path)).stdout)
    validate("lock", locked)
    # the base's versions were constraints: not the index's newest (acme_core 1.1, acme_util 2.1)
    text = (tmp_path / "lock" / "requirements.lock").read_text()
    assert re.findall(r"^(acme-\w+)==(\S+)", text, re.M) == [("acme-app", "1.0"), ("acme-core", "1.0"),
                                                             ("acme-util", "2.0")]
    record = locked["base_packages"]
    assert record["from_base"] == {"acme-core": "1.0", "acme-util": "2.0"} and record["differs"] == {}
    assert record["source"].startswith("read from the image through the local engine")

    proc = ok(in_process("dockerfile", spec, "--lock-dir", tmp_path / "lock", "-o", tmp_path / "ctx", "--json",
                         cwd=tmp_path))
    rendered = json.loads(proc.stdout)
    validate("dockerfile", rendered)
    assert rendered["packages"]["installed"] == {"acme-app": "1.0"}
    assert rendered["packages"]["from_base"] == {"acme-core": "1.0", "acme-util": "2.0"}
    installed = "".join(p.read_text() for p in (tmp_path / "ctx" / "envbuild" / "layers").glob("*/requirements.lock"))
    assert "acme-app==1.0" in installed and "acme-core" not in installed and "acme-util" not in installed
    text_out = ok(in_process("dockerfile", spec, "--lock-dir", tmp_path / "lock", "-o", tmp_path / "ctx",
                             cwd=tmp_path)).stdout
    assert ("installs 1 locked packages in 1 layer (package-1 1); uses 2 from the base image (acme-core 1.0, "
            "acme-util 2.0)") in text_out

    built = ok(in_process("image", spec, "--lock-dir", tmp_path / "lock", "--wheelhouse", wheels, "--repository",
                          f"{framework_base.rsplit('/', 2)[0]}/acme-app", "--progress", "plain", cwd=tmp_path))
    image = built.stdout.strip()
    where = run_in(image, "import acme_app, acme_core, acme_util as u; "
                          "print(acme_app.__file__, acme_core.__file__, u.__file__, u.VERSION)")
    assert where[0].startswith("/opt/env/") and where[3] == "2.0"
    assert not where[1].startswith("/opt/env/") and not where[2].startswith("/opt/env/")  # the base's own
    assert run_in(image, "import os; print(sorted(os.listdir([p for p in __import__('sys').path "
                         "if p.startswith('/opt/env/') and p.endswith('site-packages')][0])))")[0].count("acme_core") == 0

    report = tmp_path / "verify.json"
    in_process("verify", image, "--no-perf", "--json", report, cwd=tmp_path)
    checks = {c["name"]: c for c in json.loads(report.read_text())["checks"]}
    assert all(c["status"] == "pass" for name, c in checks.items() if name.startswith("static.")), checks


@pytest.mark.docker
def test_a_spec_that_asks_another_version_installs_it_and_says_so(framework_base, acme, tmp_path):
    wheels, index = acme
    spec = spec_on(tmp_path, framework_base, "acme_app==1.0", "acme_util==2.1")
    proc = ok(in_process("lock", spec, "-o", tmp_path / "lock", "--index-url", index.as_uri(), cwd=tmp_path))
    size = (wheels / "acme_util-2.1-py3-none-any.whl").stat().st_size
    assert (f"the image installs them over the base's: acme-util 2.1 (the base has 2.0), {size} B to download"
            in proc.stderr)
    rendered = json.loads(ok(in_process("dockerfile", spec, "--lock-dir", tmp_path / "lock", "-o", tmp_path / "ctx",
                                        "--json", cwd=tmp_path)).stdout)
    assert rendered["packages"]["from_base"] == {"acme-core": "1.0"}
    assert rendered["packages"]["differs"] == {"acme-util": {"locked": "2.1", "base": "2.0", "bytes": size}}
    assert rendered["packages"]["installed"] == {"acme-app": "1.0", "acme-util": "2.1"}
    built = ok(in_process("image", spec, "--lock-dir", tmp_path / "lock", "--wheelhouse", wheels, "--repository",
                          f"{framework_base.rsplit('/', 2)[0]}/acme-app-forced", "--progress", "plain", cwd=tmp_path))
    where = run_in(built.stdout.strip(), "import acme_util as u; print(u.__file__, u.VERSION)")
    assert where[0].startswith("/opt/env/") and where[1] == "2.1"


@pytest.mark.docker
def test_a_base_that_is_not_local_installs_everything_with_a_note(acme, registry, tmp_path):
    _wheels, index = acme
    spec = spec_on(tmp_path, f"{registry}/{TEST_NAMESPACE}/acme/not-pulled:1", "acme_app==1.0")
    proc = ok(in_process("lock", spec, "--base-fact", "python=3.11", "-o", tmp_path / "lock", "--index-url",
                         index.as_uri(), cwd=tmp_path))
    assert "carries is not known (the local engine does not hold it), so every locked package is installed" \
        in proc.stderr
    text = (tmp_path / "lock" / "requirements.lock").read_text()
    assert "acme-core==1.1" in text and "acme-util==2.1" in text  # no constraints: the index's newest
