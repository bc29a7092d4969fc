"""Every export flag and fleet value, fuzzed with control characters, quotes, shell and Python
syntax, through `envbuild export KIND` (the real door: the fleet reader, the flags' checks)
to each kind's output, read back by its consumer. A value is either refused in one clean
line, or the output holds exactly what envbuild writes, with the value inert:

* slurm: `bash -n` accepts the script; bash's own parser (`bash --pretty-print`, which runs
  nothing) finds the same commands as in the script of a plain value; every #SBATCH line is
  one option with a checked token; the workload line splits (POSIX rules) into exactly the
  words expected, with no expansion outside single quotes beyond envbuild's own "$IMAGE";
* metaflow, coiled, flyte: `ast.parse` reads the module, which calls, imports and names
  exactly what the module of a plain value does, the steps' argv as a literal; then
  flytekit builds the task, metaflow the flow, and the calls bind to coiled's signatures;
* k8s: kubernetes-validate (strict) and the container's command;
* batch: botocore's ParamValidator for RegisterJobDefinition and the command.
"""
from __future__ import annotations

import ast
import contextlib
import importlib.util
import inspect
import io
import json
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import hostile_inputs as h
from envbuild.cli import main

SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
IMAGE = "127.0.0.1:5555/team/train:1"
PROBE = ["python3", "/opt/envbuild/probe.py", "--json"]
NASTY = st.sampled_from(["\n", "\r", "\t", "\x00", "\x1b", "\u2028", "\u0085", ";", "`", "$", "$(id)", "\\", '"', "'",
                         '"""', "'''", " ", "#", "&&", "|", "@", ":", "/", "=", "*", "{", "}", "\nimport os\n", "-",
                         ".", ",", "_", "+"])
# plausible pieces of each field, so that the fuzz also reaches the outputs
PLAUSIBLE = {
    "--command": ["python", "train.py", "--lr", "0.1", "'a b'", '"it\'s"', "x", "sh -c", "'echo $HOME; id'"],
    "--image": ["127.0.0.1:5555/team/train", ":1", "nvidia/cuda", ":12.4.1", "@sha256:" + "ab" * 32, "x"],
    "--name": ["train", "job", "1", "-", "class", "a"],
    "--time": ["90", "30:00", "1-", "00", ":", "12", "0"],
    "--mem": ["16", "G", "512", "M", "Gi", "B", "0"],
    "--gpus": ["1", "2", "0", "8", "e23"],
    "partition": ["gpu", ",", "long", "a100_80"],
    "account": ["ml", "team.a", "x"],
    "gres_type": ["v100", "1g.10gb", "a100"],
    "namespace": ["ml", "team-a", "x"],
    "job_queue": ["gpu-queue", "q_1", "arn:aws:batch:us-east-1:123456789012:job-queue/q"],
    "workspace": ["team", "ml.x"],
    "region": ["us-east-1", "europe-west4"],
    "project": ["ml", "flytesnacks"],
    "mig": ["3g.40gb", "3G.40GB", "MIG ", "1g.10gb", "+me"],
}
SCHEDULER_FIELDS = {"slurm": ("partition", "account", "gres_type"), "k8s": ("namespace",), "batch": ("job_queue",),
                    "metaflow": ("namespace",), "coiled": ("region", "workspace"), "flyte": ("project",)}
FLAGS = ("--command", "--image", "--name", "--time", "--mem", "--gpus")


# what str.isprintable() calls printable (the validators' rule): no control, format, private,
# unassigned or separator characters but the space
PRINTABLE = st.text(st.one_of(st.just(" "), st.characters(blacklist_categories=("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp", "Zs"))),
                    min_size=1, max_size=12)


def fuzz(field: str):
    """Values of `field`: nasty pieces mixed with plausible ones, plausible pieces alone (so
    that values also reach the outputs), and for the command any printable argv."""
    plausible = st.sampled_from(PLAUSIBLE.get(field, ["x"]))
    mixed = st.lists(st.one_of(NASTY, plausible, st.text(max_size=4)), min_size=1, max_size=5).map("".join)
    kinds = [mixed, st.lists(plausible, min_size=1, max_size=3).map("".join)]
    if field == "--command":
        kinds.append(st.lists(PRINTABLE.filter(str.strip), min_size=1, max_size=5).map(shlex.join))
    return st.one_of(kinds)


def export(kind: str, field: str, value: str) -> tuple[int, str, str]:
    """`envbuild export KIND` with `value` in `field`; (exit code, output file text, stderr)."""
    scheduler = {"kind": kind, **h.BASE_SCHEDULERS[kind]}
    target = {"gpu": "A100-80GB", "mig": "3g.40gb"} if kind in ("k8s", "flyte", "slurm") else {"gpu": "A100"}
    flags = {"--image": IMAGE}
    if field.startswith("--"):
        flags[field] = value
    elif field == "mig":
        target["mig"] = value
    else:
        scheduler[field] = value
    with tempfile.TemporaryDirectory() as tmp:
        fleet, out = Path(tmp) / "fleet.yaml", Path(tmp) / "job.out"
        fleet.write_text(yaml.safe_dump({"targets": {"t": {**target, "scheduler": scheduler}}}, width=10**6))
        args = ["export", kind, "--fleet", str(fleet), "-o", str(out)] + [f"{k}={v}" for k, v in flags.items()]
        err = io.StringIO()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            code = main(args)
        return code, out.read_text() if out.exists() else "", err.getvalue()


def expected_argv(field: str, value: str) -> list[list[str]]:
    if field == "--command":
        return [PROBE, shlex.split(value)]
    return [PROBE]


def refused_cleanly(code: int, text: str, err: str) -> None:
    assert code == 2 and not text, (code, err)
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("envbuild: error: ") and lines[0].isprintable(), err


# --- slurm -------------------------------------------------------------------------------------
def bash_commands(script: str) -> list[str]:
    """The first word of each command line as bash itself parses the script (nothing runs)."""
    check = subprocess.run(["bash", "-n"], input=script, capture_output=True, text=True, timeout=30)
    assert check.returncode == 0, check.stderr
    with tempfile.NamedTemporaryFile("w", suffix=".sh") as fh:
        fh.write(script)
        fh.flush()
        printed = subprocess.run(["bash", "--pretty-print", fh.name], capture_output=True, text=True, timeout=30)
    assert printed.returncode == 0, printed.stderr
    firsts = [line.split()[0] for line in printed.stdout.splitlines() if line.strip()]
    return [re.sub(r"^([A-Za-z_][A-Za-z0-9_]*)=.*", r"\1=", word) for word in firsts]  # IMAGE=... is IMAGE=


def unquoted(line: str) -> str:
    """What bash may expand in `line`: the text outside single quotes, less escaped
    characters (POSIX quoting; inside double quotes `$` and backticks still expand)."""
    out, i, double = [], 0, False
    while i < len(line):
        c = line[i]
        if c == "\\":
            i += 2
            continue
        if c == "'" and not double:
            i = line.index("'", i + 1) + 1
            continue
        if c == '"':
            double = not double
        out.append(c)
        i += 1
    return "".join(out)


def baseline(kind: str, field: str) -> str:
    """The output for plain values: with a workload when the field is the command."""
    return BASELINES[kind][field == "--command"]


def check_slurm(script: str, field: str, value: str) -> None:
    plain = baseline("slurm", field)
    assert bash_commands(script) == bash_commands(plain)
    lines = script.splitlines()
    directives = [line for line in lines if line.startswith("#SBATCH")]
    for line in directives:
        assert re.fullmatch(r"#SBATCH --[a-z-]+=[A-Za-z0-9_.,:+-]+", line), line
    options = [line.split("=")[0] for line in directives]
    plain_options = [line.split("=")[0] for line in plain.splitlines() if line.startswith("#SBATCH")]
    assert len(set(options)) == len(options) and set(options) - {"#SBATCH --account"} == set(plain_options)
    assert len(lines) - len(directives) == len(plain.splitlines()) - len(plain_options)  # no other line added
    runs = [line for line in lines if line.startswith("apptainer ")]
    assert [shlex.split(line)[4:] for line in runs] == expected_argv(field, value)
    for line in runs:
        assert unquoted(line).count("$") == 1 and "`" not in unquoted(line), line  # only "docker://$IMAGE"
    [image_line] = [line for line in lines if line.startswith("IMAGE=")]
    assert len(shlex.split(image_line)) == 1


# --- generated Python --------------------------------------------------------------------------
def shape(source: str) -> tuple:
    """What a module does: the calls it makes, what it imports, the names it uses (the
    flow's or task's own name, made of the job name, as DEFINED)."""
    tree = ast.parse(source)
    defined = {n.name for n in ast.walk(tree) if isinstance(n, ast.ClassDef)
               or isinstance(n, ast.FunctionDef) and n.col_offset == 0 and n.decorator_list}

    def named(text: str) -> str:
        return "DEFINED" if text in defined else text

    calls = sorted(named(ast.unparse(n.func)) for n in ast.walk(tree) if isinstance(n, ast.Call))
    imports = sorted(ast.unparse(n) for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom)))
    names = sorted({named(n.id) for n in ast.walk(tree) if isinstance(n, ast.Name)})
    return calls, imports, names, sorted(named(n) for n in defined)


def steps_literal(source: str) -> list[list[str]]:
    """The argv lists the module runs, read as literals."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.For) and isinstance(node.iter, ast.List):
            return ast.literal_eval(node.iter)
    return [ast.literal_eval(n.args[0]) for n in ast.walk(tree)
            if isinstance(n, ast.Call) and ast.unparse(n.func) == "subprocess.run"]


def load_module(source: str, name: str):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{name}.py"
        path.write_text(source)
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # flytekit and metaflow name their objects by module, as an import would
        try:
            spec.loader.exec_module(module)
        finally:
            sys.modules.pop(name, None)
    return module


BASELINES = {kind: (export(kind, "--mem", "16G")[1], export(kind, "--command", "python train.py")[1]) for kind in h.KINDS}


def check_python(kind: str, source: str, field: str, value: str) -> None:
    assert shape(source) == shape(baseline(kind, field))  # the same calls, imports and names
    defined = {n.name for n in ast.walk(ast.parse(source)) if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    assert steps_literal(source) == expected_argv(field, value)
    module = load_module(source, f"envbuild_fuzz_{kind}")
    if kind == "flyte":
        [task] = [getattr(module, n) for n in defined]
        assert task.container_image == (value if field == "--image" else IMAGE)
    elif kind == "metaflow":
        from metaflow import FlowSpec

        [flow] = [getattr(module, n) for n in defined if n.endswith("Flow")]
        assert issubclass(flow, FlowSpec)
    else:
        import coiled

        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Call) and ast.unparse(node.func).startswith("coiled."):
                kwargs = {k.arg: ast.literal_eval(k.value) for k in node.keywords}
                inspect.signature(getattr(coiled, node.func.attr)).bind(**kwargs)


# --- YAML and JSON -------------------------------------------------------------------------------
def check_k8s(text: str, field: str, value: str) -> None:
    import kubernetes_validate

    data = yaml.safe_load(text)
    kubernetes_validate.validate(data, "1.30.0", strict=True)
    pod = data["spec"]["template"]["spec"]
    assert [c["command"] for c in pod.get("initContainers", []) + pod["containers"]] == expected_argv(field, value)


def check_batch(text: str, field: str, value: str) -> None:
    import botocore.session
    from botocore.validate import ParamValidator

    params = json.loads(text)
    op = botocore.session.get_session().get_service_model("batch").operation_model("RegisterJobDefinition")
    report = ParamValidator().validate(params, op.input_shape)
    assert not report.has_errors(), report.generate_report()
    command = params["containerProperties"]["command"]
    steps = expected_argv(field, value)
    if len(steps) > 1:  # the probe, then the workload, in one shell: the workload's words come back whole
        assert command[:2] == ["/bin/sh", "-c"] and shlex.split(command[2]) == PROBE + ["&&", "exec"] + steps[1]
    else:
        assert command == steps[0]


CHECKS = {"slurm": check_slurm, "k8s": check_k8s, "batch": check_batch}


def run_case(kind: str, field: str, value: str) -> int:
    """Export `value` in `field`; check the refusal or the output; the exit code."""
    code, text, err = export(kind, field, value)
    if code != 0:
        refused_cleanly(code, text, err)
        return code
    if kind in CHECKS:
        CHECKS[kind](text, field, value)
    else:
        check_python(kind, text, field, value)
    return code


@pytest.mark.slow
@pytest.mark.parametrize("kind", h.KINDS)
@SETTINGS
@given(data=st.data())
def test_every_field_reaches_each_kinds_consumer_clean(kind, data):
    field = data.draw(st.sampled_from(FLAGS + SCHEDULER_FIELDS[kind] + (("mig",) if kind in ("k8s", "flyte") else ())))
    code = run_case(kind, field, data.draw(fuzz(field)))
    event(f"{field}: {'written' if code == 0 else 'refused'}")  # --hypothesis-show-statistics


@pytest.mark.parametrize("kind", h.KINDS)
@pytest.mark.parametrize("command", ["printf '%s\\n' '$(id)' 'a;b' \"it's\" '`id`' '\"\"\"'",
                                     "sh -c 'echo $HOME; id' --", "python -c 'import os; os.system(\"id\")'"])
def test_commands_with_shell_and_python_syntax_arrive_as_words(kind, command):
    assert run_case(kind, "--command", command) == 0  # these are fine commands: written, not refused


@pytest.mark.slow
@pytest.mark.parametrize("kind", h.KINDS)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(argv=st.lists(PRINTABLE.filter(str.strip), min_size=1, max_size=5))
def test_any_printable_workload_arrives_as_its_own_words(kind, argv):
    assert run_case(kind, "--command", shlex.join(argv)) == 0  # every printable argv is a workload envbuild writes
