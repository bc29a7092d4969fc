"""A GitHub Actions workflow: a build matrix over the plan's images on GitHub-hosted
runners (Docker is there), then a verify matrix over the targets on self-hosted runners
chosen by their labels (`runs-on` takes the list: a runner must carry every label).

The build job's manifest travels as the artifact `fleet-images-<N>`; a verify job
downloads the one of the image that serves its target. The JUnit and JSON reports are
uploaded as `envbuild-verify-<target>` even when the verification failed. Registry
credentials come from the repository secrets ENVBUILD_REGISTRY_USER and
ENVBUILD_REGISTRY_PASSWORD (none set: no login, for an open registry or a runner already
logged in). Every job installs envbuild from the requirement in ENVBUILD_INSTALL: the
release that wrote the workflow, unless the repository variable of that name says otherwise.
"""
from __future__ import annotations

from envbuild.ci import INSTALL_VAR, MANIFEST, PASSWORD_VAR, USER_VAR, Pipeline, dump

PYTHON = "3.12"
CHECKOUT = "actions/checkout@v4"
SETUP_PYTHON = "actions/setup-python@v5"
UPLOAD = "actions/upload-artifact@v4"
DOWNLOAD = "actions/download-artifact@v4"


def _setup(p: Pipeline) -> list[dict]:
    return [{"uses": CHECKOUT},
            {"uses": SETUP_PYTHON, "with": {"python-version": PYTHON}},
            {"name": "Install envbuild", "run": p.install("python")}]


def render(p: Pipeline) -> str:
    secrets = {USER_VAR: "${{ secrets.%s }}" % USER_VAR, PASSWORD_VAR: "${{ secrets.%s }}" % PASSWORD_VAR}
    build = {
        "name": "Build image ${{ matrix.item }} of the plan",
        "runs-on": "ubuntu-latest",
        "strategy": {"fail-fast": False, "matrix": {"item": list(p.items)}},
        "steps": [*_setup(p),
                  {"name": "Log in to the registry", "env": secrets, "run": p.login()},
                  {"name": "Build and push", "env": {"PLAN_ITEM": "${{ matrix.item }}"},
                   "run": p.build("envbuild", "PLAN_ITEM")},
                  {"uses": UPLOAD, "with": {"name": "fleet-images-${{ matrix.item }}", "path": MANIFEST}}],
    }
    verify = {
        "name": "Verify on ${{ matrix.target }}",
        "needs": "build",
        # a failed image fails only its own targets (their manifest is missing); the others
        # are verified, as they would be without `needs` skipping the whole matrix
        "if": "${{ !cancelled() }}",
        "runs-on": "${{ matrix.runner }}",
        "strategy": {"fail-fast": False, "matrix": {"include": [
            {"target": v.target, "item": v.item, "runner": list(v.labels)} for v in p.verify]}},
        "steps": [*_setup(p),
                  {"name": "Log in to the registry", "env": secrets, "run": p.login()},
                  {"uses": DOWNLOAD, "with": {"name": "fleet-images-${{ matrix.item }}"}},
                  {"name": "Verify the target's image on this runner's GPU", "env": {"TARGET": "${{ matrix.target }}"},
                   "run": p.check("envbuild", "TARGET")},
                  {"uses": UPLOAD, "if": "always()",
                   "with": {"name": "envbuild-verify-${{ matrix.target }}",
                            "path": "envbuild-verify-${{ matrix.target }}.*",
                            "if-no-files-found": "warn"}}],
    }
    workflow = {
        "name": f"envbuild {p.name}: fleet images",
        "on": {"workflow_dispatch": {}, "push": {"paths": list(p.watch)}},
        "permissions": {"contents": "read"},
        # a repository variable ENVBUILD_INSTALL replaces the default requirement
        "env": p.variables(install="${{ vars.%s || '%s' }}" % (INSTALL_VAR, p.requirement())),
        "jobs": {"build": build, "verify": verify},
    }
    return dump(workflow, "# Written by `envbuild export github-actions`: build each image of the fleet plan,\n"
                          "# then verify each target on a self-hosted runner with its GPU.\n")
