"""A fleet's images end to end, on the real Docker engine, the local registry and the
single-node Slurm of scripts/services.sh: a fleet of three targets (a V100 partition on an
R520 driver, an A100 node pool, H100 MIG slices) that no one PyTorch stack serves is
planned as two images on two stand-in bases, both built at once and pushed, the manifest
written; a second run builds nothing; each target is verified with its own image through
Slurm and Podman and the reports merged; one image made to fail leaves the other pushed;
the CI pipeline's shell lines run as written."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import requests
import yaml

import fleet_support
from cli_support import in_process
from conftest import _need
from image_support import TEST_NAMESPACE
from test_ci_output import validate

pytestmark = pytest.mark.docker
ROOT = Path(__file__).resolve().parent.parent


def _tags(registry: str, repository: str) -> set[str]:
    answer = requests.get(f"http://{registry}/v2/{repository}/tags/list", timeout=10)
    return set(answer.json().get("tags") or ()) if answer.status_code == 200 else set()


@pytest.fixture(scope="module")
def work(tmp_path_factory, docker_client, registry, base_image, wheelhouse):
    """The inputs, and the stand-in base as both nvidia/cuda bases under this run's mirror path."""
    folder = tmp_path_factory.mktemp("fleet-build")
    repository = f"{registry}/{TEST_NAMESPACE}/fleet-train"
    fleet_support.write_inputs(folder, repository)
    mirror = f"{registry}/{TEST_NAMESPACE}/mirror"
    fleet_support.stand_in_bases(docker_client, base_image, mirror)
    flags = ("--registry-mirror", mirror, "--wheelhouse", wheelhouse, "--lock-dir", folder / "locks")
    return {"folder": folder, "repository": repository, "flags": flags, "registry": registry}


@pytest.fixture(scope="module")
def built(work):
    """`image --fleet --jobs 2 --push`: both images built at once, pushed, the manifest written."""
    folder = work["folder"]
    plan = in_process("image", "spec.yaml", "--fleet", "fleet.yaml", "--plan", *work["flags"], cwd=folder)
    assert plan.returncode == 0, plan.stderr
    done = in_process("image", "spec.yaml", "--fleet", "fleet.yaml", "--push", "--jobs", "2", "--progress", "plain",
                      *work["flags"], cwd=folder)
    assert done.returncode == 0, done.stdout + done.stderr[-4000:]
    return {"plan": plan, "build": done, "manifest": json.loads((folder / "fleet-images.json").read_text())}


def test_two_images_are_built_at_once_pushed_and_recorded(work, built):
    stdout, stderr = built["build"].stdout, built["build"].stderr
    plan_tags = re.findall(r"^image (\d)  (\S+)$", built["plan"].stdout, re.M)
    assert [n for n, _ in plan_tags] == ["1", "2"]
    # both built, each announced in its own lane of the one progress view
    for n, tag in plan_tags:
        assert f"[image {n}] building {tag} from " in stderr
        assert re.search(rf"^OK +image {n}  {re.escape(tag)}  built, pushed ", stdout, re.M)
    assert "images: 2 done, 0 failed, 0 building, 0 waiting" in stderr
    started_2 = [i for i, line in enumerate(stderr.splitlines()) if line.startswith("[image 2] building ")]
    done_1 = [i for i, line in enumerate(stderr.splitlines()) if line.startswith("[image 1] built ")]
    assert started_2 and done_1 and started_2[0] < done_1[0]  # image 2 started before image 1 was done: at once
    pushed = _tags(work["registry"], work["repository"].split("/", 1)[1])
    assert {tag.rsplit(":", 1)[1] for _, tag in plan_tags} <= pushed
    targets = built["manifest"]["targets"]
    assert {n: (t["plan_item"], t["reference"]) for n, t in targets.items()} == {
        "a100": (1, plan_tags[0][1]), "h100-mig": (1, plan_tags[0][1]), "v100": (2, plan_tags[1][1])}
    for t in targets.values():  # by digest, as the registry has it
        answer = requests.head(f"http://{work['registry']}/v2/{work['repository'].split('/', 1)[1]}/manifests/"
                               f"{t['reference'].rsplit(':', 1)[1]}", timeout=10,
                               headers={"Accept": "application/vnd.docker.distribution.manifest.v2+json"})
        assert t["digest"] == answer.headers["Docker-Content-Digest"] and t["image"].endswith("@" + t["digest"])
    assert targets["h100-mig"]["target"] == {"gpu": "H100", "mig": "1g.10gb", "driver": "550.54.15",
                                             "platform": "linux-64"}


def test_a_second_run_builds_nothing(work, built):
    done = in_process("image", "spec.yaml", "--fleet", "fleet.yaml", "--push", "--jobs", "2", "--progress", "plain",
                      "--json", *work["flags"], cwd=work["folder"])
    assert done.returncode == 0, done.stderr
    assert "building " not in done.stderr and "[1/" not in done.stderr and "pushing " not in done.stderr
    data = json.loads(done.stdout)
    from test_ci_output import validate

    validate("image", data)
    assert [(i["cache_hit"], i["pushed"], i["digest"]) for i in data["images"]] == [
        (True, True, built["manifest"]["targets"]["a100"]["digest"]),
        (True, True, built["manifest"]["targets"]["v100"]["digest"])]
    assert json.loads((work["folder"] / "fleet-images.json").read_text()) == built["manifest"]


@pytest.fixture(scope="module")
def slurm_env():
    conf = _need("ENVBUILD_TEST_SLURM_CONF")
    return dict(os.environ, SLURM_CONF=conf)


def test_each_target_is_verified_with_its_own_image_on_slurm(work, built, slurm_env, tmp_path):
    """Podman runs each target's image in its Slurm job (the node has no GPU: the static
    probe); the torch each image carries says which image ran where."""
    folder = work["folder"]
    done = in_process("verify", "--fleet", "fleet.yaml", "--manifest", "fleet-images.json", "--static", "--workdir",
                      tmp_path / "work", "--json", tmp_path / "v.json", "--junit", tmp_path / "v.xml", cwd=folder,
                      env=slurm_env)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    report = json.loads((tmp_path / "v.json").read_text())
    validate("verify", report)
    targets = {t["name"]: t for t in report["targets"]}
    assert report["ok"] and report["image"] is None and report["manifest"] == "fleet-images.json"
    for name, cuda in (("v100", "11.8"), ("a100", "12.4"), ("h100-mig", "12.4")):
        t = targets[name]
        assert t["status"] == "pass" and t["state"] == "COMPLETED"
        assert t["image"] == built["manifest"]["targets"][name]["image"]
        torch = next(c for c in t["checks"] if c["name"] == "torch.build")
        assert torch["status"] == "pass" and f"built for CUDA {cuda}" in torch["details"]
        script = (tmp_path / "work" / f"envbuild-verify-{name}.sh").read_text()
        assert f"IMAGE={t['image']}" in script and "podman run" in script
    suites = ET.parse(tmp_path / "v.xml").getroot().findall("testsuite")
    assert [s.get("name") for s in suites] == ["envbuild.verify.v100", "envbuild.verify.a100", "envbuild.verify.h100-mig"]
    assert all(s.get("failures") == "0" for s in suites)
    print(done.stdout)


def test_jobs_per_target_name_their_image_by_digest(work, built, tmp_path):
    done = in_process("export", "slurm", "--fleet", "fleet.yaml", "--manifest", "fleet-images.json", "-o",
                      tmp_path / "jobs", cwd=work["folder"])
    assert done.returncode == 0, done.stderr
    for name, entry in built["manifest"]["targets"].items():
        assert f"IMAGE={entry['image']}" in (tmp_path / "jobs" / f"envbuild-{name}.sh").read_text()
    # each job's stack judged on its target from the labels of its own image, read from the registry
    done = in_process("export", "slurm", "--fleet", "fleet.yaml", "--manifest", "fleet-images.json", "-o",
                      tmp_path / "again", "--json", cwd=work["folder"])
    answer = json.loads(done.stdout)
    validate("export", answer)
    assert done.returncode == 0 and answer["verdict"] == "ok", done.stderr
    assert {j["target"]: (j["verdict"], j["image"]) for j in answer["jobs"]} == {
        name: ("ok", entry["image"]) for name, entry in built["manifest"]["targets"].items()}


def test_the_ci_pipelines_shell_lines_run_as_written(work, built, tmp_path):
    """The build step of the exported GitHub workflow, run by bash with the workflow's own
    variables: it builds (finds) plan item 2 and writes its manifest."""
    folder = work["folder"]
    mirror, wheels, locks = work["flags"][1], work["flags"][3], work["flags"][5]
    done = in_process("export", "github-actions", "spec.yaml", "--fleet", "fleet.yaml", "--registry-mirror", mirror,
                      "-o", "workflow.yml", cwd=folder)
    assert done.returncode == 0, done.stderr
    flow = yaml.safe_load((folder / "workflow.yml").read_text())
    step = next(s for s in flow["jobs"]["build"]["steps"] if s.get("name") == "Build and push")
    run = tmp_path / "run"
    run.mkdir()
    for name in ("spec.yaml", "fleet.yaml"):
        (run / name).write_text((folder / name).read_text())
    env = dict(os.environ, **{k: str(v) for k, v in flow["env"].items()}, PLAN_ITEM="2",
               PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    # the test run's own inputs: the wheelhouse and the locks (offline build), not part of the pipeline
    line = step["run"] + f' --wheelhouse "{wheels}" --lock-dir "{locks}"'
    done = subprocess.run(["bash", "-c", line], cwd=run, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    written = json.loads((run / "fleet-images.json").read_text())["targets"]
    assert written == {"v100": built["manifest"]["targets"]["v100"]}
    # the verify job's line, on this runner: the manifest's image for the target, reports kept
    step = next(s for s in flow["jobs"]["verify"]["steps"] if s.get("name", "").startswith("Verify"))
    done = subprocess.run(["bash", "-c", step["run"] + " --no-perf"], cwd=run, env=dict(env, TARGET="v100"),
                          capture_output=True, text=True, timeout=600)
    assert done.returncode in (0, 1) and "Traceback" not in done.stderr, done.stderr  # 1: no GPU on this host
    report = json.loads((run / "envbuild-verify-v100.json").read_text())
    assert report["image"] == written["v100"]["image"]
    assert ET.parse(run / "envbuild-verify-v100.xml").getroot().find(".//testcase") is not None


def test_one_failed_image_leaves_the_other_pushed_and_names_the_targets_it_lost(work, docker_client, tmp_path):
    """Under a mirror path that has only the CUDA 12.4 base, the CUDA 11.8 image cannot be
    built: the other is still built and pushed, and the manifest keeps only its targets."""
    registry = work["registry"]
    mirror = f"{registry}/{TEST_NAMESPACE}/half-mirror"
    fleet_support.stand_in_bases(docker_client, docker_client.images.get(
        f"{registry}/nvidia/cuda:12.4.1-runtime-ubuntu22.04").id, mirror, names=fleet_support.BASES[:1])
    folder = work["folder"]
    manifest = tmp_path / "fleet-images.json"
    flags = list(work["flags"])
    flags[1] = mirror
    done = in_process("image", "spec.yaml", "--fleet", "fleet.yaml", "--push", "--jobs", "2", "--progress", "plain",
                      "--manifest", manifest, *flags, cwd=folder)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    lines = done.stdout.splitlines()
    ok = next(line for line in lines if line.startswith("OK      image 1"))
    assert ", pushed " in ok
    failed = next(i for i, line in enumerate(lines) if line.startswith("FAILED  image 2"))
    assert "nvidia/cuda" in lines[failed] and lines[failed + 1].strip() == "targets without an image: v100"
    written = json.loads(manifest.read_text())["targets"]
    assert sorted(written) == ["a100", "h100-mig"] and all(t["digest"] for t in written.values())
    tag = ok.split()[3].rsplit(":", 1)[1]
    assert tag in _tags(registry, work["repository"].split("/", 1)[1])
    # verify and export refuse the target that has no image, in one line
    done = in_process("verify", "--fleet", "fleet.yaml", "--manifest", manifest, "--static", cwd=folder)
    assert done.returncode == 2 and "target v100 is not in the manifest" in done.stderr.strip().splitlines()[-1]
