"""Where jobs run: one module per scheduler kind, all with the same small protocol.

Each module `envbuild/targets/<kind>.py` defines
    KIND            the name used in fleet files and `envbuild export KIND`
    KEYS            {scheduler key: (check, description)}; REQUIRED: the keys a target must give.
                    `check(value, where)` is the field's validator (envbuild.core.fields): it
                    returns the canonical value, or raises the one-line UserError
    check(config, where)  optional: rules across keys, after each key's own
    SUFFIX          the file name ending of its job definition (".yaml", ".sh", ".py", ".json")
    render(job)     -> the job definition text for a `Job`
and, for kinds that `envbuild verify --fleet` can submit to,
    submit(jobs, workdir, progress) -> {job name: what the scheduler said of it}: the
                    job's id and final state, where its output is, and what it printed
                    (`printed`, in which envbuild.verify finds the probe's report)
                    (progress: an envbuild.output.progress.Progress; `status` for the polled
                    state, `line` for a milestone)
and, for kinds that can run on another kind's targets,
    adopt(scheduler) -> the settings of this kind taken from another kind's scheduler
A new scheduler is one new module here plus its name in KINDS.
"""
from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any, Callable

from envbuild.core import fields
from envbuild.infra.errors import UserError
from envbuild.spec.validate import did_you_mean

KINDS = ("k8s", "slurm", "batch", "metaflow", "coiled", "flyte")
# Keys every kind takes: how the CI pipelines `envbuild export github-actions|gitlab-ci`
# writes reach a runner with the target's GPU.
COMMON_KEYS = {
    "runner_labels": (fields.runner_labels, "labels (GitHub Actions) or tags (GitLab CI) of the self-hosted CI "
                                            "runners with this target's GPU, e.g. [self-hosted, gpu-a100]"),
}


def module(kind: str, where: str = "kind") -> ModuleType:
    if kind not in KINDS:
        raise UserError(f"unknown scheduler kind {kind!r}", where=where,
                        hint=did_you_mean(kind, KINDS) or f"one of: {', '.join(KINDS)}")
    return importlib.import_module(f"envbuild.targets.{kind}")


def check_scheduler(config: dict[str, Any], where: Callable[[str | None], str]) -> dict[str, Any]:
    """A target's `scheduler:` mapping, each key checked by its kind's validator; the
    canonical values (a Slurm time in seconds, memory in MiB, a MIG profile in NVIDIA's
    spelling). Numbers and booleans arrive as written in the file (`time: 30:00` is
    "30:00", not YAML's sexagesimal 1800)."""
    kind = config.get("kind")
    if not isinstance(kind, str):
        raise UserError("scheduler has no kind", where=where(None), hint=f"add `kind:` one of {', '.join(KINDS)}")
    mod = module(kind, where("kind"))
    checked: dict[str, Any] = {"kind": kind}
    for key, value in config.items():
        if key == "kind":
            continue
        keys = {**mod.KEYS, **COMMON_KEYS}
        if key not in keys:
            known = ", ".join(keys)
            raise UserError(f"unknown key {str(key)[:60]!r} for a {kind} scheduler", where=where(key), hint=f"known keys: {known}")
        check, _ = keys[key]
        checked[key] = check(value, where(key))
    missing = [k for k in getattr(mod, "REQUIRED", ()) if k not in config]
    if missing:
        raise UserError(f"a {kind} scheduler needs {missing[0]!r}", where=where(None), hint=mod.KEYS[missing[0]][1])
    if hasattr(mod, "check"):
        mod.check(checked, where)
    return checked


def scheduler_for(scheduler: dict[str, Any], kind: str) -> dict[str, Any]:
    """A target's scheduler settings as a job of `kind` takes them: its own when it is of
    that kind; else what `kind` adopts from it (a module's optional `adopt(scheduler)`,
    e.g. a Metaflow step on a Kubernetes target runs under @kubernetes in its namespace);
    else none, as each kind's keys mean nothing to another."""
    if scheduler.get("kind") == kind:
        return dict(scheduler)
    adopt = getattr(module(kind), "adopt", None)
    return {"kind": kind, **(adopt(scheduler) if adopt else {})}
