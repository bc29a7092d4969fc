"""A pip environment's image in layers by how often they change, and the sizes `image`
reports.

The split is checked on the context (a small change leaves every other layer's build inputs
byte-identical), then with the real engine and registry: a one-package change pushes only
that package's layer (and envbuild's own small one), as the registry's manifests show, and the
sizes `image --json` reports add up to the engine's and the registry's own figures."""
from __future__ import annotations

import dataclasses
import json
import random
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import requests
import yaml

import image_support as support
from cli_support import in_process
from envbuild import matrix, pipeline
from envbuild.dockerfile import layers
from envbuild.dockerfile.context import write_context
from image_support import TEST_NAMESPACE
from test_ci_output import validate
from test_cli_image_e2e import ok

NVIDIA_ENV = 'ENV CUDA_VERSION=12.4.1 NV_CUDA_LIB_VERSION=12.4.1-1 NVIDIA_REQUIRE_CUDA="cuda>=12.4"\n'
TABLE = tuple((row.layer, row.packages) for row in matrix.load().image_layers)
LOCK = """# pip requirements lock written by `envbuild lock`; do not edit.
# envbuild.spec_hash: {spec}
--index-url https://pypi.org/simple
einops==0.8.0 \\
    --hash=sha256:{a}
numpy==2.2.6 \\
    --hash=sha256:{b}
nvidia-cublas-cu12==12.9.3.13 \\
    --hash=sha256:{c} \\
    --hash=sha256:{d}
torch==2.8.0 \\
    --hash=sha256:{e}
"""


def lock_text(spec: str = "1" * 64, **digests: str) -> str:
    values = {k: k * 64 for k in "abcde"}
    values.update(digests)
    return LOCK.format(spec=spec, **values)


# --- the split, on the lock's text -----------------------------------------------------------------
def test_the_lock_splits_by_the_table_then_dependencies_then_each_asked_package():
    found = layers.split(lock_text(), TABLE, layers.requested(("einops==0.8.0",)))
    assert [(x.name, x.pins) for x in found] == [
        ("cuda", (("nvidia-cublas-cu12", "12.9.3.13"),)), ("frameworks", (("torch", "2.8.0"),)),
        ("dependencies", (("numpy", "2.2.6"),)), ("package-1", (("einops", "0.8.0"),))]
    cuda = found[0].text
    # every part keeps the lock's index and each pin's hashes (pip checks them), and no comment
    assert cuda == ("--index-url https://pypi.org/simple\nnvidia-cublas-cu12==12.9.3.13 \\\n"
                    f"    --hash=sha256:{'c' * 64} \\\n    --hash=sha256:{'d' * 64}\n")
    assert all(x.text.startswith("--index-url https://pypi.org/simple\n") and "#" not in x.text for x in found)
    joined = "".join(x.text for x in found)
    assert sorted(re.findall(r"--hash=sha256:(\w)", joined)) == list("abcde")


def test_the_packages_a_spec_names_past_the_limit_join_the_dependencies():
    names = [f"pkg{i}" for i in range(layers.MAX_PACKAGE_LAYERS + 2)]
    text = "".join(f"{n}==1.0 --hash=sha256:{'a' * 64}\n" for n in names)
    found = layers.split(text, TABLE, layers.requested(tuple(f"{n}>=1" for n in names)))
    assert [x.name for x in found] == ["dependencies"] + [f"package-{i}" for i in range(1, layers.MAX_PACKAGE_LAYERS + 1)]
    assert [n for n, _ in found[0].pins] == names[layers.MAX_PACKAGE_LAYERS:]


def test_the_layer_table_is_data_and_names_no_layer_envbuild_adds():
    assert matrix.RESERVED_LAYERS == ("environment", layers.DEPENDENCIES, layers.PACKAGE)
    assert {name for name, _ in TABLE} >= {"cuda", "frameworks"}
    assert all(row.source and row.reason for row in matrix.load().image_layers)


def test_a_small_change_leaves_the_other_layers_build_inputs_as_they_were(tmp_path):
    """The Docker layer cache keys a step on its instruction and the files it copies: the
    venv step and every layer but the changed one get the same files, and the same lines."""
    resolution = support.resolution("cuda", installer="pip")
    resolution = dataclasses.replace(resolution, spec=dataclasses.replace(resolution.spec,
                                                                          pip_packages=("einops==0.8.0",)))
    contexts = []
    for name, text in (("one", lock_text()), ("two", lock_text(spec="2" * 64, a="f" * 64))):
        (tmp_path / name / "lock").mkdir(parents=True)
        (tmp_path / name / "lock" / "requirements.lock").write_text(text)
        contexts.append(write_context(tmp_path / name / "ctx", resolution, tmp_path / name / "lock",
                                      facts=pipeline.context_facts(resolution)).path / "envbuild")
    one, two = contexts

    def files(root: Path, *names: str) -> dict[str, bytes]:
        return {p.relative_to(root).as_posix(): p.read_bytes() for name in names
                for p in sorted((root / name).rglob("*") if (root / name).is_dir() else [root / name]) if p.is_file()}

    kept = ("install.py", "plan.json", "layers/cuda", "layers/frameworks", "layers/dependencies")
    assert files(one, *kept) == files(two, *kept)
    assert files(one, "layers/package-1") != files(two, "layers/package-1")
    stages = [(c.parent / "Dockerfile").read_text().split("\n\n") for c in contexts]
    assert [s for s in stages[0] if "layer-package-1" not in s and "LABEL" not in s] == \
        [s for s in stages[1] if "layer-package-1" not in s and "LABEL" not in s]


# --- the real engine and registry --------------------------------------------------------------------
@pytest.fixture(scope="module")
def index(tmp_path_factory, wheelhouse):
    """(wheelhouse with pip and the wheels, a local index): a 'CUDA' wheel of 2 MB of random
    text (so its layer is the large one), a dependency, and an app in two versions."""
    root = tmp_path_factory.mktemp("layer-wheels")
    wheels = root / "wheels"
    shutil.copytree(wheelhouse, wheels, ignore=shutil.ignore_patterns("py_rattler*", ".*"))
    noise = random.Random(7)
    made = [support.make_wheel(wheels, "nvidia_layerdemo_cu12", v,
                               f"VERSION = '{v}'\nDATA = {''.join(noise.choices('0123456789abcdef', k=2_000_000))!r}\n")
            for v in ("1.0", "1.1")]
    made.append(support.make_wheel(wheels, "layerdemo_core", "1.0", "VERSION = '1.0'\n"))
    made += [support.make_wheel(wheels, "layerdemo_app", v, f"VERSION = '{v}'\n",
                                requires=("layerdemo_core>=1.0", "nvidia_layerdemo_cu12>=1.0")) for v in ("1.0", "1.1")]
    return wheels, support.simple_index(root / "simple", made)


@pytest.fixture(scope="module")
def cuda_base(base_image, registry, docker_client) -> str:
    """The stand-in with NVIDIA's CUDA variables (python3 3.11, no pip), in the local engine."""
    ref = f"{registry}/{TEST_NAMESPACE}/layers/cuda-base:12.4"
    support.build_image(docker_client, ref, {"Dockerfile": f"FROM {base_image}\n{NVIDIA_ENV}".encode()})
    return ref


def manifest(ref: str) -> dict:
    name, tag = ref.rsplit(":", 1)
    host, path = name.split("/", 1)
    answer = requests.get(f"http://{host}/v2/{path}/manifests/{tag}", timeout=10,
                          headers={"Accept": "application/vnd.docker.distribution.manifest.v2+json"})
    answer.raise_for_status()
    return answer.json()


def build(folder: Path, base: str, index: Path, wheels: Path, repository: str, *pins: str) -> dict:
    folder.mkdir()
    spec = folder / "spec.yaml"
    spec.write_text(yaml.safe_dump({"name": "layer-demo", "cuda": "12.4", "installer": "pip",
                                    "target": {"driver": "550.54.15"}, "base_image": base,
                                    "packages": {"pip": list(pins)}}, sort_keys=False))
    ok(in_process("lock", spec, "-o", folder / "lock", "--index-url", index.as_uri(), cwd=folder))
    proc = ok(in_process("image", spec, "--lock-dir", folder / "lock", "--wheelhouse", wheels, "--repository",
                         repository, "--push", "--json", "--progress", "plain", cwd=folder))
    result = json.loads(proc.stdout)
    validate("image", result)
    return result


def blobs(ref: str) -> dict[str, int]:
    return {layer["digest"]: layer["size"] for layer in manifest(ref)["layers"]}


@pytest.mark.docker
def test_a_one_package_change_pushes_only_its_layer(index, cuda_base, registry, docker_client, tmp_path):
    wheels, simple = index
    repository = f"{registry}/{TEST_NAMESPACE}/layer-demo"
    first = build(tmp_path / "a", cuda_base, simple, wheels, repository, "layerdemo_app==1.0", "nvidia_layerdemo_cu12==1.0")
    sizes = first["sizes"]
    assert [layer["holds"] for layer in sizes["layers"]] == ["environment", "cuda", "dependencies", "package-1",
                                                            "envbuild"]
    # the sizes add up: to the engine's figures, and to the registry's record of the push
    base = docker_client.api.inspect_image(cuda_base)["Size"]
    image = docker_client.api.inspect_image(first["reference"])
    assert sizes["base_bytes"] == base and sizes["image_bytes"] == image["Size"]
    assert sizes["base_bytes"] + sizes["added_bytes"] == sizes["image_bytes"]
    assert sizes["added_bytes"] == sum(layer["bytes"] for layer in sizes["layers"])
    stored = blobs(first["reference"])
    assert sizes["compressed_bytes"] == sum(stored.values())
    ours = list(stored.values())[-len(sizes["layers"]):]
    assert [layer["compressed_bytes"] for layer in sizes["layers"]] == ours
    cuda = sizes["layers"][1]
    assert cuda["bytes"] > 2_000_000 and cuda["compressed_bytes"] > 900_000  # random hex: about half
    assert all(layer["pushed"] for layer in sizes["layers"])

    # one package the spec names moves to another version: its layer and envbuild's own are new
    second = build(tmp_path / "b", cuda_base, simple, wheels, repository, "layerdemo_app==1.1",
                   "nvidia_layerdemo_cu12==1.0")
    new = {d: n for d, n in blobs(second["reference"]).items() if d not in stored}
    assert len(new) == 2  # package-1 (layerdemo_app) and envbuild (the lockfiles)
    assert second["sizes"]["pushed_bytes"] == sum(new.values()) < cuda["compressed_bytes"] / 10
    assert [layer["holds"] for layer in second["sizes"]["layers"] if layer["pushed"]] == ["package-1", "envbuild"]
    out = docker_client.containers.run(second["reference"], ["python", "-c", "import layerdemo_app as a, "
                                       "nvidia_layerdemo_cu12 as n; print(a.VERSION, n.VERSION, a.__file__)"],
                                       remove=True).decode().split()
    assert out[:2] == ["1.1", "1.0"] and out[2].startswith("/opt/env/")

    # the large layer moves: the layers after it are still the registry's, byte for byte
    third = build(tmp_path / "c", cuda_base, simple, wheels, repository, "layerdemo_app==1.1",
                  "nvidia_layerdemo_cu12==1.1")
    before = blobs(second["reference"])
    new = [d for d in blobs(third["reference"]) if d not in before]
    assert [layer["holds"] for layer in third["sizes"]["layers"] if layer["pushed"]] == ["cuda", "envbuild"]
    assert len(new) == 2
    assert third["sizes"]["pushed_bytes"] == sum(blobs(third["reference"])[d] for d in new)


@pytest.mark.docker
def test_the_text_output_reports_the_sizes_on_stderr(index, cuda_base, registry, tmp_path):
    wheels, simple = index
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump({"name": "layer-demo", "cuda": "12.4", "installer": "pip",
                                    "target": {"driver": "550.54.15"}, "base_image": cuda_base,
                                    "packages": {"pip": ["layerdemo_core==1.0"]}}, sort_keys=False))
    ok(in_process("lock", spec, "-o", tmp_path / "lock", "--index-url", simple.as_uri(), cwd=tmp_path))
    proc = ok(in_process("image", spec, "--lock-dir", tmp_path / "lock", "--wheelhouse", wheels, "--repository",
                         f"{registry}/{TEST_NAMESPACE}/layer-text", "--progress", "plain", cwd=tmp_path))
    assert proc.stdout.strip().count("\n") == 0  # stdout: the reference alone
    assert re.search(r"^size: [\d.]+ MB \(base [\d.]+ MB, [\d.]+ kB added by envbuild in 3 layers\)$", proc.stderr, re.M)
    assert re.search(r"^  layer package-1: [\d.]+ k?B$", proc.stderr, re.M)
    layers_in = subprocess.run(["docker", "image", "inspect", proc.stdout.strip(), "--format",
                                "{{len .RootFS.Layers}}"], capture_output=True, text=True, check=True).stdout
    assert int(layers_in) == 1 + 3  # the stand-in's one layer, then environment, package-1, envbuild
