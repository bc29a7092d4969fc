"""Dump what envbuild prints for a fixed corpus of commands, to compare two source trees.

    python3 bench/outputs.py corpus CORPUS.json     # write the corpus (seeded random requests)
    PYTHONPATH=TREE python3 bench/outputs.py run CORPUS.json OUT.json
    python3 bench/outputs.py diff A.json B.json

`run` calls `envbuild.cli.main` in one process for every command of the corpus and keeps
its exit code, stdout, stderr and every file it wrote; `diff` prints the commands whose
output differs. The corpus: every recipe (text, JSON, --strict, each export kind,
`dockerfile`, `lock` and `lock --check`), each fleet of tests/data alone and with every
recipe, each fleet target's export, 240 seeded random requests (frameworks and constraints,
CUDA, driver, GPUs, Python, installer, platform, base, --strict; each in text and JSON),
`envbuild matrix` queries, and conda locks and Dockerfiles of specs on the local test
channels of tests/data/lock_channels.yaml.

The pip recipes' locks and Dockerfiles ask the package index (PyPI), so run the two trees
one right after the other; a channel or index that cannot be reached may fail on another
of its URLs in each run. `{OUT}` in a command is a fresh empty folder and `{PROJECT}` a
folder holding the local channels and the conda specs (both under one fixed folder,
$TMPDIR/envbuild-outputs, so run one tree at a time); both are written as those names in
the results, as are the temporary folders envbuild names in its messages.
"""
from __future__ import annotations

import contextlib
import io
import json
import random
import re
import shutil
import sys
import tempfile
from pathlib import Path

import yaml

from envbuild.cli import main

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from lock_channels import repodata_channels  # noqa: E402  (a helper of the tests, not part of envbuild)

# Conda specs the local test channels can solve (and one they cannot).
CONDA_SPECS = {"torch212-cu121": ("2.1.2", "12.1", "3.10", "A100-80GB"), "torch212-cu118": ("2.1.2", "11.8", "3.10", "L4"),
               "torch160-cu102": ("1.6.0", "10.2", "3.8", "V100"), "torch160-cu110": ("1.6.0", "11.0", "3.8", "V100")}
CONDA_SPEC = """\
name: {name}
frameworks: {{pytorch: "{version}"}}
cuda: "{cuda}"
python: "{python}"
target: {{driver: "535.104.05", gpus: ["{gpu}"], platform: linux-64}}
installer: conda
channels: [./channels/pytorch, ./channels/nvidia, ./channels/main]
"""
# The names of the temporary folders envbuild makes and prints (random suffixes).
TEMPORARY = re.compile(r"(envbuild-[a-z-]+?)[-_][a-z0-9_]{8}\b|/tmp/tmp[a-z0-9_]{8}")

FRAMEWORKS = {
    "pytorch": ["2.8.0", "2.7.1", "2.5.1", "2.4.0", "2.1.2", "1.13.1", "1.10.2", "1.7.1", "1.6.0", "1.7.1+cu101",
                "2.1.*", ">=2.1,<2.3", ">=2.6", "<1.9"],
    "tensorflow": ["2.17.0", "2.16.1", "2.15.0", "2.13.0", "2.11.0", "2.4.0", ">=2.15,<2.17", "2.10.*"],
    "jax": ["0.4.30", "0.4.26", "0.4.20", "0.5.0", "0.6.2", ">=0.4.30", "0.4.*"],
    "rapids": ["24.08", "24.04", "23.10", "25.02", ">=24"],
    "cupy": ["13.3.0", "13.0.0", "12.3.0", "11.6.0", ">=13"],
}
CUDAS = ["10.2", "11.0", "11.2", "11.8", "12.0", "12.1", "12.4", "12.6", "12.8", "12.9", "13.0", "11.0.221", "9.2"]
DRIVERS = ["418.87.01", "450.80.02", "470.82.01", "510.47.03", "525.60.13", "535.104.05", "550.54.15",
           "560.35.03", "570.124.06", "580.65.06", "390.1"]
GPUS = ["A100", "A100-80GB", "V100", "T4", "L4", "H100", "RTX 3090", "RTX 4090", "K80", "P100", "A10G", "8.6",
        "sm_90", "B200", "RTX 6000", "GTX 1080", "Jetson Orin", "GH200", "a100 80gb", "NotAGPU 9000", "7.0"]
PYTHONS = ["3.8", "3.9", "3.10", "3.11", "3.12", "3.13", "3.6", "3.14"]
PLATFORMS = ["linux-64", "linux-aarch64", "win-64", "osx-arm64"]
BASES = ["cuda", "pytorch", "dlc", "rapids", "tensorflow", "nvidia/cuda:12.4.1-runtime-ubuntu22.04"]


def corpus(path: str) -> None:
    rng = random.Random(24)
    recipes = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "recipes").glob("*.yaml"))
    fleets = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests" / "data" / "fleets").glob("*.yaml"))
    commands = []
    for recipe in recipes:
        commands += [["resolve", recipe], ["resolve", recipe, "--json"], ["resolve", recipe, "--strict"],
                     ["dockerfile", recipe, "-o", "{OUT}"], ["lock", recipe, "-o", "{OUT}", "--json"]]
        for kind in ("k8s", "slurm", "batch", "metaflow", "coiled", "flyte"):
            commands.append(["export", kind, recipe, "--image", "registry.example/ml/env:1"])
    for fleet in fleets:
        for target, row in yaml.safe_load((ROOT / fleet).read_text())["targets"].items():
            for recipe in recipes:
                commands.append(["export", row["scheduler"]["kind"], recipe, "--fleet", fleet, "--target", target,
                                 "--image", "registry.example/ml/env:1", "--json"])
        commands += [["resolve", "--fleet", fleet], ["resolve", "--fleet", fleet, "--json"]]
        for recipe in recipes:
            commands += [["resolve", recipe, "--fleet", fleet], ["resolve", recipe, "--fleet", fleet, "--json"]]
    for name in CONDA_SPECS:
        spec = f"{{PROJECT}}/{name}.yaml"
        commands += [["lock", spec, "-o", "{OUT}"], ["dockerfile", spec, "-o", "{OUT}", "--json"],
                     ["lock", spec, "-o", "{PROJECT}/lock-" + name], ["lock", spec, "-o", "{PROJECT}/lock-" + name, "--check"]]
    for _ in range(240):
        argv = ["resolve"]
        for name in rng.sample(sorted(FRAMEWORKS), rng.choice([1, 1, 1, 1, 2])):
            constraint = rng.choice(FRAMEWORKS[name] + [None])
            argv += ["--framework", name if constraint is None else f"{name}=={constraint}"
                     if constraint[0].isdigit() else f"{name}{constraint}"]
        for flag, choices, p in (("--cuda", CUDAS, 0.3), ("--driver", DRIVERS, 0.4), ("--python", PYTHONS, 0.4),
                                 ("--installer", ["pip", "conda"], 0.4), ("--platform", PLATFORMS, 0.2),
                                 ("--base", BASES, 0.3)):
            if rng.random() < p:
                argv += [flag, rng.choice(choices)]
        for gpu in rng.sample(GPUS, rng.choice([0, 1, 1, 1, 2])):
            argv += ["--gpu", gpu]
        if rng.random() < 0.15:
            argv.append("--strict")
        commands.append(argv)
        commands.append(argv + ["--json"])
    for topic in (["gpu", "A100"], ["gpu", "RTX 6000"], ["gpu", "8.6"], ["cuda", "12.4"], ["cuda", "11.8", "--json"],
                  ["driver", "535.104.05"], ["driver", "470.82.01", "--json"], ["pytorch", "2.1"],
                  ["pytorch", "--json"], ["tensorflow"], ["jax", "0.4.30"], ["rapids"], ["cupy", "--json"],
                  ["images", "--family", "cuda"], ["images", "--json"]):
        commands.append(["matrix", *topic])
    Path(path).write_text(json.dumps(commands, indent=0))
    print(f"{len(commands)} commands")


def _project(folder: Path) -> None:
    repodata_channels(folder / "channels")
    for name, (version, cuda, python, gpu) in CONDA_SPECS.items():
        (folder / f"{name}.yaml").write_text(CONDA_SPEC.format(name=name, version=version, cuda=cuda, python=python,
                                                               gpu=gpu))


OUTPUTS_RECORD = ".envbuild-outputs"  # an output folder's record of what envbuild wrote there


def _files(folder: Path) -> dict[str, str]:
    """Every file under `folder` by its relative path (a binary one by its size). The
    output folder's record keeps its entries' names only: each entry's fingerprint covers
    its files' mtimes and inodes, which differ in every run."""
    found = {}
    for file in sorted(p for p in folder.rglob("*") if p.is_file()):
        data = file.read_bytes()
        try:
            text = data.decode()
        except UnicodeDecodeError:
            text = f"{len(data)} bytes"
        if file.name == OUTPUTS_RECORD:
            record = json.loads(text)
            text = json.dumps({**record, "entries": sorted(record.get("entries", {}))})
        found[str(file.relative_to(folder))] = text
    return found


def run(path: str, out: str) -> None:
    results = []
    # One fixed folder, emptied first: a lock's content hash covers its channels' full URLs.
    scratch = Path(tempfile.gettempdir()) / "envbuild-outputs"
    shutil.rmtree(scratch, ignore_errors=True)
    try:
        project = scratch / "project"
        _project(project)
        for number, argv in enumerate(json.loads(Path(path).read_text())):
            output = scratch / f"out{number}"
            names = {"{OUT}": str(output), "{PROJECT}": str(project)}
            real = [arg.replace("{OUT}", names["{OUT}"]).replace("{PROJECT}", names["{PROJECT}"]) for arg in argv]
            stdout, stderr = io.StringIO(), io.StringIO()
            with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
                try:
                    code = main(real)
                except SystemExit as exc:
                    code = exc.code
                except Exception as exc:  # a traceback is an output too
                    code = f"raised {type(exc).__name__}: {exc}"
            result = {"argv": argv, "code": code, "stdout": stdout.getvalue(), "stderr": stderr.getvalue()}
            if output.exists():
                result["files"] = _files(output)
            text = json.dumps(result)
            for name, real_path in names.items():
                text = text.replace(real_path, name)
            results.append(json.loads(TEMPORARY.sub(lambda m: (m.group(1) or "/tmp/tmp") + "-TMP", text)))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    Path(out).write_text(json.dumps(results, indent=1))
    print(f"{len(results)} commands, exit codes: "
          + ", ".join(f"{c}: {sum(str(r['code']) == c for r in results)}" for c in sorted({str(r['code']) for r in results})))


def diff(a: str, b: str) -> int:
    left, right = json.loads(Path(a).read_text()), json.loads(Path(b).read_text())
    differ = [(x, y) for x, y in zip(left, right) if x != y]
    for x, y in differ[:20]:
        print(" ".join(x["argv"]))
        for key in ("code", "stdout", "stderr", "files"):
            if x.get(key) != y.get(key):
                print(f"  {key}:\n    A {x.get(key)!r:.600}\n    B {y.get(key)!r:.600}")
    print(f"{len(left)} commands, {len(differ)} differ" + ("" if len(left) == len(right) else ", corpus sizes differ"))
    return 1 if differ or len(left) != len(right) else 0


if __name__ == "__main__":
    what, *rest = sys.argv[1:]
    sys.exit({"corpus": corpus, "run": run, "diff": diff}[what](*rest) or 0)
