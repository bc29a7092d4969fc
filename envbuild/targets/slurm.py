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
import shlex
import shutil
import subprocess
import time
from dataclasses import replace
from functools import partial
from pathlib import Path

from envbuild.core import fields
from envbuild.infra import atomic
from envbuild.infra.errors import EnvironmentProblem, UserError
from envbuild.infra.paths import PROBE_FILE
from envbuild.output import say
from envbuild.targets.job import IMAGE_PROBE, Job

KIND = "slurm"
SUFFIX = ".sh"
RUNTIMES = ("apptainer", "pyxis", "docker", "podman", "host")
DEVICES = ("cdi", "gpus")
DEVICES_HINT = "cdi (docker or podman) or gpus (docker's --gpus only)"
KEYS = {
    "partition": (partial(fields.slurm_partitions, what="scheduler.partition"), "the partition, e.g. gpu"),
    "gres_type": (partial(fields.gres_type, what="scheduler.gres_type"),
                  "the GPU type in gres.conf, e.g. v100 (gives --gres=gpu:v100:N)"),
    "account": (partial(fields.slurm_name, what="scheduler.account"), "the account to charge"),
    "qos": (partial(fields.slurm_name, what="scheduler.qos"), "the quality of service"),
    "runtime": (partial(fields.choice, what="Slurm runtime", choices=RUNTIMES), "apptainer (default), pyxis, docker, podman or host"),
    "devices": (partial(fields.choice, what="scheduler.devices", choices=DEVICES, hint=DEVICES_HINT),
                "how docker asks for the job's GPUs: cdi (default, --device nvidia.com/gpu=<id>) or gpus (--gpus)"),
    "time": (partial(fields.slurm_time, what="scheduler.time"), "time limit as sbatch takes it, e.g. 01:00:00, 90 (minutes) or 1-00:00:00"),
    "mem": (partial(fields.memory_mib, what="scheduler.mem", bare_unit="M"),
            "memory per job as sbatch takes it, e.g. 16G (default: 16G; a bare number is MB, as for sbatch)"),
}
REQUIRED = ("partition",)
FINISHED = {"ENDED", "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED", "BOOT_FAIL", "DEADLINE"}
# What an #SBATCH value may hold: sbatch reads these lines itself, so no quoting applies;
# every value was checked by its field's grammar, this is the last guard.
_DIRECTIVE_VALUE = re.compile(r"[A-Za-z0-9_.,:+-]+")


def check(config: dict, where) -> None:
    if config.get("devices") == "gpus" and config.get("runtime", "apptainer") != "docker":
        raise UserError(f"scheduler.devices 'gpus' does not apply to runtime {config.get('runtime', 'apptainer')}",
                        where=where("devices"), hint=DEVICES_HINT)


def gres(job: Job) -> str:
    cfg = job.scheduler
    gtype = cfg.get("gres_type") or (job.target.mig if job.target and job.target.mig else None)
    return f"gpu:{gtype}:{job.gpus}" if gtype else f"gpu:{job.gpus}"


def _directive(option: str, value: str) -> str:
    if not _DIRECTIVE_VALUE.fullmatch(value):
        raise ValueError(f"unchecked value for #SBATCH --{option}: {value!r}")
    return f"#SBATCH --{option}={value}"


def render(job: Job) -> str:
    """The sbatch script: #SBATCH lines of checked tokens, then fixed lines whose only
    variable parts are words quoted for bash (shlex.quote); no value starts a line."""
    cfg = job.scheduler
    runtime = cfg.get("runtime", "apptainer")
    devices = cfg.get("devices", "cdi")
    if runtime not in RUNTIMES or devices not in DEVICES:
        raise ValueError(f"unchecked Slurm runtime {runtime!r} or devices {devices!r}")
    lines = ["#!/bin/bash", _directive("job-name", job.name)]
    for key in ("partition", "account", "qos"):
        if cfg.get(key):
            lines.append(_directive(key, cfg[key]))
    lines += [_directive("gres", gres(job)), _directive("time", fields.slurm_time_text(cfg.get("time") or job.time_limit_s)),
              _directive("mem", fields.memory_text(cfg.get("mem") or job.memory_mib, binary_suffix=False)),
              "#SBATCH --nodes=1", "#SBATCH --ntasks=1"]
    if runtime == "host" and job.probe_path == IMAGE_PROBE:
        # no container on the node: this envbuild's probe, run by the node's own Python
        job = replace(job, probe_path=str(PROBE_FILE))
    lines += ["set -euo pipefail", f"IMAGE={shlex.quote(job.image)}",
              "# The image carries CUDA and its libraries: no `module load cuda` (it would shadow them)."]
    if runtime in ("docker", "podman"):
        lines += _device_lines(devices)
    if runtime == "host":
        lines.append("# runtime: host (no container; the probe checks this node's Python)")
    for argv in job.steps():
        lines.append(_wrap(runtime, job.shell(argv)))
    return "\n".join(lines) + "\n"


def _wrap(runtime: str, command: str) -> str:
    if runtime == "apptainer":
        return f'apptainer exec --nv "docker://$IMAGE" {command}'
    if runtime == "pyxis":
        return f'srun --container-image="$IMAGE" {command}'
    if runtime in ("docker", "podman"):
        return f'{runtime} run --rm "${{GPUS[@]}}" "$IMAGE" {command}'
    return command


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
    if shutil.which(argv[0]) is None:
        raise EnvironmentProblem(f"{argv[0]} not found", where="slurm", hint="run on a Slurm login node, or install slurm-client")
    say.command(argv)
    return subprocess.run(argv, capture_output=True, text=True, timeout=60)


def submit(jobs: list[Job], workdir, progress, *, timeout: float = 900, poll: float = 1.0) -> dict[str, dict]:
    """One sbatch per target; wait for all, then read each job's output file."""
    ids: dict[str, str] = {}
    outputs = {}
    for job in jobs:
        out = workdir / f"{job.name}.out"
        script = workdir / f"{job.name}.sh"
        atomic.write_text(script, render(job))
        # the output path is an argument of sbatch, never a line of the script: --workdir may hold anything
        done = _run(["sbatch", "--parsable", f"--output={_output_pattern(out)}", str(script)])
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
        progress.status(f"verify: {sum(s in FINISHED for s in states.values())}/{len(states)} done ("
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
        results[name] = {"scheduler_job": jid, "state": states[name], "printed": text,
                         "output": str(outputs[name]), "tail": text[-2000:] if states[name] != "COMPLETED" else ""}
    return results


def _output_pattern(path: Path) -> str:
    """`path` as sbatch's --output takes it: `%` starts a pattern there (%j, %x), `%%` is a
    `%`; a backslash anywhere turns the patterns off."""
    text = str(path.resolve())
    return text if "\\" in text else text.replace("%", "%%")


def _state(job_id: str) -> str:
    done = _run(["scontrol", "show", "job", "-o", job_id])
    if done.returncode != 0:
        if "Invalid job id" in done.stderr:  # already purged from the controller: it ended
            return "ENDED"
        raise EnvironmentProblem(f"scontrol cannot read job {job_id}: {done.stderr.strip()}", where="slurm")
    match = re.search(r"JobState=(\S+)", done.stdout)
    return match.group(1) if match else "UNKNOWN"
