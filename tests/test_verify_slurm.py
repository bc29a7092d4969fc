"""Slurm end to end on the single-node Slurm of scripts/services.sh (GPU gres of types
v100 and a100 declared on stand-in device files: the node has no GPU, so jobs run the
probe's static part, with the node's Python (`runtime: host`) or in the image through
Podman (`runtime: podman`), which gets the job's GPUs by their CDI names from the test
CDI spec that scripts/services.sh writes)."""
from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import time
import uuid
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

from browser import look_at
from cli_support import in_process
from test_ci_output import validate

from envbuild.infra.paths import PROBE_FILE

ROOT = Path(__file__).resolve().parent.parent
FLEET = """targets:
  v100:
    gpu: V100
    driver: 535.104.05
    scheduler: {kind: slurm, partition: gpu, gres_type: v100, runtime: host, mem: 200M, time: "00:05:00"}
  a100:
    gpu: A100
    driver: 535.104.05
    scheduler: {kind: slurm, partition: gpu, gres_type: GRES, runtime: host, mem: 200M, time: "00:05:00"}
"""


def _cli(env, *args, cwd=ROOT) -> subprocess.CompletedProcess:
    """envbuild run in this process (tests/cli_support.py): these tests read what it says and writes."""
    return in_process(*args, cwd=cwd, env=env)


def _fleet(tmp_path, gres="a100") -> str:
    path = tmp_path / "fleet.yaml"
    path.write_text(FLEET.replace("GRES", gres))
    return str(path)


def _sbatch_wait(script: Path, env, *options: str) -> str:
    """Submit `script` and wait for its job to end; return its JobState and ExitCode as
    `scontrol` shows them ("COMPLETED 0:0": the job's script exited 0). Looked at every
    0.1 s: `sbatch --wait` sleeps 2 s, then 8 s, between its looks."""
    submit = subprocess.run(["sbatch", "--parsable", *options, str(script)], env=env, capture_output=True, text=True,
                            timeout=60)
    assert submit.returncode == 0, submit.stderr
    job = submit.stdout.strip().split(";")[0]
    deadline = time.monotonic() + 200  # a hang guard, not a measurement
    while True:
        shown = subprocess.run(["scontrol", "show", "job", "-o", job], env=env, capture_output=True, text=True,
                               timeout=60).stdout
        state, code = re.search(r"JobState=(\S+)", shown).group(1), re.search(r"ExitCode=(\S+)", shown).group(1)
        if state not in ("PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED", "RESIZING"):
            return f"{state} {code}"
        assert time.monotonic() < deadline, shown
        time.sleep(0.1)


def test_exported_sbatch_script_is_accepted_and_runs_to_completion(tmp_path, slurm_env):
    script = tmp_path / "job.sh"
    done = _cli(slurm_env, "export", "slurm", "--image", "127.0.0.1:5555/team/train:1", "--fleet", _fleet(tmp_path),
                "--target", "v100", "--static", "-o", str(script))
    assert done.returncode == 0, done.stderr
    text = script.read_text()
    assert "#SBATCH --gres=gpu:v100:1" in text and "#SBATCH --partition=gpu" in text and "module load" not in text.replace("`module load cuda`", "")
    out = tmp_path / "job.out"
    assert _sbatch_wait(script, slurm_env, f"--output={out}") == "COMPLETED 0:0", out.read_text()
    report = json.loads(out.read_text()[out.read_text().index("{"):])
    assert report["mode"] == "static" and report["summary"]["ok"] is True


def test_verify_fleet_runs_the_probe_on_two_targets_and_merges_the_reports(tmp_path, slurm_env):
    fleet = _fleet(tmp_path)
    done = _cli(slurm_env, "verify", "127.0.0.1:5555/team/train:1", "--fleet", fleet, "--static",
                "--workdir", str(tmp_path / "work"), "--json", str(tmp_path / "v.json"), "--junit", str(tmp_path / "v.xml"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "verify: 2/2 done" in done.stderr  # the progress line
    report = json.loads((tmp_path / "v.json").read_text())
    assert report["ok"] and [t["name"] for t in report["targets"]] == ["v100", "a100"]
    for t in report["targets"]:
        assert t["status"] == "pass" and t["state"] == "COMPLETED" and t["scheduler_job"]
        assert any(c["name"] == "static.python" and c["status"] == "pass" for c in t["checks"])
    suites = ET.parse(tmp_path / "v.xml").getroot().findall("testsuite")
    assert [s.get("name") for s in suites] == ["envbuild.verify.v100", "envbuild.verify.a100"]
    assert all(int(s.get("tests")) > 3 and s.get("failures") == "0" for s in suites)
    scripts = sorted(p.name for p in (tmp_path / "work").glob("*.sh"))
    assert scripts == ["envbuild-verify-a100.sh", "envbuild-verify-v100.sh"]
    assert "--gres=gpu:a100:1" in (tmp_path / "work" / "envbuild-verify-a100.sh").read_text()


def test_a_job_slurm_refuses_is_exit_3_with_slurms_message(tmp_path, slurm_env):
    done = _cli(slurm_env, "verify", "img:1", "--fleet", _fleet(tmp_path, gres="h100"), "--target", "a100",
                "--static", "--workdir", str(tmp_path / "work"))
    assert done.returncode == 3, done.stderr
    line = done.stderr.strip().splitlines()[-1]
    assert line.startswith("envbuild: error: slurm: sbatch refused the job for a100:") and "Requested node configuration is not available" in line


def test_slurm_down_is_exit_3(tmp_path, slurm_env):
    conf = Path(slurm_env["SLURM_CONF"]).read_text().replace("SlurmctldPort=16817", "SlurmctldPort=16999")
    # sbatch tries a controller it cannot reach once a second, MessageTimeout (default 10) times: once is enough
    (tmp_path / "slurm.conf").write_text(conf.rstrip("\n") + "\nMessageTimeout=1\n")
    env = dict(slurm_env, SLURM_CONF=str(tmp_path / "slurm.conf"))
    done = _cli(env, "verify", "img:1", "--fleet", _fleet(tmp_path), "--target", "v100", "--static",
                "--workdir", str(tmp_path / "work"))
    assert done.returncode == 3
    assert "Unable to contact slurm controller" in done.stderr.strip().splitlines()[-1]


def test_verify_fleet_on_kubernetes_without_a_context_writes_manifests_and_says_how_to_apply(tmp_path):
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text("targets:\n  a100:\n    gpu: A100\n    scheduler: {kind: k8s, namespace: ml}\n"
                     "  g5:\n    gpu: A10G\n    scheduler: {kind: batch, job_queue: q}\n")
    env = dict(os.environ, KUBECONFIG=str(tmp_path / "no-kubeconfig"))
    done = _cli(env, "verify", "img:1", "--fleet", str(fleet), "--workdir", str(tmp_path / "work"),
                "--junit", str(tmp_path / "v.xml"))
    assert done.returncode == 1  # nothing ran: not a pass
    assert "kubectl apply -f " in done.stderr and str(tmp_path / "work" / "envbuild-verify-a100.yaml") in done.stderr
    assert (tmp_path / "work" / "envbuild-verify-g5.json").exists()
    assert "NOT_RUN  a100" in done.stdout and "0 passed, 0 failed, 2 not run" in done.stdout
    suites = ET.parse(tmp_path / "v.xml").getroot().findall("testsuite")
    assert [s.get("skipped") for s in suites] == ["1", "1"]


# --- containers: Podman (a CDI consumer) on the Slurm node ---------------------------------------
@pytest.fixture(scope="module")
def probe_image(slurm_env, docker_client, registry, base_image) -> str:
    """The stand-in base with the probe at /opt/envbuild/probe.py, pushed to the open registry."""
    import image_support

    if shutil.which("podman") is None:
        pytest.fail("podman is missing: run ./scripts/services.sh up")
    ref = f"{registry}/{image_support.TEST_NAMESPACE}/fleet-probe:{uuid.uuid4().hex[:8]}"
    image_support.build_image(docker_client, ref, {
        "Dockerfile": f"FROM {base_image}\nCOPY probe.py /opt/envbuild/probe.py\n".encode(),
        "probe.py": PROBE_FILE.read_bytes()})
    docker_client.images.push(ref)
    yield ref
    subprocess.run(["podman", "rmi", "--ignore", ref], capture_output=True)


CONTAINERS = """targets:
  v100:
    gpu: V100
    scheduler: {kind: slurm, partition: gpu, gres_type: v100, runtime: host, mem: 200M, time: "00:05:00"}
  a100:
    gpu: A100
    scheduler: {kind: slurm, partition: gpu, gres_type: a100, runtime: podman, mem: 500M, time: "00:05:00"}
  v100-docker:
    gpu: V100
    scheduler: {kind: slurm, partition: gpu, gres_type: v100, runtime: docker, mem: 500M, time: "00:05:00"}
"""


def test_verify_fleet_passes_on_a_host_target_and_a_podman_target(tmp_path, slurm_env, probe_image, browser):
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(CONTAINERS)
    done = _cli(slurm_env, "verify", probe_image, "--fleet", str(fleet), "--target", "v100", "--target", "a100",
                "--static", "--workdir", str(tmp_path / "work"), "--json", str(tmp_path / "v.json"),
                "--junit", str(tmp_path / "v.xml"), "--html", str(tmp_path / "v.html"))
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads((tmp_path / "v.json").read_text())
    assert [(t["name"], t["status"], t["state"]) for t in report["targets"]] == [
        ("v100", "pass", "COMPLETED"), ("a100", "pass", "COMPLETED")]
    podman = report["targets"][1]
    assert podman["probe"]["python"] == "3.11.2"  # the image's Python (the stand-in's Debian bookworm), not the node's
    assert any(c["name"] == "static.python" and c["status"] == "pass" for c in podman["checks"])
    suites = ET.parse(tmp_path / "v.xml").getroot().findall("testsuite")
    assert [s.get("name") for s in suites] == ["envbuild.verify.v100", "envbuild.verify.a100"]
    assert all(s.get("failures") == "0" for s in suites)
    script = (tmp_path / "work" / "envbuild-verify-a100.sh").read_text()
    assert 'GPUS+=(--device "nvidia.com/gpu=$id")' in script and 'podman run --rm "${GPUS[@]}" "$IMAGE" python3 /opt/envbuild/probe.py' in script
    # the page: a section per target, each with the checks its job's probe reported
    view = look_at(browser, tmp_path / "v.html")
    shown = view.evaluate("[...document.querySelectorAll('section.target')].map(s => [s.querySelector('h2').innerText, "
                          "[...s.querySelectorAll('tbody tr')].map(r => r.cells[1].innerText.split(' ')[0])])")
    assert shown == [[f"Target {t['name']}", [c["name"] for c in t["checks"]]] for t in report["targets"]]


def test_a_podman_job_sees_exactly_the_gpus_slurm_gave_it(tmp_path, slurm_env, probe_image):
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(CONTAINERS)
    script = tmp_path / "job.sh"
    done = _cli(slurm_env, "export", "slurm", "--image", probe_image, "--fleet", str(fleet), "--target", "a100",
                "--static", "--command", "sh -c 'echo devices: /dev/nvidia*'", "-o", str(script))
    assert done.returncode == 0, done.stderr
    out = tmp_path / "job.out"
    assert _sbatch_wait(script, slurm_env, f"--output={out}") == "COMPLETED 0:0", out.read_text()
    seen = [line.split()[1:] for line in out.read_text().splitlines() if line.startswith("devices:")]
    # gres a100 is fake GPUs 2 and 3: the container holds the one Slurm allocated, nothing of the v100s
    assert seen in ([["/dev/nvidia2"]], [["/dev/nvidia3"]]), out.read_text()


def test_a_container_that_cannot_start_is_a_fail_with_the_engines_message(tmp_path, slurm_env, registry):
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(CONTAINERS)
    missing = f"{registry}/envbuild-tests/absent-{uuid.uuid4().hex[:8]}:1"
    done = _cli(slurm_env, "verify", missing, "--fleet", str(fleet), "--target", "a100", "--target", "v100-docker",
                "--static", "--workdir", str(tmp_path / "work"), "--json", str(tmp_path / "v.json"), "--timeout", "120")
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("FAIL     a100 ") and "(job " in lines[0] and "failed): Error: initializing source" in lines[0]
    assert "manifest unknown" in lines[0] and "manifest unknown" in lines[1]  # podman's words, then the Docker engine's
    assert lines[1].startswith("FAIL     v100-docker ") and "docker: Error response from daemon" in lines[1]
    report = json.loads((tmp_path / "v.json").read_text())
    for t in report["targets"]:
        assert t["status"] == "fail" and t["state"] == "FAILED" and t["failed_required"] == ["scheduler.job"]
        assert missing in t["checks"][0]["cause"]


@pytest.mark.parametrize("runtime, devices, expected", [
    ("docker", "gpus", 'GPUS=(--gpus "\\"device=$SLURM_JOB_GPUS\\"")'),
    ("podman", "gpus", "error: "),
    ("docker", "nvidia", "error: "),
])
def test_how_docker_and_podman_ask_for_gpus(tmp_path, runtime, devices, expected):
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(f"targets:\n  a:\n    gpu: A100\n    scheduler: {{kind: slurm, partition: gpu, runtime: {runtime}, devices: {devices}}}\n")
    done = _cli(dict(os.environ), "export", "slurm", "--image", "img:1", "--fleet", str(fleet), "--target", "a")
    if expected == "error: ":
        assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert "scheduler.devices" in done.stderr and "cdi (docker or podman) or gpus (docker's --gpus only)" in done.stderr
    else:
        assert done.returncode == 0 and expected in done.stdout and "nvidia.com/gpu" not in done.stdout


def test_jobs_still_running_at_the_timeout_are_cancelled(tmp_path, slurm_env):
    done = _cli(slurm_env, "verify", "img:1", "--fleet", _fleet(tmp_path), "--target", "v100", "--static",
                "--workdir", str(tmp_path / "work"), "--json", str(tmp_path / "v.json"), "--timeout", "0")
    assert done.returncode == 1, done.stderr
    [target] = json.loads((tmp_path / "v.json").read_text())["targets"]
    assert target["status"] == "fail" and target["state"] == "CANCELLED after 0 s (envbuild verify --timeout)"
    state = subprocess.run(["scontrol", "show", "job", "-o", target["scheduler_job"]], env=slurm_env,
                           capture_output=True, text=True).stdout
    assert "JobState=CANCELLED" in state  # not left queued or running


# --- hostile values never reach Slurm; what envbuild writes, Slurm reads as meant ----------------
@pytest.mark.parametrize("key, value", [
    ("partition", "gpu\nsleep 600"), ("account", "ml\ntouch /tmp/envbuild-pwned"), ("qos", "normal;id"),
    ("mem", "200M\nid"), ("time", "00:05:00\n#SBATCH --wrap=id"), ("gres_type", "v100\r\nid"),
])
def test_a_hostile_fleet_value_is_refused_before_anything_is_submitted(tmp_path, slurm_env, key, value):
    name = f"h{uuid.uuid4().hex[:8]}"
    scheduler = {"kind": "slurm", "partition": "gpu", "gres_type": "v100", "runtime": "host", key: value}
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(yaml.safe_dump({"targets": {name: {"gpu": "V100", "scheduler": scheduler}}}))
    done = _cli(slurm_env, "verify", "img:1", "--fleet", str(fleet), "--static", "--workdir", str(tmp_path / "work"))
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("envbuild: error: ") and f"scheduler.{key}" in lines[0], lines
    assert not (tmp_path / "work").exists()
    queued = subprocess.run(["squeue", "-h", "-t", "all", "-n", f"envbuild-verify-{name}"], env=slurm_env,
                            capture_output=True, text=True, timeout=60)
    assert queued.returncode == 0 and queued.stdout.strip() == ""  # Slurm never saw a job


def test_shell_syntax_in_a_workload_reaches_the_job_as_words(tmp_path, slurm_env):
    """The workload's arguments, run by bash under Slurm, arrive exactly as written."""
    words = ["$(id)", "a;b", "it's", "`id`", '"""', "x && touch pwned", "$HOME"]
    script = tmp_path / "job.sh"
    done = _cli(slurm_env, "export", "slurm", "--image", "img:1", "--fleet", _fleet(tmp_path), "--target", "v100",
                "--static", "--command", shlex.join(["printf", "<%s>\\n", *words]), "-o", str(script))
    assert done.returncode == 0, done.stderr
    out = tmp_path / "job.out"
    assert _sbatch_wait(script, slurm_env, f"--output={out}", f"--chdir={tmp_path}") == "COMPLETED 0:0", out.read_text()
    printed = [line for line in out.read_text().splitlines() if line.startswith("<")]
    assert printed == [f"<{w}>" for w in words]
    assert not (tmp_path / "pwned").exists()


@pytest.mark.parametrize("written, limit", [("90", "01:30:00"), ("30:00", "00:30:00"), ("1-00:00:00", "1-00:00:00"),
                                            ("1-12", "1-12:00:00")])
def test_slurm_reads_the_time_limit_envbuild_writes_as_the_fleet_meant_it(tmp_path, slurm_env, written, limit):
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text("targets:\n  a:\n    gpu: V100\n"
                     f"    scheduler: {{kind: slurm, partition: gpu, gres_type: v100, runtime: host, mem: 200, time: {written}}}\n")
    script = tmp_path / "job.sh"
    done = _cli(slurm_env, "export", "slurm", "--image", "img:1", "--fleet", str(fleet), "--static", "-o", str(script))
    assert done.returncode == 0, done.stderr
    held = subprocess.run(["sbatch", "--parsable", "--hold", f"--output={tmp_path / 'job.out'}", str(script)],
                          env=slurm_env, capture_output=True, text=True, timeout=60)
    assert held.returncode == 0, held.stderr
    job = held.stdout.strip().split(";")[0]
    try:
        shown = subprocess.run(["scontrol", "show", "job", "-o", job], env=slurm_env, capture_output=True, text=True,
                               timeout=60).stdout
    finally:
        subprocess.run(["scancel", job], env=slurm_env, capture_output=True, timeout=60)
    assert f"TimeLimit={limit} " in shown
    assert "MinMemoryNode=200M " in shown  # a bare number is MB, as sbatch reads it


# --- the stack judged on each target before a job is written or run -------------------------------
# The CuPy recipe pins CUDA 12.4: a CUDA 12 build needs driver >= 525.60.13, so it does not run on
# the R470 target; it does on the R550 one (whose driver also starts its CUDA 12.4 base image).
CUPY = ROOT / "recipes" / "cupy.yaml"


def _judged_fleet(tmp_path) -> str:
    """Two V100 targets on the test Slurm, one on R470 and one on R550."""
    slurm = {"kind": "slurm", "partition": "gpu", "gres_type": "v100", "runtime": "host", "mem": "200M",
             "time": "00:05:00"}
    targets = {name: {"gpu": "V100", "driver": driver, "scheduler": slurm}
               for name, driver in (("r470", "470.82.01"), ("r550", "550.54.15"))}
    path = tmp_path / "judged.yaml"
    path.write_text(yaml.safe_dump({"targets": targets}))
    return str(path)


def _submit(script: Path, env) -> dict:
    out = script.with_suffix(".out")
    assert _sbatch_wait(script, env, f"--output={out}") == "COMPLETED 0:0", out.read_text()
    return json.loads(out.read_text()[out.read_text().index("{"):])


def test_export_writes_nothing_for_a_target_the_stack_does_not_run_on(tmp_path, slurm_env):
    fleet, script = _judged_fleet(tmp_path), tmp_path / "job.sh"
    refused = _cli(slurm_env, "export", "slurm", CUPY, "--image", "127.0.0.1:5555/team/train:1", "--fleet", fleet,
                   "--target", "r470", "--static", "-o", str(script))
    assert refused.returncode == 1 and not script.exists()
    assert "CONFLICT [driver_too_old] cupy 13 is built for CUDA 12.4, which needs driver >= 525.60.13" in refused.stderr
    assert "does not run on target r470" in refused.stderr and "nothing was written" in refused.stderr
    as_json = _cli(slurm_env, "export", "slurm", CUPY, "--image", "img:1", "--fleet", fleet, "--target", "r470",
                   "--json")
    assert as_json.returncode == 1 and json.loads(as_json.stdout)["verdict"] == "conflict"
    # --force writes it anyway (and says so); the target the stack runs on gets its job, which Slurm runs
    forced = _cli(slurm_env, "export", "slurm", CUPY, "--image", "img:1", "--fleet", fleet, "--target", "r470",
                  "--force", "-o", str(tmp_path / "forced.sh"))
    assert forced.returncode == 0 and "although the stack is conflict there" in forced.stderr
    ok = _cli(slurm_env, "export", "slurm", CUPY, "--image", "127.0.0.1:5555/team/train:1", "--fleet", fleet,
              "--target", "r550", "--static", "-o", str(script))
    assert ok.returncode == 0, ok.stderr
    assert _submit(script, slurm_env)["summary"]["ok"] is True
    answer = json.loads(_cli(slurm_env, "export", "slurm", CUPY, "--image", "127.0.0.1:5555/team/train:1", "--fleet",
                             fleet, "--target", "r550", "--json").stdout)
    validate("export", answer)
    assert (answer["verdict"], answer["target"], answer["unchecked"], answer["conflicts"]) == ("ok", "r550", [], [])


def test_verify_fleet_does_not_run_a_target_the_expected_stack_conflicts_on(tmp_path, slurm_env):
    fleet = _judged_fleet(tmp_path)
    done = _cli(slurm_env, "verify", "127.0.0.1:5555/team/train:1", "--fleet", fleet, "--expect", CUPY, "--static",
                "--workdir", str(tmp_path / "work"), "--json", str(tmp_path / "v.json"), "--junit", str(tmp_path / "v.xml"))
    assert done.returncode == 1, done.stdout + done.stderr  # a target not run is no pass
    report = json.loads((tmp_path / "v.json").read_text())
    r470, r550 = report["targets"]
    assert (r470["status"], r470["resolve_verdict"], r470["scheduler_job"]) == ("not_run", "conflict", None)
    assert r470["not_run_reason"].startswith("the stack does not run on this target: cupy 13 is built for CUDA 12.4")
    assert (r550["status"], r550["resolve_verdict"], r550["state"]) == ("pass", "ok", "COMPLETED")
    assert not (tmp_path / "work" / "envbuild-verify-r470.sh").exists()  # never submitted
    assert done.stdout.splitlines()[0].startswith("NOT_RUN  r470") and "driver >= 525.60.13" in done.stdout
    skipped = ET.parse(tmp_path / "v.xml").getroot().find("testsuite/testcase/skipped")
    assert "not run: the stack does not run on this target" in skipped.get("message")
    forced = _cli(slurm_env, "verify", "127.0.0.1:5555/team/train:1", "--fleet", fleet, "--expect", CUPY, "--static",
                  "--force", "--workdir", str(tmp_path / "forced"), "--json", str(tmp_path / "f.json"))
    assert forced.returncode == 0, forced.stdout + forced.stderr
    assert [t["status"] for t in json.loads((tmp_path / "f.json").read_text())["targets"]] == ["pass", "pass"]


def test_verify_fleet_runs_an_unverified_target_and_says_what_was_not_checked(tmp_path, slurm_env):
    """A compute capability no GPU in the table has: the kernels link is unchecked there. The
    probe still runs (it is the check the matrices could not make), unless --strict."""
    slurm = {"kind": "slurm", "partition": "gpu", "gres_type": "v100", "runtime": "host", "mem": "200M",
             "time": "00:05:00"}
    fleet = tmp_path / "odd.yaml"
    fleet.write_text(yaml.safe_dump({"targets": {"odd": {"gpu": "9.9", "driver": "550.54.15", "scheduler": slurm}}}))
    done = _cli(slurm_env, "verify", "127.0.0.1:5555/team/train:1", "--fleet", str(fleet), "--expect", CUPY,
                "--static", "--workdir", str(tmp_path / "work"), "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    validate("verify", report)
    (odd,) = report["targets"]
    assert (odd["status"], odd["resolve_verdict"]) == ("pass", "unverified")
    assert [u["links"] for u in odd["resolve_unchecked"]] == [["gpu_arch"]]
    assert "odd: the stack is unverified there: no GPU in the matrix has compute capability 9.9" in done.stderr
    strict = _cli(slurm_env, "verify", "127.0.0.1:5555/team/train:1", "--fleet", str(fleet), "--expect", CUPY,
                  "--static", "--strict", "--workdir", str(tmp_path / "strict"), "--json")
    assert strict.returncode == 1
    (odd,) = json.loads(strict.stdout)["targets"]
    assert (odd["status"], odd["scheduler_job"]) == ("not_run", None)
    assert odd["not_run_reason"].startswith("the stack could not be checked (--strict) on this target: no GPU")


def test_the_labels_of_an_image_envbuild_built_judge_the_targets(tmp_path, slurm_env, docker_client, registry,
                                                                  base_image):
    """No spec given: the stack is the one the image records in its labels, as the Dockerfile
    stage writes them, read back through the registry API."""
    import dataclasses

    import image_support
    from envbuild import pipeline
    from envbuild.dockerfile import render
    from envbuild.spec import load_spec

    resolution = pipeline.resolve(dataclasses.replace(load_spec(CUPY), for_image=True))
    labels = render.labels(render.RenderInput(resolution, "pip", resolution.resolved.base_image.ref,
                                              facts=pipeline.context_facts(resolution)))
    lines = "".join(f"LABEL {json.dumps(k)}={json.dumps(v)}\n" for k, v in labels.items())
    ref = f"{registry}/{image_support.TEST_NAMESPACE}/labelled:{uuid.uuid4().hex[:8]}"
    image_support.build_image(docker_client, ref, {"Dockerfile": f"FROM {base_image}\n{lines}".encode()})
    docker_client.images.push(ref)
    fleet = _judged_fleet(tmp_path)
    done = _cli(slurm_env, "verify", ref, "--fleet", fleet, "--static", "--workdir", str(tmp_path / "work"),
                "--json", str(tmp_path / "v.json"))
    report = json.loads((tmp_path / "v.json").read_text())
    assert [(t["name"], t["status"]) for t in report["targets"]] == [("r470", "not_run"), ("r550", "pass")], done.stderr
    assert "cupy 13 is built for CUDA 12.4" in report["targets"][0]["not_run_reason"]
    refused = _cli(slurm_env, "export", "slurm", "--image", ref, "--fleet", fleet, "--target", "r470")
    assert refused.returncode == 1 and "[driver_too_old]" in refused.stderr and "#SBATCH" not in refused.stdout
    ok = _cli(slurm_env, "export", "slurm", "--image", ref, "--fleet", fleet, "--target", "r550")
    assert ok.returncode == 0 and "#SBATCH --gres=gpu:v100:1" in ok.stdout and "not judged" not in ok.stderr


def test_an_image_without_envbuild_labels_is_run_unjudged_and_says_so(tmp_path, slurm_env):
    done = _cli(slurm_env, "export", "slurm", "--image", "127.0.0.1:5555/team/absent:1", "--fleet",
                _judged_fleet(tmp_path), "--target", "r470")
    assert done.returncode == 0 and "#SBATCH" in done.stdout
    assert "the stack was not judged on target r470: the registry has no image" in done.stderr
    answer = json.loads(_cli(slurm_env, "export", "slurm", "--image", "127.0.0.1:5555/team/absent:1", "--fleet",
                             _judged_fleet(tmp_path), "--target", "r470", "--json").stdout)
    validate("export", answer)  # a job written for a stack nobody judged there is no ok
    assert answer["verdict"] == "unverified" and answer["conflicts"] == []
    assert answer["unchecked"][0]["message"].startswith("the stack was not judged on target r470")
    strict = _cli(slurm_env, "export", "slurm", "--image", "127.0.0.1:5555/team/absent:1", "--fleet",
                  _judged_fleet(tmp_path), "--target", "r470", "--strict")
    assert strict.returncode == 1 and "#SBATCH" not in strict.stdout
