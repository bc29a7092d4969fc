"""A team's own base image: any image reference is a base (family `custom`), its facts
stated in the spec or flags, or read from the image itself (its config through the
registry, python3 when the local engine holds it), else reported as not checked.

The company-like bases are built FROM the stand-in with the ENV lines NVIDIA's CUDA
images set, pushed to the local registry under this run's namespace, and built on with
the real engine."""
from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import uuid
from pathlib import Path

import pytest
import yaml

import image_support as support
from cli_support import in_process
from envbuild import matrix
from envbuild.core.model import CUSTOM_FAMILY, Spec
from envbuild.infra.errors import UserError
from envbuild.resolver import resolve
from envbuild.resolver.named_base import catalog_image, with_named_base
from envbuild.spec import load_spec
from image_support import TEST_NAMESPACE
from test_ci_output import validate
from test_cli_image_e2e import ok, one_error_line

M = matrix.load()
# What NVIDIA's nvidia/cuda:12.4.1-cudnn-runtime-ubuntu22.04 sets in its config (the values of
# gitlab.com/nvidia/container-images/cuda dist/12.4.1/ubuntu2204/{base,runtime,runtime/cudnn}).
NVIDIA_ENV = (
    'ENV NVARCH=x86_64 NVIDIA_REQUIRE_CUDA="cuda>=12.4 brand=tesla,driver>=470,driver<471" '
    "NV_CUDA_CUDART_VERSION=12.4.127-1 NV_CUDA_COMPAT_PACKAGE=cuda-compat-12-4 CUDA_VERSION=12.4.1\n"
    "ENV NV_CUDA_LIB_VERSION=12.4.1-1 NV_NVTX_VERSION=12.4.127-1 NV_LIBCUBLAS_VERSION=12.4.5.8-1\n"
    "ENV NV_CUDNN_VERSION=9.1.0.70-1 NV_CUDNN_PACKAGE_NAME=libcudnn9-cuda-12\n"
)


# --- stated facts and the catalog, without services ------------------------------------------
def spec_file(tmp_path: Path, **data) -> Spec:
    path = tmp_path / f"spec-{uuid.uuid4().hex[:6]}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return load_spec(path)


def test_the_mapping_form_states_facts_and_leaves_other_hashes_alone(tmp_path):
    stated = spec_file(tmp_path, cuda="12.4", base_image={"ref": "registry.example.com/ml/base:2024.1", "cuda": 12.4,
                                                          "python": "3.11", "framework": "torch==2.3.1"})
    assert stated.base_image == "registry.example.com/ml/base:2024.1"
    assert stated.base_facts == (("cuda", "12.4"), ("python", "3.11"), ("framework", "pytorch==2.3.1"))
    plain = spec_file(tmp_path, cuda="12.4", base_image="registry.example.com/ml/base:2024.1")
    assert plain.base_facts == () and "base_facts" not in plain.canonical()  # hashes of specs without facts hold
    assert stated.hash() != plain.hash()


@pytest.mark.parametrize("facts, says", [
    ({"cuda": "twelve"}, "malformed CUDA version 'twelve'"),
    ({"cuda": "12.1234"}, "malformed CUDA version '12.1234'"),  # a version, but no CUDA release's form
    ({"flavour": "slim"}, "unknown flavour 'slim'"),
    ({"family": "ubuntu"}, "unknown base family 'ubuntu'"),
    ({"framework": "pytorch"}, "malformed framework 'pytorch'"),
    ({"os": "Ubuntu 22.04"}, "malformed OS 'Ubuntu 22.04'"),
    ({"pyhton": "3.11"}, "unknown key base_image: 'pyhton'"),
])
def test_a_bad_fact_is_one_line_naming_where(tmp_path, facts, says):
    with pytest.raises(UserError) as caught:
        spec_file(tmp_path, cuda="12.4", base_image={"ref": "registry.example.com/ml/base:1", **facts})
    assert says in caught.value.message and "spec-" in (caught.value.where or "")


def test_base_fact_flags(tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_text("cuda: '12.4'\nbase: registry.example.com/ml/base:1\n")
    proc = in_process("resolve", path, "--base-fact", "cuda=12.4", "--base-fact", "python=3.11", "--base-fact",
                      "os=ubuntu22.04", "--base-fact", "flavour=runtime", "--base-fact", "cudnn=9", "--base-fact",
                      "framework=pytorch==2.3.1", "--json", cwd=tmp_path)
    base = json.loads(ok(proc).stdout)["resolved"]["base_image"]
    assert (base["family"], base["cuda"], base["python"], base["os"]) == (CUSTOM_FAMILY, "12.4", "3.11", "ubuntu22.04")
    assert base["source"] == "cuda, cudnn, flavour, framework, os, python stated in the spec's base_image or with --base-fact"
    assert "--base-fact cuda=12.4" in one_error_line(in_process("resolve", "--cuda", "12.4", "--base-fact",
                                                                 "cuda=12.4", cwd=tmp_path))
    assert "FACT=VALUE" in one_error_line(in_process("resolve", path, "--base-fact", "gpu=A100", cwd=tmp_path))


def test_a_catalog_image_under_a_mirror_path_is_the_catalogs():
    mirrored = "127.0.0.1:5555/nvidia/cuda:12.4.1-cudnn-runtime-ubuntu22.04"
    row = catalog_image(M.base_images, mirrored)
    assert row is not None and row.ref == "nvidia/cuda:12.4.1-cudnn-runtime-ubuntu22.04"
    assert catalog_image(M.base_images, "mirror.example.com/dockerhub/nvidia/cuda:12.4.1-cudnn-runtime-ubuntu22.04") is row
    assert catalog_image(M.base_images, "127.0.0.1:5555/acme/cuda:12.4.1-cudnn-runtime-ubuntu22.04") is None
    assert catalog_image(M.base_images, "127.0.0.1:5555/nvidia/cuda:12.4.1-cudnn-runtime-ubuntu99.04") is None
    spec = Spec(cuda="12.4", installer="pip", python="3.10", base_image=mirrored, driver="550.54.15")
    r = resolve(spec, M)
    assert r.ok and not r.warnings
    base = r.resolved.base_image
    assert (base.ref, base.family, base.python, base.cuda) == (mirrored, "cuda", "3.10", "12.4.1")
    assert "the catalog's nvidia/cuda:12.4.1-cudnn-runtime-ubuntu22.04" in base.source


def test_stated_facts_are_checked_like_the_catalogs():
    """Without reading anything: the facts the spec states decide, each check as for a catalog row."""
    spec = Spec(pip_packages=("six==1.16.0",), installer="pip", driver="535.104.05", base_image="acme.example/ml:1",
                base_facts=(("cuda", "12.4.1"), ("python", "3.11"), ("os", "ubuntu22.04"), ("flavour", "runtime")))
    r = resolve(spec, M)
    assert [c.kind for c in r.conflicts] == ["driver_too_old"]
    assert "acme.example/ml:1 declares CUDA 12.4" in r.conflicts[0].message
    assert r.conflicts[0].facts[0].source.startswith("cuda, flavour, os, python stated")
    fine = resolve(dataclasses.replace(spec, driver="550.54.15"), M)
    assert fine.ok and not fine.warnings and fine.resolved.python == "3.11"


def test_nothing_known_is_unverified_with_the_fix_and_refused_under_strict():
    spec = Spec(cuda="12.4", installer="pip", base_image="acme.example/ml:1", driver="550.54.15")
    m = with_named_base(M, spec)
    assert m.named_base.family == CUSTOM_FAMILY and m.named_base.cuda is None
    r = resolve(spec, m)
    assert r.verdict == "unverified" and r.usable and not r.conflicts and not r.warnings
    by_text = {u.message: u.links for u in r.unchecked}
    [cuda] = [t for t in by_text if "nothing states the CUDA of the base image acme.example/ml:1" in t]
    assert "--base-fact cuda=" in cuda and by_text[cuda] == ("base_image", "driver")
    [python] = [t for t in by_text if "nothing states the Python of the base image acme.example/ml:1" in t]
    assert by_text[python] == ("python", "base_image")
    strict = resolve(dataclasses.replace(spec, strict=True), m)
    assert strict.verdict == "unverified" and not strict.usable and strict.exit_code == 1 and not strict.conflicts


@pytest.mark.parametrize("env, facts", [
    # a devel image inherits the runtime's variables: the devel ones decide its flavour
    ({"CUDA_VERSION": "12.8.1", "NV_CUDA_LIB_VERSION": "12.8.1-1", "NV_CUDA_CUDART_DEV_VERSION": "12.8.90-1"},
     {"cuda": "12.8.1", "flavour": "devel", "cudnn": None, "python": None}),
    ({"NVIDIA_REQUIRE_CUDA": "cuda>=11.8 brand=tesla,driver>=470,driver<471", "NV_CUDA_CUDART_VERSION": "11.8.89-1"},
     {"cuda": "11.8", "flavour": "base"}),
    ({"CUDA_VERSION": "10.2.89", "CUDNN_VERSION": "7.6.5.32"}, {"cuda": "10.2.89", "cudnn": "7.6.5.32", "flavour": None}),
    ({"PYTHON_VERSION": "3.11.9"}, {"python": "3.11", "cuda": None}),
    ({"CUDA_VERSION": "12.4.1.1", "PYTHON_VERSION": "3.11.9"}, {"cuda": None, "python": "3.11"}),  # not a CUDA form: unknown
    ({"PYTORCH_VERSION": "2.4.0.dev20240514"}, {"framework": "pytorch", "framework_version": "2.4.0.dev20240514"}),
])
def test_what_an_image_config_env_says(env, facts):
    """The env rows of matrices/base_images.yaml read as NVIDIA's and Python's images set them."""
    from envbuild.image.facts import ImageRead

    found = ImageRead("acme.example/ml:1", where="the registry acme.example", digest="sha256:" + "0" * 64,
                      env=tuple(env.items()))
    row = with_named_base(M, Spec(cuda="12.4", base_image="acme.example/ml:1"), read=lambda ref, platform: found).named_base
    assert {name: getattr(row, name) for name in facts} == facts
    assert row.source.endswith("read from acme.example/ml:1 (sha256:000000000000) through the registry acme.example")


def test_every_image_env_row_names_a_fact():
    from envbuild.core.model import BASE_FACTS

    assert {row.fact for row in M.image_env} <= set(BASE_FACTS)
    assert all(row.value for row in M.image_env if row.fact in ("flavour", "framework"))


# --- against the registry and the engine ----------------------------------------------------
docker = pytest.mark.docker


@pytest.fixture(scope="module")
def acme_base(registry, base_image, docker_client) -> str:
    """A company base: the stand-in with NVIDIA's config env, pushed under a company-like
    path and removed from the engine, so its facts can only come from the registry."""
    ref = f"{registry}/{TEST_NAMESPACE}/acme/ml-base:2024.1"
    support.build_image(docker_client, ref, {"Dockerfile": f"FROM {base_image}\n{NVIDIA_ENV}".encode()})
    docker_client.images.push(ref)
    docker_client.images.remove(ref)
    return ref


@pytest.fixture(scope="module")
def pydemo(tmp_path_factory, wheelhouse):
    """(wheelhouse with pip and a demo wheel, a local simple index serving that wheel)."""
    import shutil

    root = tmp_path_factory.mktemp("acme-pydemo")
    wheels = root / "wheels"
    shutil.copytree(wheelhouse, wheels, ignore=shutil.ignore_patterns("py_rattler*", ".*"))
    demo = support.make_wheel(wheels, "envbuild_pydemo", "1.0", "VERSION = '1.0'\n")
    return wheels, support.simple_index(root / "simple", [demo])


def acme_spec(folder: Path, base, repository: str) -> Path:
    spec = {"name": "acme-train", "cuda": "12.4", "installer": "pip", "target": {"driver": "550.54.15"},
            "base_image": base, "packages": {"pip": ["envbuild_pydemo==1.0"]}, "image": {"repository": repository}}
    path = folder / f"spec-{uuid.uuid4().hex[:6]}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


@docker
def test_facts_are_read_from_the_registry(acme_base, tmp_path):
    spec = acme_spec(tmp_path, acme_base, "unused")
    answer = json.loads(ok(in_process("resolve", spec, "--json", cwd=tmp_path)).stdout)
    base = answer["resolved"]["base_image"]
    assert (base["family"], base["cuda"], base["cudnn"], base["flavour"]) == (CUSTOM_FAMILY, "12.4.1", "9.1.0.70",
                                                                             "runtime")
    assert "through the registry 127.0.0.1:5555" in base["source"] and "cuda 12.4.1 (CUDA_VERSION)" in base["source"]
    # python3 is run only in a local image: the Python is not known, and said so with the fix
    assert base["python"] is None and answer["verdict"] == "unverified" and answer["warnings"] == []
    [unchecked] = answer["unchecked"]
    assert "nothing states the Python of the base image" in unchecked["message"]
    assert "docker pull" in unchecked["message"] and "--base-fact python=3.11" in unchecked["message"]
    assert unchecked["links"] == ["python", "base_image"]
    strict = in_process("resolve", spec, "--strict", cwd=tmp_path)
    assert strict.returncode == 1 and "nothing states the Python" in strict.stdout
    assert "verdict: unverified" in strict.stdout


@docker
def test_export_judges_a_target_by_the_facts_read_from_the_base(acme_base, tmp_path):
    """The spec names no CUDA: only the base's, read from the registry (12.4.1), meets the
    target's driver. R470 cannot start it: nothing is written. R550 can, and its Python is
    still unknown (python3 runs only in a local image): written, unverified, and said so."""
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump({"name": "acme-train", "installer": "pip", "python": "3.11",
                                    "base_image": acme_base, "packages": {"pip": ["envbuild_pydemo==1.0"]}}))
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(yaml.safe_dump({"targets": {name: {"gpu": "A10G", "driver": driver, "scheduler": {"kind": "k8s"}}
                                                 for name, driver in (("r470", "470.82.01"), ("r550", "550.54.15"))}}))
    job = tmp_path / "job.yaml"
    refused = in_process("export", "k8s", spec, "--image", "img:1", "--fleet", fleet, "--target", "r470", "-o", job,
                         cwd=tmp_path)
    assert refused.returncode == 1 and not job.exists(), refused.stderr
    assert f"CONFLICT [driver_too_old] the base image {acme_base} declares CUDA 12.4" in refused.stderr
    assert "does not run on target r470" in refused.stderr
    written = ok(in_process("export", "k8s", spec, "--image", "img:1", "--fleet", fleet, "--target", "r550", "-o", job,
                            cwd=tmp_path))
    assert job.exists() and "target r550: unverified: nothing states the Python of the base image" in written.stderr
    answer = json.loads(ok(in_process("export", "k8s", spec, "--image", "img:1", "--fleet", fleet, "--target", "r550",
                                      "--json", cwd=tmp_path)).stdout)
    validate("export", answer)
    assert answer["verdict"] == "unverified" and answer["target"] == "r550"
    forced = json.loads(ok(in_process("export", "k8s", spec, "--image", "img:1", "--fleet", fleet, "--target", "r470",
                                      "--force", "--json", cwd=tmp_path)).stdout)
    validate("export", forced)
    assert forced["verdict"] == "conflict" and "kind: Job" in forced["definition"]
    strict = in_process("export", "k8s", spec, "--image", "img:1", "--fleet", fleet, "--target", "r550", "--strict",
                        "-o", tmp_path / "strict.yaml", cwd=tmp_path)
    assert strict.returncode == 1 and not (tmp_path / "strict.yaml").exists()


@docker
def test_a_base_that_cannot_be_read_is_unverified_with_the_fix(registry, tmp_path):
    """Exit 0 with the fix (exit 1 under --strict): nothing was guessed, and nothing checked."""
    spec = acme_spec(tmp_path, f"{registry}/{TEST_NAMESPACE}/acme/never-pushed:1", "unused")
    proc = ok(in_process("resolve", spec, cwd=tmp_path))
    assert "verdict: unverified" in proc.stdout and "--strict refuses it" in proc.stdout
    assert re.search(r"^  unchecked +base image ", proc.stdout, re.M), proc.stdout
    assert f"nothing states the CUDA of the base image {registry}/{TEST_NAMESPACE}/acme/never-pushed:1 (registry " \
           f"{registry} has no image" in proc.stdout
    assert "--base-fact cuda=X.Y" in proc.stdout
    strict = in_process("resolve", spec, "--strict", "--json", cwd=tmp_path)
    answer = json.loads(strict.stdout)
    assert strict.returncode == 1 and answer["verdict"] == "unverified" and answer["conflicts"] == []
    assert {link for u in answer["unchecked"] for link in u["links"]} >= {"base_image"}


@docker
def test_stated_python_and_read_cuda_build_and_run(acme_base, pydemo, registry, tmp_path):
    """Python from the flag, CUDA/cuDNN/flavour from the registry: the image builds with the
    real engine, its first step checks both, and it runs the locked Python."""
    wheels, index = pydemo
    spec = acme_spec(tmp_path, acme_base, f"{registry}/{TEST_NAMESPACE}/acme-app")
    answer = json.loads(ok(in_process("resolve", spec, "--base-fact", "python=3.11", "--json", cwd=tmp_path)).stdout)
    assert answer["verdict"] == "ok" and answer["warnings"] == [] and answer["resolved"]["python"] == "3.11"
    ok(in_process("lock", spec, "--base-fact", "python=3.11", "-o", tmp_path / "lock", "--index-url", index.as_uri(),
                  cwd=tmp_path))
    proc = ok(in_process("image", spec, "--base-fact", "python=3.11", "--lock-dir", tmp_path / "lock", "--wheelhouse",
                         wheels, "--progress", "plain", cwd=tmp_path))
    dockerfile_check = re.search(r"^\[(\d+)/\d+\] .*  RUN found=\"\$\(python3 ", proc.stderr, re.M)
    assert dockerfile_check and "RUN python3 /tmp/envbuild/install.py" in proc.stderr
    ref = proc.stdout.strip()
    run = subprocess.run(["docker", "run", "--rm", ref, "sh", "-c",
                          "python -V; echo $CUDA_VERSION; python -c 'import envbuild_pydemo as m; print(m.VERSION)'"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    version, cuda, demo = run.stdout.split()[1:]
    assert version.startswith("3.11.") and cuda == "12.4.1" and demo == "1.0"


@docker
def test_a_wrong_stated_fact_stops_the_build_at_its_first_step(acme_base, pydemo, registry, tmp_path):
    """The spec says CUDA 12.6; the image says 12.4.1: the stated fact wins in resolve (the
    user knows their image), and the build's first step finds it wrong."""
    wheels, index = pydemo
    spec = acme_spec(tmp_path, {"ref": acme_base, "cuda": "12.6", "python": "3.11"},
                     f"{registry}/{TEST_NAMESPACE}/acme-wrong")
    spec_text = yaml.safe_load(spec.read_text())
    spec_text["cuda"], spec_text["target"]["driver"] = "12.6", "570.124.06"
    spec.write_text(yaml.safe_dump(spec_text))
    ok(in_process("lock", spec, "-o", tmp_path / "lock", "--index-url", index.as_uri(), cwd=tmp_path))
    proc = in_process("image", spec, "--lock-dir", tmp_path / "lock", "--wheelhouse", wheels, "--progress", "plain",
                      cwd=tmp_path)
    error = one_error_line(proc)
    assert proc.returncode == 1
    assert f"base image {acme_base}: it carries CUDA 12.4.1, the stack was checked against CUDA 12.6" in error
    assert "RUN python3 /tmp/envbuild/install.py" not in proc.stderr


@docker
def test_facts_are_read_from_the_local_engine(acme_base, docker_client, tmp_path):
    docker_client.images.pull(acme_base)
    spec = acme_spec(tmp_path, acme_base, "unused")
    answer = json.loads(ok(in_process("resolve", spec, "--json", cwd=tmp_path)).stdout)
    base = answer["resolved"]["base_image"]
    assert answer["warnings"] == [] and answer["resolved"]["python"] == "3.11"
    assert (base["python"], base["os"], base["cuda"]) == ("3.11", "debian12", "12.4.1")
    assert "python 3.11 (python3 run in it)" in base["source"] and "through the local engine" in base["source"]


@docker
def test_the_issue_example_a_mirror_path_renders(registry, tmp_path):
    """`--base HOST/nvidia/cuda:TAG` is the catalog's image: it is judged by the catalog's facts
    (its python3 is 3.10, so --python 3.11 with pip is a conflict with fixes, exit 1), and the
    rendered Dockerfile names the mirror path (the jax recipe locked against the real PyPI)."""
    root = Path(__file__).resolve().parent.parent
    mirrored = f"{registry}/nvidia/cuda:12.4.1-cudnn-runtime-ubuntu22.04"
    refused = in_process("dockerfile", root / "recipes" / "jax.yaml", "--python", "3.11", "--base", mirrored,
                         "-o", tmp_path / "x", cwd=tmp_path)
    assert refused.returncode == 1 and "Traceback" not in refused.stderr
    report = refused.stdout + refused.stderr
    assert "CONFLICT [python_unsupported]" in report and "fix 1: use Python 3.10" in report
    proc = ok(in_process("dockerfile", root / "recipes" / "jax.yaml", "--base", mirrored, "-o", tmp_path / "ctx",
                         "--json", cwd=tmp_path))
    assert json.loads(proc.stdout)["base"]["reference"] == mirrored
    assert f"FROM {mirrored} AS install" in (tmp_path / "ctx" / "Dockerfile").read_text()
