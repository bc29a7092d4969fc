"""Slurm: an sbatch script that runs the image on the partition's GPUs.

The container carries CUDA, so the script never loads a cuda module. How the image runs
depends on the site (`scheduler.runtime`): Apptainer (`apptainer exec --nv docker://...`,
the default), pyxis (`srun --container-image`), the Docker engine, Podman, or `host`: run
the probe directly on the node with the node's own Python, which checks the submission path
where no container runtime exists (the probe's static part only needs the standard library).

Docker and Podman run outside the job's cgroup, so they are told which GPUs Slurm gave the
job: Slurm's global GPU IDs (SLURM_JOB_GPUS, never relative to a device cgroup) become the
CDI device names of the NVIDIA Container Toolkit, `--device nvidia.com/gpu=<id>` (a Docker engine
with CDI, Podman 4.1+), or `--gpus device=<ids>` for Docker's legacy NVIDIA runtime hook
(`devices: gpus`).
"""
from __future__ import annotations

import re
import time
from pathlib import Path
from typing import TYPE_CHECKING

from envbuild.errors import EnvironmentProblem
from envbuild.targets.job import IMAGE_PROBE, Job

if TYPE_CHECKING:
    import subprocess

KIND = "slurm"
SUFFIX = ".sh"
KEYS = {
    "partition": (str, "the partition, e.g. gpu"),
    "gres_type": (str, "the GPU type in gres.conf, e.g. v100 (gives --gres=gpu:v100:N)"),
    "account": (str, "the account to charge"),
    "qos": (str, "the quality of service"),
    "runtime": (str, "apptainer (default), pyxis, docker, podman or host"),
    "devices": (str, "how docker asks for the job's GPUs: cdi (default, --device nvidia.com/gpu=<id>) or gpus (--gpus)"),
    "time": (str, "time limit, e.g. 01:00:00"),
    "mem": (str, "memory per job as sbatch takes it, e.g. 16G (default: 16G)"),
}
REQUIRED = ("partition",)
RUNTIMES = ("apptainer", "pyxis", "docker", "podman", "host")
DEVICES = ("cdi", "gpus")
FINISHED = {"ENDED", "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED", "BOOT_FAIL", "DEADLINE"}


def gres(job: Job) -> str:
    cfg = job.scheduler
    gtype = cfg.get("gres_type") or (job.target.mig if job.target and job.target.mig else None)
    return f"gpu:{gtype}:{job.gpus}" if gtype else f"gpu:{job.gpus}"


def render(job: Job) -> str:
    cfg = job.scheduler
    runtime = cfg.get("runtime", "apptainer")
    if runtime not in RUNTIMES:
        from envbuild.errors import UserError

        raise UserError(f"unknown Slurm runtime {runtime!r}", where=job.target.where if job.target else "runtime",
                        hint=f"one of: {', '.join(RUNTIMES)}")
    devices = cfg.get("devices", "cdi")
    if devices not in DEVICES or devices == "gpus" and runtime != "docker":
        from envbuild.errors import UserError

        raise UserError(f"scheduler.devices {devices!r} does not apply to runtime {runtime}"
                        if devices in DEVICES else f"unknown scheduler.devices {devices!r}",
                        where=job.target.where if job.target else "devices",
                        hint="cdi (docker or podman) or gpus (docker's --gpus only)")
    lines = ["#!/bin/bash", f"#SBATCH --job-name={job.name}"]
    for key in ("partition", "account", "qos"):
        if cfg.get(key):
            lines.append(f"#SBATCH --{key}={cfg[key]}")
    lines += [f"#SBATCH --gres={gres(job)}", f"#SBATCH --time={cfg.get('time') or job.time}",
              f"#SBATCH --mem={cfg.get('mem') or str(job.memory_gib) + 'G'}", "#SBATCH --nodes=1", "#SBATCH --ntasks=1"]
    if job.extra.get("output"):
        lines.append(f"#SBATCH --output={job.extra['output']}")
    if runtime == "host" and job.probe_path == IMAGE_PROBE:
        # no container on the node: this envbuild's probe, run by the node's own Python
        from dataclasses import replace

        from envbuild import probe

        job = replace(job, probe_path=str(Path(probe.__file__).resolve()))
    lines += ["set -euo pipefail", f"IMAGE={job.shell([job.image])}",
              "# The image carries CUDA and its libraries: no `module load cuda` (it would shadow them)."]
    if runtime in ("docker", "podman"):
        lines += _device_lines(devices)
    steps = ([job.probe_command()] if job.verify_first and job.command else []) + [job.main_command()]
    for argv in steps:
        lines.append(_wrap(runtime, job, argv))
    return "\n".join(lines) + "\n"


def _wrap(runtime: str, job: Job, argv: list[str]) -> str:
    command = job.shell(argv)
    if runtime == "apptainer":
        return f'apptainer exec --nv "docker://$IMAGE" {command}'
    if runtime == "pyxis":
        return f'srun --container-image="$IMAGE" {command}'
    if runtime in ("docker", "podman"):
        return f'{runtime} run --rm "${{GPUS[@]}}" "$IMAGE" {command}'
    return f"# runtime: host (no container; the probe checks this node's Python)\n{command}"


def _device_lines(devices: str) -> list[str]:
    lines = ['[[ -n "${SLURM_JOB_GPUS:-}" ]] || { echo "envbuild: Slurm named no GPUs for this job'
             ' (SLURM_JOB_GPUS is empty): the node\'s gres.conf needs File= device paths" >&2; exit 1; }']
    if devices == "gpus":
        return lines + ["# Slurm's global GPU IDs, for Docker's NVIDIA runtime hook",
                        'GPUS=(--gpus "\\"device=$SLURM_JOB_GPUS\\"")']
    return lines + ["# Slurm's global GPU IDs as CDI device names (as `nvidia-ctk cdi generate` names GPUs by index)",
                    "GPUS=()",
                    'for id in ${SLURM_JOB_GPUS//,/ }; do GPUS+=(--device "nvidia.com/gpu=$id"); done']


# --- submitting (envbuild verify --fleet) -----------------------------------------------------------
def _run(argv: list[str]) -> subprocess.CompletedProcess:
    import shutil  # only to run a command: a fleet file's check of the scheduler needs neither
    import subprocess

    if shutil.which(argv[0]) is None:
        raise EnvironmentProblem(f"{argv[0]} not found", where="slurm", hint="run on a Slurm login node, or install slurm-client")
    return subprocess.run(argv, capture_output=True, text=True, timeout=60)


def submit(jobs: list[Job], workdir, progress, *, timeout: float = 900, poll: float = 1.0) -> dict[str, dict]:
    """One sbatch per target; wait for all, then read each job's output file."""
    from envbuild import atomic
    from envbuild.probe_report import report_from_output

    ids: dict[str, str] = {}
    outputs = {}
    for job in jobs:
        out = workdir / f"{job.name}.out"
        job = Job(**{**job.__dict__, "extra": {**job.extra, "output": str(out)}})
        script = workdir / f"{job.name}.sh"
        atomic.write_text(script, render(job))
        done = _run(["sbatch", "--parsable", str(script)])
        if done.returncode != 0:
            message = (done.stderr or done.stdout).strip().splitlines()
            raise EnvironmentProblem(f"sbatch refused the job for {job.target.name if job.target else job.name}: "
                                     f"{message[-1] if message else 'exit ' + str(done.returncode)}", where="slurm")
        ids[job.name] = done.stdout.strip().split(";")[0]
        outputs[job.name] = out
    states = {name: "PENDING" for name in ids}
    deadline = time.monotonic() + timeout
    while True:
        for name, jid in ids.items():
            if states[name] not in FINISHED:
                states[name] = _state(jid)
        progress(f"verify: {sum(s in FINISHED for s in states.values())}/{len(states)} done ("
                 + ", ".join(f"{n}: {s.lower()}" for n, s in states.items()) + ")")
        if all(s in FINISHED for s in states.values()):
            break
        if time.monotonic() > deadline:  # cancel what is left rather than leave it queued or running
            for name, jid in ids.items():
                if states[name] not in FINISHED:
                    _run(["scancel", jid])
                    states[name] = f"CANCELLED after {timeout:g} s (envbuild verify --timeout)"
            break
        time.sleep(poll)
    results = {}
    for name, jid in ids.items():
        text = outputs[name].read_text(errors="replace") if outputs[name].exists() else ""
        results[name] = {"scheduler_job": jid, "state": states[name], "probe": report_from_output(text),
                         "output": str(outputs[name]), "tail": text[-2000:] if states[name] != "COMPLETED" else ""}
    return results


def _state(job_id: str) -> str:
    done = _run(["scontrol", "show", "job", "-o", job_id])
    if done.returncode != 0:
        if "Invalid job id" in done.stderr:  # already purged from the controller: it ended
            return "ENDED"
        raise EnvironmentProblem(f"scontrol cannot read job {job_id}: {done.stderr.strip()}", where="slurm")
    match = re.search(r"JobState=(\S+)", done.stdout)
    return match.group(1) if match else "UNKNOWN"
