"""`envbuild image --fleet --plan`: the fewest images that serve a fleet, planned by the real
resolver over the real matrices, locked by the real solver from a local channel; the
manifest as `verify --manifest` and `export --manifest` read it, and their bad input; one
job definition per target, each accepted by its consumer. The builds, pushes and Slurm
runs are in test_fleet_build.py."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import fleet_support
from cli_support import in_process
from envbuild.commands._spec import load_spec
from envbuild.fleet import load_fleet, manifest
from envbuild.fleet.plan import _cover, plan_fleet
from envbuild.spec import spec_from_mapping
from test_ci_output import validate
from test_export import flyte_module

ROOT = Path(__file__).resolve().parent.parent
REPO = "127.0.0.1:5555/team/train"
DIGESTS = {1: "sha256:" + "1" * 64, 2: "sha256:" + "2" * 64}


def _cli(*args, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return in_process(*args, cwd=cwd)


def _one_line(done: subprocess.CompletedProcess, code: int = 2) -> str:
    assert done.returncode == code, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("envbuild: error: "), lines
    return lines[0]


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> tuple[Path, Path]:
    return fleet_support.write_inputs(tmp_path_factory.mktemp("plan"), REPO)


def test_three_targets_on_two_stacks_are_two_images(inputs):
    """The V100's R520 driver forces CUDA 11.8, and MIG on the H100 needs CUDA 12: no one
    stack serves both, so the plan is the CUDA 12.4 image (newest first) for the A100 and
    the H100 slice, and the CUDA 11.8 one for the V100."""
    spec, fleet = inputs
    plan = plan_fleet(load_spec(spec), load_fleet(str(fleet)).targets)
    assert [(i.item, i.stack.cuda, [r.target.name for r in i.targets]) for i in plan.images] == [
        (1, "12.4", ["a100", "h100-mig"]), (2, "11.8", ["v100"])]
    assert all(r.verdict == "ok" for i in plan.images for r in i.targets) and plan.uncovered == []
    assert {(f.name, f.version) for i in plan.images for f in i.stack.frameworks} == {("pytorch", "2.5.1")}
    # each image is resolved for its own targets: their GPUs, their oldest driver
    assert plan.images[0].resolution.spec.driver == "550.54.15"
    assert {g.compute_capability for g in plan.images[0].stack.gpus} == {"8.0", "9.0"}
    assert plan.images[1].resolution.spec.driver == "520.61.05"


def test_plan_json_has_each_images_content_tag_and_matches_the_schema(inputs, tmp_path):
    spec, fleet = inputs
    args = ("image", spec, "--fleet", fleet, "--plan", "--lock-dir", tmp_path / "locks")
    done = _cli(*args, "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    validate("image", data)
    assert data["verdict"] == "ok" and data["plan"] is True and data["uncovered"] == []
    tags = [i["tag"] for i in data["images"]]
    assert all(re.fullmatch(rf"{re.escape(REPO)}:[0-9a-f]{{16}}", t) for t in tags) and len(set(tags)) == 2
    assert [(i["stack"]["cuda"], i["stack"]["base_image"], i["targets"]) for i in data["images"]] == [
        ("12.4", fleet_support.BASES[0], [{"name": "a100", "verdict": "ok"}, {"name": "h100-mig", "verdict": "ok"}]),
        ("11.8", fleet_support.BASES[1], [{"name": "v100", "verdict": "ok"}])]
    # one lock folder per stack, reused by the next run: the same tags
    assert sorted(p.name for p in (tmp_path / "locks").iterdir()) == [
        "linux-64-pytorch2.5.1-cuda11.8-py3.11-conda", "linux-64-pytorch2.5.1-cuda12.4-py3.11-conda"]
    again = _cli(*args, "--json")
    assert [i["tag"] for i in json.loads(again.stdout)["images"]] == tags
    assert "locking into" not in again.stderr
    text = _cli(*args).stdout.splitlines()
    assert text[0] == "plan: 2 image(s) for 3 of 3 target(s)"
    assert text[1] == f"image 1  {tags[0]}" and text[3] == "  targets: a100 (ok), h100-mig (ok)"
    assert text[4] == f"image 2  {tags[1]}" and text[6] == "  targets: v100 (ok)"


def test_one_stack_for_every_target_is_one_image():
    fleet = load_fleet(str(ROOT / "tests" / "data" / "fleets" / "fleet.yaml"))
    plan = plan_fleet(spec_from_mapping({"frameworks": {"pytorch": None}}), fleet.targets)
    assert len(plan.images) == 1 and plan.uncovered == []
    assert [r.target.name for r in plan.images[0].targets] == fleet.names()


def test_a_target_no_stack_serves_is_uncovered_with_its_conflicts_and_the_rest_is_planned(inputs, tmp_path):
    spec, _ = inputs
    fleet = tmp_path / "fleet.yaml"
    data = yaml.safe_load(yaml.safe_dump(fleet_support.FLEET))
    data["targets"]["k80"] = {"gpu": "K80", "driver": "580.65.06", "scheduler": {"kind": "k8s"}}  # R580 drives no Kepler
    fleet.write_text(yaml.safe_dump(data))
    done = _cli("image", spec, "--fleet", fleet, "--plan", "--json", "--lock-dir", tmp_path / "locks")
    assert done.returncode == 1, done.stderr
    out = json.loads(done.stdout)
    validate("image", out)
    assert out["verdict"] == "conflict" and len(out["images"]) == 2
    [k80] = out["uncovered"]
    assert k80["name"] == "k80" and k80["conflicts"][0]["kind"] == "gpu_arch_unsupported"
    assert "R470" in k80["conflicts"][0]["message"]


def test_too_little_memory_is_uncovered_and_its_fix_names_the_targets_that_fit(tmp_path):
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text("targets:\n  slice:\n    gpu: A100-80GB\n    mig: 3g.40gb\n    driver: 550.54.15\n    scheduler: {kind: k8s}\n"
                     "  whole:\n    gpu: H100\n    gpu_memory: 80GiB\n    driver: 550.54.15\n    scheduler: {kind: k8s}\n")
    spec = spec_from_mapping({"frameworks": {"pytorch": None}, "resources": {"gpus": 1, "gpu_memory": "48GiB"}})
    plan = plan_fleet(spec, load_fleet(str(fleet)).targets)
    assert [[r.target.name for r in i.targets] for i in plan.images] == [["whole"]]
    [lost] = plan.uncovered
    assert lost.target.name == "slice" and lost.conflicts[0].kind == "gpu_memory_insufficient"
    assert [f.description for f in lost.conflicts[0].fixes][0] == "run on a target with enough memory: whole"


def test_a_large_fleet_newest_stack_first_each_target_in_one_image():
    sys.path.insert(0, str(ROOT / "bench"))
    import bench_fleet

    path = Path(os.environ.get("TMPDIR", "/tmp")) / f"envbuild-models-{os.getpid()}.yaml"
    path.write_text(bench_fleet.models_fleet_text(100))
    try:
        fleet = load_fleet(str(path))
    finally:
        path.unlink()
    plan = plan_fleet(spec_from_mapping({"frameworks": {"pytorch": None}}), fleet.targets)
    names = [r.target.name for i in plan.images for r in i.targets] + [r.target.name for r in plan.uncovered]
    assert sorted(names) == sorted(fleet.names())  # each target once: in one image, or uncovered
    assert len(plan.images) == 2  # Kepler is driven by no R580 driver; Pascal/Volta need a CUDA 12 build
    cudas = [tuple(int(x) for x in i.stack.cuda.split(".")) for i in plan.images]
    assert cudas == sorted(cudas, reverse=True)
    assert all(r.conflicts and r.verdict == "conflict" for r in plan.uncovered)


def test_the_cover_is_exact_and_the_bound_falls_back_to_the_greedy_rule():
    # greedy takes the largest set first and then needs two more; two sets suffice
    serves = [{1, 2, 3, 4}, {1, 2, 5}, {3, 4, 6}]
    assert _cover(serves, {1, 2, 3, 4, 5, 6}) == [1, 2]
    assert _cover(serves, {1, 2, 3, 4, 5, 6}, limit=0) == [0, 1, 2]
    # ties go to the newer (earlier) stack
    assert _cover([{1}, {1}], {1}) == [0] and _cover([{1}, {1}], {1}, limit=0) == [0]


def test_a_plan_item_out_of_range_and_fleet_flags_without_a_fleet_are_one_line(inputs):
    spec, fleet = inputs
    line = _one_line(_cli("image", spec, "--fleet", fleet, "--plan-item", "3"))
    assert line == "envbuild: error: --plan-item: the plan has no image 3 (the plan has 2 image(s): give 1 to 2)"
    assert "--plan needs --fleet" in _one_line(_cli("image", spec, "--plan"))
    assert "--tag names one image" in _one_line(_cli("image", spec, "--fleet", fleet, "--tag", "x"))
    assert "--jobs must be a whole number" in _one_line(_cli("image", spec, "--fleet", fleet, "--jobs", "0"))


def test_a_foreign_file_where_the_manifest_goes_is_refused_and_kept(inputs, tmp_path):
    spec, fleet = inputs
    mine = tmp_path / "fleet-images.json"
    mine.write_text('{"my": "data"}\n')
    line = _one_line(_cli("image", spec, "--fleet", fleet, "--manifest", mine))
    assert "exists and is not an envbuild fleet manifest; it is left as it is" in line
    assert mine.read_text() == '{"my": "data"}\n'


# --- the manifest, as verify and export read it -----------------------------------------------

def _manifest(tmp_path: Path, fleet: Path, *, skip: str | None = None, digest: bool = True) -> Path:
    targets = {t.name: t for t in load_fleet(str(fleet)).targets}
    items = {"a100": 1, "h100-mig": 1, "v100": 2}
    entries = [manifest.entry(targets[n], f"{REPO}:{i}{'0' * 15}", DIGESTS[i] if digest else None, i, "ok")
               for n, i in items.items() if n != skip]
    path = tmp_path / "fleet-images.json"
    manifest.write(path, {}, entries, fleet=str(fleet))
    return path


@pytest.mark.parametrize("command", ["verify", "export"])
def test_a_manifest_that_does_not_fit_the_fleet_is_one_line(inputs, tmp_path, command):
    _, fleet = inputs
    head = ["verify", "--static", "--workdir", tmp_path / "work"] if command == "verify" else ["export", "slurm", "-o", tmp_path / "jobs"]
    run = lambda path, f=fleet: _cli(*head, "--fleet", f, "--manifest", path)  # noqa: E731
    line = _one_line(run(_manifest(tmp_path, fleet, skip="v100")))
    assert "target v100 is not in the manifest" in line and "--target v100" in line
    moved = tmp_path / "moved.yaml"
    moved.write_text(fleet.read_text().replace("520.61.05", "535.104.05"))
    line = _one_line(run(_manifest(tmp_path, fleet), moved))
    assert "the manifest does not match the fleet: target v100's image was planned for driver 520.61.05, " \
           "the fleet now says 535.104.05" in line
    fewer = tmp_path / "fewer.yaml"
    data = yaml.safe_load(fleet.read_text())
    del data["targets"]["h100-mig"]
    fewer.write_text(yaml.safe_dump(data))
    assert "names target 'h100-mig', which the fleet does not have" in _one_line(run(_manifest(tmp_path, fleet), fewer))
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert "not a JSON file" in _one_line(run(bad))
    bad.write_text(json.dumps({"envbuild_manifest": 1, "targets": {"v100": {"reference": "x; rm -rf /", "target": {},
                                                                           "plan_item": 1}}}))
    assert "malformed image reference of target v100" in _one_line(run(bad))
    assert not (tmp_path / "jobs").exists() and not (tmp_path / "work").exists()


def test_export_needs_the_pushed_digest_and_verify_here_needs_one_target(inputs, tmp_path):
    _, fleet = inputs
    unpushed = _manifest(tmp_path, fleet, digest=False)
    assert "was not pushed" in _one_line(_cli("export", "k8s", "--fleet", fleet, "--manifest", unpushed, "-o", tmp_path / "j"))
    assert "verifies one target on this host" in _one_line(_cli("verify", "--manifest", unpushed))
    assert "target gpu-x is not in the manifest" in _one_line(_cli("verify", "--manifest", unpushed, "--target", "gpu-x"))


MIXED = """targets:
  v100:
    gpu: V100
    driver: 520.61.05
    scheduler: {kind: batch, job_queue: gpu-queue}
  a100:
    gpu: A100
    driver: 550.54.15
    scheduler: {kind: k8s, namespace: ml}
  h100-mig:
    gpu: H100
    mig: 1g.10gb
    driver: 550.54.15
    scheduler: {kind: k8s, namespace: ml}
"""


def test_the_plan_drives_one_job_per_target_for_each_seed_system(tmp_path):
    """Batch, Metaflow (@kubernetes on the Kubernetes targets), Coiled and Flyte: one file per
    target, each naming its own image by digest; Batch's by botocore, Metaflow's by its
    `check`, Flyte's by flytekit."""
    from botocore.validate import ParamValidator
    import botocore.session

    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(MIXED)
    path = _manifest(tmp_path, fleet)
    image = {n: f"{REPO}:{i}{'0' * 15}@{DIGESTS[i]}" for n, i in (("v100", 2), ("a100", 1), ("h100-mig", 1))}
    out = {kind: tmp_path / kind for kind in ("batch", "metaflow", "coiled", "flyte")}
    for kind in ("batch", "metaflow", "coiled"):
        done = _cli("export", kind, "--fleet", fleet, "--manifest", path, "-o", out[kind])
        assert done.returncode == 0, done.stderr
        assert sorted(p.name for p in out[kind].iterdir()) == sorted(f"envbuild-{n}.{'json' if kind == 'batch' else 'py'}"
                                                                      for n in image)
    shape = botocore.session.get_session().get_service_model("batch").operation_model("RegisterJobDefinition").input_shape
    for name in image:
        body = json.loads((out["batch"] / f"envbuild-{name}.json").read_text())
        assert not ParamValidator().validate(body, shape).has_errors()
        props = body.get("containerProperties") or body["eksProperties"]["podProperties"]["containers"][0]
        assert props["image"] == image[name]
    # the JSON answer: one entry per target, each with its own image
    done = _cli("export", "k8s", "--fleet", fleet, "--manifest", path, "-o", tmp_path / "k8s", "--json")
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    validate("export", answer)
    assert answer["uncovered"] == []
    assert {j["target"]: j["image"] for j in answer["jobs"]} == image
    # these images are made up: no labels to judge their stacks by, so each job is unverified, saying why
    assert answer["verdict"] == "unverified" and all(j["verdict"] == "unverified" for j in answer["jobs"])
    assert all(j["unchecked"][0]["message"].startswith(f"the stack was not judged on target {j['target']}: ")
               for j in answer["jobs"])
    # metaflow: @batch on the Batch target's queue, @kubernetes in the namespace of the Kubernetes ones
    env = dict(os.environ, USERNAME="envbuild-test", METAFLOW_DATASTORE_SYSROOT_S3="s3://example-bucket/metaflow",
               METAFLOW_HOME=str(tmp_path / "mfhome"))
    for name, decorator in (("v100", f"@batch(image='{image['v100']}', gpu=1, memory=16384, queue='gpu-queue')"),
                            ("a100", f"@kubernetes(image='{image['a100']}', gpu=1, memory=16384, namespace='ml')")):
        flow = out["metaflow"] / f"envbuild-{name}.py"
        assert decorator in flow.read_text()
        done = subprocess.run([sys.executable, str(flow), "--no-pylint", "--datastore=s3", "check"],
                              capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120)
        assert done.returncode == 0 and "The graph looks good!" in done.stdout + done.stderr, done.stdout + done.stderr
    for name in image:  # coiled: each target's image in its software environment
        assert f"container={image[name]!r}" in (out["coiled"] / f"envbuild-{name}.py").read_text()
    # flyte: flytekit partitions only the A100, so the H100 slice is left out; the task
    # flytekit constructs runs the target's image
    done = _cli("export", "flyte", "--fleet", fleet, "--manifest", path, "-o", out["flyte"], "--target", "v100",
                "--target", "a100")
    assert done.returncode == 0, done.stderr
    for name in ("v100", "a100"):
        module = flyte_module(out["flyte"] / f"envbuild-{name}.py", f"envbuild_flyte_{name}")
        assert getattr(module, f"envbuild_{name}").container_image == image[name]


def test_several_targets_need_a_folder(inputs, tmp_path):
    _, fleet = inputs
    line = _one_line(_cli("export", "k8s", "--image", f"{REPO}:1", "--fleet", fleet))
    assert "3 targets get one job definition each" in line and "-o DIR" in line
