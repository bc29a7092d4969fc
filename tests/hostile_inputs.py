"""Hostile and careless values for every field that reaches a job definition: a fleet file's
scheduler keys and target keys, and the `export` flags. Shared by the refusal tests and the
fuzz through the consumers."""
from __future__ import annotations

import yaml

# What an attacker writes into a text field: a new line (a new command in an sbatch script),
# shell and Python syntax, quotes, Unicode line breaks, NUL, and far too much.
INJECTIONS = [
    "gpu\nsrun id",
    "gpu\r\nid",
    "gpu\u2028id",
    "gpu\x00",
    "gpu;id",
    "gpu && id",
    "$(id)",
    "`id`",
    "gpu'\"",
    '"""\nimport os; os.system("id")\n"""',
    "gpu #x",
    "g" * 100_000,
]
# What a careless YAML author writes where one string is meant
WRONG_SHAPES = [["gpu", "cpu"], {"a": 1}, None]

BASE_SCHEDULERS = {
    "slurm": {"kind": "slurm", "partition": "gpu"},
    "k8s": {"kind": "k8s"},
    "batch": {"kind": "batch", "job_queue": "gpu-queue"},
    "metaflow": {"kind": "metaflow"},
    "coiled": {"kind": "coiled"},
    "flyte": {"kind": "flyte"},
}
KINDS = tuple(BASE_SCHEDULERS)

# scheduler key -> values it must refuse, beyond the injections and wrong shapes
SCHEDULER_EXTRA = {
    "slurm": {"time": ["0", 0, "-5", "UNLIMITED", "1:60:00", "01:00:00\n#SBATCH --wrap=id"],
              "mem": ["-5", "0", "0.5G", "16Gi\nid"],
              "runtime": ["singularity", "docker; id"], "devices": ["nvidia"]},
    "k8s": {"node_selector": [{"pool": ["a", "b"]}, {"pool": {"a": "b"}}, {"bad key!": "x"}, {"pool": "a\nb"}],
            "tolerations": [[5], ["dedicated"], [{"key": "a", "operator": "In"}], [{"key": "a", "effect": "Never"}]],
            "namespace": ["ML", "ml.team", "-ml"]},
    "batch": {"vcpus": [0, -1, "1e23", 10**23, True], "platform": ["FARGATE", "fargate", "ECS"]},
    "metaflow": {"compute": ["slurm"], "namespace": ["ML"]},
    "coiled": {"workers": [0, -3, "1e23", 10**23, True], "region": ["US-EAST-1"]},
    "flyte": {},
}
# keys whose validators take any injection text as malformed; `context` is free text, so
# only its control characters and length are refused
SCHEDULER_KEYS = {
    "slurm": ("partition", "account", "qos", "mem", "time", "gres_type", "runtime", "devices"),
    "k8s": ("namespace", "node_selector", "tolerations", "context"),
    "batch": ("job_queue", "vcpus", "platform"),
    "metaflow": ("compute", "queue", "namespace"),
    "coiled": ("region", "workers", "workspace"),
    "flyte": ("project", "domain"),
}
FREE_TEXT = {("k8s", "context")}

TARGET_VALUES = {
    "gpu": ["A100\nsrun id", "A100;$(id)", ["A100"], "A" * 10_000],
    "mig": ["3g.40gb\nid", "3G.40GB; id", "../../x", 3],
    "driver": ["535.104.05\n", "535.104.05; id", "535.104.05\u2028"],
    "gpus_per_node": [0, -1, "1e23", 10**23, True, 1.5],
}
TARGET_NAMES = ["a\nb", "A", "a;b", "a" * 64, "$(id)"]


def scheduler_cases(kind: str) -> list[tuple[str, object]]:
    """(key, value) pairs the scheduler of `kind` must refuse."""
    cases = []
    for key in SCHEDULER_KEYS[kind]:
        values = INJECTIONS + WRONG_SHAPES if (kind, key) not in FREE_TEXT else [v for v in INJECTIONS if not v.isprintable()
                                                                                  or len(v) > 1000] + WRONG_SHAPES
        if key == "node_selector":  # a mapping is its shape
            values = [v for v in values if not isinstance(v, dict)]
        cases += [(key, v) for v in values + SCHEDULER_EXTRA[kind].get(key, [])]
    return cases


def fleet_yaml(kind: str, *, scheduler: dict | None = None, target: dict | None = None, name: str = "t") -> str:
    body = {"gpu": "A100-80GB" if kind != "coiled" else "A100", **(target or {}),
            "scheduler": {**BASE_SCHEDULERS[kind], **(scheduler or {})}}
    if "mig" in (target or {}):
        body["gpu"] = "A100-80GB"
    return yaml.safe_dump({"targets": {name: body}}, allow_unicode=False, width=10**6)


# export flags -> values every kind must refuse, and what only the Python kinds refuse
FLAG_VALUES = {
    "--image": ['x"""\nimport os; os.system("id")\n"""', "x:1\nid", "x:1; id", "$(id):1", "X:1", "x:1'", "a/" + "b" * 300 + ":1"],
    "--name": ["a\nb", "Job", "a;b", "a" * 64, "-job", "$(id)"],
    "--gpus": ["0", "-1", "1e23", "99999999999999999999999", "١", "1.0", "true"],
    "--time": ["0", "-5", "UNLIMITED", "1:2:3:4", "01:00:00\nid", "1.5"],
    "--mem": ["-5", "0", "0.5G", "16G\nid", "lots"],
    "--command": ['echo "x', "echo 'x", "echo x\\", "python\ntrain.py", "a\x00b", " "],
    "--repository": ["127.0.0.1:5555/team/x:1", "x\nid", "X"],
}
PYTHON_NAMES = {"flyte": ["class", "import", "1job", "subprocess", "task"], "metaflow": ["1job", "2-fast"]}
