"""A fleet file -> a checked `Fleet`. Every problem is one `UserError` naming file:line."""
from __future__ import annotations

import re
from typing import Any

from envbuild import matrix
from envbuild.core import fields
from envbuild.core.memory_size import fmt_gib, parse_gib
from envbuild.core.model import PLATFORMS
from envbuild.fleet.memory import gpu_row_memory
from envbuild.fleet.model import Fleet, Target
from envbuild.infra.errors import UserError
from envbuild.matrix.lookup import find_gpu, is_compute_capability, mig_parent, parse_compute_capability, spec_gpu_check
from envbuild.spec.parse import read_spec_file
from envbuild.spec.validate import did_you_mean
from envbuild.targets import check_scheduler

TARGET_KEYS = ("gpu", "gpus_per_node", "driver", "platform", "mig", "gpu_memory", "scheduler")
_DRIVER = re.compile(r"\d{2,4}\.\d{1,3}(?:\.\d{1,3})?")


def read_fleet(path: str) -> Fleet:
    try:
        raw = read_spec_file(path)
    except UserError as exc:  # the spec reader says "spec file"; this is a fleet file
        raise UserError(exc.message.replace("spec file", "fleet file").replace("the spec", "the fleet"),
                        where=exc.where, hint=exc.hint) from None
    return fleet_from_raw(raw)


def fleet_from_raw(raw) -> Fleet:
    m = matrix.load()
    where = lambda path, key=False: raw.where(path, key=key) or raw.source or "fleet"  # noqa: E731
    data = raw.data
    unknown = [k for k in data if k != "targets"]
    if unknown:
        raise UserError(f"unknown key {unknown[0]!r}", where=where((unknown[0],), True), hint="a fleet file has one key: targets")
    targets = data.get("targets")
    if not isinstance(targets, dict) or not targets:
        raise UserError("no targets", where=where(("targets",)), hint="write `targets:` with one entry per GPU target, name: {gpu: ..., scheduler: ...}")
    out = []
    for name, body in targets.items():
        path = ("targets", name)
        fields.dns_label(name, where(path, True), "target name")  # job names on Kubernetes and Slurm are built from it
        if not isinstance(body, dict):
            raise UserError(f"target {name!r} must be a mapping", where=where(path))
        for key in body:
            if key not in TARGET_KEYS:
                raise UserError(f"unknown key {key!r} in target {name!r}", where=where(path + (key,), True),
                                hint=did_you_mean(key, TARGET_KEYS) or f"known keys: {', '.join(TARGET_KEYS)}")
        out.append(_target(m, raw, str(name), body, path, where, check_scheduler))
    return Fleet(tuple(out), source=raw.source or "fleet")


def _text(raw, path, value) -> str:
    return str(raw.text(path, value)).strip()


def _target(m, raw, name: str, body: dict[str, Any], path: tuple, where, check_scheduler) -> Target:
    gpu = body.get("gpu")
    if gpu is None:
        raise UserError(f"target {name!r} names no gpu", where=where(path), hint="add e.g. `gpu: A100-80GB` or `gpu: 8.0`")
    gpu = fields.text(_as_written(raw, path + ("gpu",), gpu), where(path + ("gpu",)), "gpu", limit=80).strip()
    row = find_gpu(m, gpu)
    if row is None and not is_compute_capability(gpu):
        hint = spec_gpu_check(gpu)[1]
        raise UserError(f"unknown GPU {gpu!r}", where=where(path + ("gpu",)),
                        hint=hint or "give the model (A100, V100) or a compute capability (8.0)")
    if row is None:
        gpu = parse_compute_capability(gpu)
    count = fields.count(body.get("gpus_per_node", 1), where(path + ("gpus_per_node",)), "gpus_per_node",
                         maximum=fields.MAX_GPUS)
    driver = body.get("driver")
    if driver is not None:
        driver = fields.text(_as_written(raw, path + ("driver",), driver), where(path + ("driver",)), "driver", limit=40)
        if not _DRIVER.fullmatch(driver):
            raise UserError(f"malformed driver version {driver!r}", where=where(path + ("driver",)),
                            hint="write it as nvidia-smi prints it, e.g. 535.104.05")
    platform = str(body.get("platform", "linux-64"))
    if platform not in PLATFORMS:
        raise UserError(f"unknown platform {platform!r}", where=where(path + ("platform",)), hint=f"one of: {', '.join(PLATFORMS)}")

    memory, memory_from = None, None
    if body.get("gpu_memory") is not None:
        memory = parse_gib(raw.text(path + ("gpu_memory",), body["gpu_memory"]))
        if memory is None:
            raise UserError(f"malformed gpu_memory {body['gpu_memory']!r}", where=where(path + ("gpu_memory",)),
                            hint="write a size like 80GiB, 40GB or 24 (GiB)")
        memory_from = "fleet file"
    mig = body.get("mig")
    if mig is not None:
        mig = fields.mig_profile(_text(raw, path + ("mig",), mig), where(path + ("mig",)))
        profile = mig_profile(m, row, mig, parent_memory=memory, where=where(path + ("mig",)))
        mig = profile.name  # NVIDIA's spelling, as the device plugin and Slurm name the slice
        memory, memory_from = profile.memory_gb, f"MIG profile {mig}"  # the slice's memory, not the parent's
    elif memory is None and row is not None and gpu_row_memory(row):
        memory, memory_from = gpu_row_memory(row), f"GPU matrix ({row.name})"

    scheduler = body.get("scheduler")
    if not isinstance(scheduler, dict):
        raise UserError(f"target {name!r} has no scheduler mapping", where=where(path + ("scheduler",)),
                        hint="add e.g. `scheduler: {kind: slurm, partition: gpu, gres_type: v100}`")
    scheduler = check_scheduler(_as_written(raw, path + ("scheduler",), scheduler),
                                lambda key: where(path + ("scheduler",) + ((key,) if key else ())))
    return Target(name=name, gpu=gpu, gpus_per_node=count, driver=driver, platform=platform, mig=mig,
                  gpu_memory_gib=memory, memory_from=memory_from, scheduler=scheduler, where=where(path, True))


def _as_written(raw, path: tuple, value: Any) -> Any:
    """`value` with its unquoted numbers and booleans as written in the file: a scheduler's
    values are text to its validators, as a flag's would be (`time: 30:00` is "30:00", not
    YAML 1.1's sexagesimal 1800; `gpu.present: true` is "true")."""
    if isinstance(value, dict):
        return {k: _as_written(raw, path + (k,), v) for k, v in value.items()}
    if isinstance(value, list):
        return [_as_written(raw, path + (i,), v) for i, v in enumerate(value)]
    if isinstance(value, (bool, int, float)):
        return raw.texts.get(tuple(path), str(value).lower() if isinstance(value, bool) else str(value))
    return value


def mig_profile(m, row, name: str, *, parent_memory: float | None = None, where: str = "mig"):
    """The MIG profile `name` of the GPU `row`; bad input naming the valid ones otherwise."""
    if row is None:
        raise UserError(f"MIG profile {name!r} needs a GPU model, not a bare compute capability", where=where,
                        hint="name the parent GPU: A100, A30, H100, H200 or B200")
    parent = mig_parent(m, row)
    offered = [p for p in m.mig_profiles if parent is not None and p.parent == parent.name]
    if not offered:
        parents = sorted({p.parent for p in m.mig_profiles})
        raise UserError(f"{row.name} has no MIG profiles", where=where, hint=f"MIG runs on {', '.join(parents)}")
    sizes = sorted({p.parent_memory_gb for p in offered})
    if row.memory_gb in sizes:  # a board that knows its memory (A100-80GB) offers only that size's profiles
        offered = [p for p in offered if p.parent_memory_gb == row.memory_gb]
    elif parent_memory is not None:  # gpu_memory tells the 40 GB A100 from the 80 GB one
        fitting = [s for s in sizes if abs(s - parent_memory) / s < 0.1]
        offered = [p for p in offered if p.parent_memory_gb in fitting] or offered
    match = next((p for p in offered if p.name == name.lower()), None)
    if match is None:
        valid = ", ".join(dict.fromkeys(p.name for p in offered))
        raise UserError(f"{row.name} has no MIG profile {name!r}", where=where,
                        hint=f"valid profiles: {valid} (NVIDIA MIG user guide)")
    return match


def memory_text(target: Target) -> str:
    return fmt_gib(target.gpu_memory_gib) if target.gpu_memory_gib else "unknown"
