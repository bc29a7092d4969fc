"""`envbuild export KIND`: each job definition is accepted by its real consumer:
kubernetes-validate (strict) and the kubernetes client's models, botocore's parameter
validator, metaflow's `check`, the installed coiled package's signatures, and flytekit's
task construction. Slurm's consumer (sbatch on a real Slurm) is in test_verify_slurm.py."""
from __future__ import annotations

import ast
import importlib.util
import inspect
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from cli_support import in_process

ROOT = Path(__file__).resolve().parent.parent
FLEET = str(ROOT / "tests" / "data" / "fleets" / "fleet.yaml")
DIGEST = "sha256:" + "ab" * 32
IMAGE = f"127.0.0.1:5555/team/train@{DIGEST}"


def _export(tmp_path, kind: str, *args: str) -> tuple[subprocess.CompletedProcess, Path]:
    out = tmp_path / f"job.{kind}"
    done = in_process("export", kind, "--image", IMAGE, "-o", out, *args, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    return done, out


@pytest.mark.parametrize("target", ["a100-mig", "v100-slurm"])
def test_k8s_job_passes_kubernetes_validate_strict_and_the_client_models(tmp_path, target):
    _, out = _export(tmp_path, "k8s", "--fleet", FLEET, "--target", target, "--command", "python train.py")
    path = out.with_suffix(".yaml")
    out.rename(path)
    done = subprocess.run([str(Path(sys.executable).parent / "kubernetes-validate"), "--strict", str(path)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "passed" in done.stdout

    from kubernetes.client import ApiClient

    # the client's own model mapping, as it reads the API server's JSON body for a Job (the
    # public deserialize() wraps this one; its signature differs between client releases)
    job = ApiClient()._ApiClient__deserialize(json.loads(json.dumps(yaml.safe_load(path.read_text()))), "V1Job")
    pod = job.spec.template.spec
    limits = pod.containers[0].resources.limits
    if target == "a100-mig":
        assert limits["nvidia.com/mig-3g.40gb"] == "1" and pod.node_selector["nvidia.com/mig.strategy"] == "mixed"
        assert pod.node_selector["nvidia.com/gpu.compute.major"] == "8"
    else:
        assert limits["nvidia.com/gpu"] == "1" and pod.node_selector["nvidia.com/gpu.compute.major"] == "7"
    assert pod.init_containers[0].command == ["python3", "/opt/envbuild/probe.py", "--json"]
    assert pod.containers[0].image.endswith(DIGEST)
    assert any(t.key == "nvidia.com/gpu" and t.operator == "Exists" for t in pod.tolerations)


def test_k8s_consumer_rejects_a_broken_manifest(tmp_path):
    """The check can fail: strict mode refuses a field the Job schema does not have."""
    _, out = _export(tmp_path, "k8s", "--fleet", FLEET, "--target", "a100-mig")
    data = yaml.safe_load(out.read_text())
    data["spec"]["template"]["spec"]["containers"][0]["gpus"] = 1
    import kubernetes_validate

    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(data, "1.30.0", strict=True)


def test_batch_job_definition_passes_botocore_param_validation(tmp_path):
    _, out = _export(tmp_path, "batch", "--fleet", FLEET, "--target", "g5", "--gpus", "1")
    import botocore.session
    from botocore.validate import ParamValidator

    params = json.loads(out.read_text())
    op = botocore.session.get_session().get_service_model("batch").operation_model("RegisterJobDefinition")
    report = ParamValidator().validate(params, op.input_shape)
    assert not report.has_errors(), report.generate_report()
    assert {"type": "GPU", "value": "1"} in params["containerProperties"]["resourceRequirements"]
    assert params["tags"]["envbuild-instance-types"].startswith("g5.xlarge")
    del params["type"]  # and it can fail: a required member missing
    params["containerProperties"]["resourceRequirements"][0]["value"] = 1  # a number where the API wants a string
    errors = ParamValidator().validate(params, op.input_shape)
    assert errors.has_errors() and "Missing required parameter" in errors.generate_report()


@pytest.mark.parametrize("compute", ["batch", "kubernetes"])
def test_metaflow_flow_passes_metaflow_check(tmp_path, compute):
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(f"targets:\n  a10g:\n    gpu: A10G\n    scheduler: {{kind: metaflow, compute: {compute}}}\n")
    _, out = _export(tmp_path, "metaflow", "--fleet", str(fleet), "--target", "a10g", "--command", "python train.py")
    flow = tmp_path / "flow.py"
    out.rename(flow)
    env = dict(os.environ, USERNAME="envbuild-test", METAFLOW_DATASTORE_SYSROOT_S3="s3://example-bucket/metaflow",
               METAFLOW_HOME=str(tmp_path / "mfhome"))
    done = subprocess.run([sys.executable, str(flow), "--no-pylint", "--datastore=s3", "check"],
                          capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "The graph looks good!" in done.stdout + done.stderr
    assert f"@{compute}(image='{IMAGE}', gpu=1" in flow.read_text()


def test_coiled_calls_bind_to_the_installed_coiled_signatures(tmp_path):
    _, out = _export(tmp_path, "coiled", "--fleet", FLEET, "--target", "h100")
    import coiled

    calls = {}
    for node in ast.walk(ast.parse(out.read_text())):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and getattr(node.func.value, "id", None) == "coiled":
            kwargs = {k.arg: ast.literal_eval(k.value) for k in node.keywords}
            inspect.signature(getattr(coiled, node.func.attr)).bind(*[ast.literal_eval(a) for a in node.args], **kwargs)
            calls[node.func.attr] = kwargs
    assert calls["create_software_environment"] == {"name": "envbuild-h100", "container": IMAGE}
    assert calls["Cluster"]["worker_vm_types"] == ["p5.48xlarge"] and calls["Cluster"]["software"] == "envbuild-h100"
    with pytest.raises(TypeError):  # binding is a real check: a misspelt keyword fails it
        inspect.signature(coiled.create_software_environment).bind(name="x", containerr=IMAGE)


def flyte_module(source: Path, name: str = "envbuild_flyte_job"):
    """The generated Flyte module, run as an import would run it (flytekit constructs the task)."""
    spec = importlib.util.spec_from_file_location(name, source)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # flytekit names a task by its module, as an import would
    try:
        spec.loader.exec_module(module)
    finally:
        sys.modules.pop(spec.name, None)
    return module


@pytest.mark.parametrize("target, accelerator", [("l4-flyte", "nvidia-l4"), ("a100-mig", "nvidia-a100-80gb")])
def test_flyte_task_is_constructed_by_flytekit(tmp_path, target, accelerator):
    _, out = _export(tmp_path, "flyte", "--fleet", FLEET, "--target", target)
    module = flyte_module(out.rename(out.with_suffix(".py")))
    task = getattr(module, f"envbuild_{target.replace('-', '_')}")
    assert task.container_image == IMAGE
    assert task.resources.requests.gpu == "1"
    acc = task.accelerator.to_flyte_idl()
    assert acc.device == accelerator
    if target == "a100-mig":
        assert acc.partition_size == "3g.40gb"


@pytest.mark.parametrize("args, message", [
    (["export", "k8s"], "envbuild: error: export: no image to run (pass --image REF, or a SPEC whose image `envbuild image` builds)"),
    (["export", "pbs", "--image", "x:1"], "envbuild: error: KIND: unknown scheduler kind 'pbs'"),
    (["export", "k8s", "--image", "x:1", "--fleet", FLEET, "--target", "nope"], "envbuild: error: --target: unknown target 'nope'"),
])
def test_export_bad_input_is_one_line_exit_2(args, message):
    done = in_process(*args, cwd=ROOT)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and done.stderr.startswith(message), done.stderr


def _batch_report(params):
    import botocore.session
    from botocore.validate import ParamValidator

    op = botocore.session.get_session().get_service_model("batch").operation_model("RegisterJobDefinition")
    return ParamValidator().validate(params, op.input_shape)


def test_batch_platform_eks_writes_eks_properties_botocore_accepts(tmp_path):
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text("targets:\n  g5:\n    gpu: A10G\n    scheduler: {kind: batch, job_queue: q, platform: EKS, vcpus: 8}\n")
    _, out = _export(tmp_path, "batch", "--fleet", str(fleet), "--command", "python train.py", "--mem", "30G")
    params = json.loads(out.read_text())
    report = _batch_report(params)
    assert not report.has_errors(), report.generate_report()
    assert "platformCapabilities" not in params and "containerProperties" not in params  # EKS job definitions take neither
    [container] = params["eksProperties"]["podProperties"]["containers"]
    assert container["resources"]["limits"] == {"nvidia.com/gpu": "1", "cpu": "8", "memory": "30720Mi"}
    assert container["command"][:2] == ["/bin/sh", "-c"] and container["image"] == IMAGE
    # and the default, EC2, as before
    fleet.write_text("targets:\n  g5:\n    gpu: A10G\n    scheduler: {kind: batch, job_queue: q}\n")
    _, out = _export(tmp_path, "batch", "--fleet", str(fleet))
    params = json.loads(out.read_text())
    assert params["platformCapabilities"] == ["EC2"] and not _batch_report(params).has_errors()


def _refused_line(tmp_path, kind: str, fleet_text: str) -> str:
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(fleet_text)
    done = in_process("export", kind, "--image", IMAGE, "--fleet", fleet, cwd=ROOT)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and not done.stdout
    return done.stderr


def test_batch_on_fargate_is_refused_it_has_no_gpus(tmp_path):
    line = _refused_line(tmp_path, "batch", "targets:\n  g5:\n    gpu: A10G\n    scheduler: {kind: batch, job_queue: q, platform: FARGATE}\n")
    assert "fleet.yaml:4:" in line and "Fargate has no GPUs" in line


@pytest.mark.parametrize("flag, seconds", [("1-00:00:00", 86400), ("30:00", 1800), ("90", 5400), ("2:00:00", 7200)])
def test_time_limits_reach_kubernetes_and_batch_in_seconds(tmp_path, flag, seconds):
    _, out = _export(tmp_path, "k8s", "--time", flag, "--mem", "512M")
    job = yaml.safe_load(out.read_text())
    assert job["spec"]["activeDeadlineSeconds"] == seconds
    assert job["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["memory"] == "512Mi"
    _, out = _export(tmp_path, "batch", "--time", flag, "--mem", "512M")
    params = json.loads(out.read_text())
    assert params["timeout"]["attemptDurationSeconds"] == seconds
    assert {"type": "MEMORY", "value": "512"} in params["containerProperties"]["resourceRequirements"]


@pytest.mark.parametrize("written", ["1G.10GB", "MIG 1g.10gb", "mig-1G.10gb"])
def test_a_mig_profile_is_written_as_nvidia_spells_it(tmp_path, written):
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(f"targets:\n  a:\n    gpu: A100-80GB\n    mig: {written}\n    scheduler: {{kind: k8s}}\n")
    _, out = _export(tmp_path, "k8s", "--fleet", str(fleet))
    limits = yaml.safe_load(out.read_text())["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert limits["nvidia.com/mig-1g.10gb"] == "1"
    _, out = _export(tmp_path, "slurm", "--fleet", str(fleet))
    assert "#SBATCH --gres=gpu:1g.10gb:1\n" in out.read_text()


def test_flyte_refuses_a_mig_slice_flytekit_cannot_name(tmp_path):
    line = _refused_line(tmp_path, "flyte", "targets:\n  h:\n    gpu: H100\n    mig: 1g.10gb\n    scheduler: {kind: flyte}\n")
    assert "flytekit names MIG partitions only of the A100" in line


@pytest.mark.parametrize("kind", ["metaflow", "flyte", "coiled"])
def test_an_image_that_would_be_code_never_reaches_a_module(tmp_path, kind):
    done = in_process("export", kind, "--image", 'x"""\nimport os; os.system("touch pwned")\n"""', cwd=tmp_path)
    assert done.returncode == 2 and done.stderr.startswith("envbuild: error: --image: ") and not done.stdout
    assert not (tmp_path / "pwned").exists()
