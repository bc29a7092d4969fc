"""envbuild/pipeline.py: the stages run in one order and stop with typed errors. A spec
that does not resolve or lock raises before anything is written; an image that fails the
verify gate gets no tag and reaches no registry (the real engine and the local registry)."""
from __future__ import annotations

import ast
import dataclasses
import hashlib
import json
from pathlib import Path

import pytest
import requests
import yaml

import image_support as support
from cli_support import in_process
from envbuild import pipeline
from envbuild.dockerfile.context import Base, write_context
from envbuild.image.make import ImageOptions
from envbuild.infra.errors import LockRefused, Unresolved, VerifyFailed
from envbuild.spec import load_spec

ROOT = Path(__file__).resolve().parent.parent
CONFLICT = ROOT / "recipes" / "pytorch-1.6-cudatoolkit-11.0.yaml"


def for_image(path):
    """The spec as `dockerfile`, `image` and `verify --expect` judge it: as an image build."""
    return dataclasses.replace(load_spec(path), for_image=True)


def test_a_conflict_raises_unresolved_with_the_resolution():
    with pytest.raises(Unresolved) as info:
        pipeline.resolve(load_spec(CONFLICT))
    resolution = info.value.resolution
    assert resolution.verdict == "conflict" and resolution.conflicts
    assert info.value.first == resolution.conflicts[0].message


def test_the_cli_renders_unresolved_as_resolve_does(tmp_path):
    out = tmp_path / "ctx"
    proc = in_process("dockerfile", CONFLICT, "-o", out, "--json", cwd=tmp_path)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert json.loads(proc.stdout)["verdict"] == "conflict"
    assert "CONFLICT" in proc.stderr and "locking into" not in proc.stderr  # stopped before the lock stage
    assert not out.exists()


def test_expectations_are_what_the_spec_resolved_to():
    resolution = pipeline.resolve(for_image(ROOT / "recipes" / "pytorch-official.yaml"))
    stack = resolution.resolved
    expect = pipeline.expectations(resolution).to_probe()
    assert expect["cuda"] == stack.cuda and expect["gpus"] == [g.name for g in stack.gpus]
    assert expect["sms"] == sorted({"".join(g.compute_capability.split(".")) for g in stack.gpus}, key=int)
    assert expect["frameworks"] == {f.name: {"version": f.version, "cuda": f.cuda} for f in stack.frameworks}


@pytest.mark.docker
def test_verify_expect_resolves_the_spec_and_passes_what_it_resolved_to(base_image, tmp_path):
    recipe = ROOT / "recipes" / "pytorch-official.yaml"
    proc = in_process("verify", base_image, "--expect", recipe, "--no-perf", "--json", cwd=tmp_path)
    assert "Traceback" not in proc.stderr
    told = json.loads(proc.stdout)["probe"]["expect"]
    wanted = pipeline.expectations(pipeline.resolve(for_image(recipe))).to_probe()
    assert {key: told[key] for key in wanted} == wanted and wanted["frameworks"]["pytorch"]["version"]


def test_verify_expect_with_a_conflicting_spec_is_bad_input(tmp_path):
    proc = in_process("verify", "unused:tag", "--expect", CONFLICT, cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith(
        f"envbuild: error: {CONFLICT}: the expected spec does not resolve: ")


def _unlockable_spec(folder: Path) -> Path:
    """Resolves (no framework), but the channel has no envbuild-demo >= 9 to lock."""
    support.demo_channel(folder)
    spec = {"name": "refused", "python": "3.11", "cuda": "12.4", "installer": "conda",
            "target": {"driver": "550.54.15", "gpus": ["A100"], "platform": "linux-64"},
            "base_image": "nvidia/cuda:12.4.1-cudnn-runtime-ubuntu22.04",
            "channels": [(folder / "channel").as_uri()], "packages": {"conda": ["envbuild-demo>=9"]}}
    path = folder / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def test_a_lock_conflict_raises_lock_refused_and_no_context_is_written(tmp_path):
    spec = load_spec(_unlockable_spec(tmp_path))
    resolution = pipeline.resolve(spec)
    with pytest.raises(LockRefused) as info:
        pipeline.lock(spec, resolution, lock_dir=None, scratch=tmp_path, quiet=True)
    assert info.value.spec_hash == spec.hash()
    assert any("envbuild-demo >=9" in message for message in info.value.conflicts)

    out = tmp_path / "ctx"
    proc = in_process("dockerfile", tmp_path / "spec.yaml", "-o", out, "--json", cwd=tmp_path)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    answer = json.loads(proc.stdout)
    assert answer["verdict"] == "conflict" and answer["stage"] == "lock"
    assert "envbuild: lock conflict: " in proc.stderr
    assert not out.exists()


def _hashes(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir()) if p.is_file()}


def test_the_dockerfile_stage_only_reads_the_lock_folder(tmp_path):
    from envbuild.lock import base_record

    resolution, lock_dir = support.locked_demo(tmp_path)
    digest = "sha256:" + "1" * 64
    ref = f"{resolution.resolved.base_image.ref}@{digest}"
    base_record.write(lock_dir, resolution.resolved.base_image.ref, ref.split("@")[0], digest)  # as the pipeline does
    before = _hashes(lock_dir)
    context = write_context(tmp_path / "ctx", resolution, lock_dir, facts=pipeline.context_facts(resolution),
                            base=Base(ref, digest))
    assert f"FROM {ref} AS install" in context.dockerfile
    record = (context.path / "envbuild" / "image" / "lock" / "base-image.json").read_text()
    assert record == (lock_dir / "base-image.json").read_text()  # the image carries the lock's record ...
    assert json.loads(record)["digest"] == digest
    assert _hashes(lock_dir) == before  # ... and the lock folder is left as it was

    unpinned = write_context(tmp_path / "ctx2", resolution, lock_dir, facts=pipeline.context_facts(resolution))  # a record of another pin stays out
    assert not (unpinned.path / "envbuild" / "image" / "lock" / "base-image.json").exists()


@pytest.mark.docker
def test_verify_gate_failure_pushes_nothing(docker_client, registry, wheelhouse, tmp_path, empty_docker_config):
    """The gate runs between build and push: a failed probe leaves the registry and the
    engine's tags untouched; the same options without the gate push."""
    _, lock_dir = support.locked_demo(tmp_path)
    resolution = support.resolution("cuda", name="gated")  # expects CuPy, which the demo lock does not install
    repository = f"{registry}/{support.TEST_NAMESPACE}/gated"
    options = ImageOptions(repository=repository, mirror=registry, wheelhouse=wheelhouse, push=True,
                           extra_tags=("stable",), verify=True, check_registry=False)
    with pytest.raises(VerifyFailed, match="failed verification; no tag was moved onto it and nothing was pushed"):
        pipeline.make_image(resolution, lock_dir, options)
    path = repository.split("/", 1)[1]
    assert requests.get(f"http://{registry}/v2/{path}/tags/list", timeout=10).status_code == 404
    assert not [t for image in docker_client.images.list() for t in image.tags if t.startswith(repository + ":")]

    from dataclasses import replace

    pushed = pipeline.make_image(resolution, lock_dir, replace(options, verify=False))
    tags = requests.get(f"http://{registry}/v2/{path}/tags/list", timeout=10).json()["tags"]
    assert sorted(tags) == sorted([pushed.ref.rsplit(":", 1)[1], "stable"])


@pytest.fixture()
def empty_docker_config(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path / "docker-config"))
    (tmp_path / "docker-config").mkdir()
    return tmp_path / "docker-config"


def _imports(package: str) -> set[str]:
    found = set()
    for path in (ROOT / "envbuild" / package).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                found.add(node.module)
            elif isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
    return found


@pytest.mark.parametrize("package, forbidden", [
    ("image", ("envbuild.verify", "envbuild.resolver", "envbuild.commands")),
    ("verify", ("envbuild.resolver", "envbuild.spec", "envbuild.image", "envbuild.commands")),
    ("dockerfile", ("envbuild.image.registry", "envbuild.image", "envbuild.verify", "envbuild.resolver",
                    "envbuild.commands", "envbuild.lock.api", "envbuild.lock.conda_lockfile")),
])
def test_stages_do_not_reach_sideways(package, forbidden):
    reached = sorted(m for m in _imports(package) if m.startswith(forbidden))
    assert reached == [], f"envbuild/{package} imports {reached}: the pipeline passes these in as values"
