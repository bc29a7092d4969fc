"""A GitLab CI pipeline: a `parallel: matrix` build job over the plan's images (Docker in
Docker, the usual way a GitLab runner builds images), then one verify job per target on
a runner chosen by its tags, which `needs` exactly the build job of the image that serves
it (`needs: parallel: matrix`), and so gets that job's fleet-images.json.

The JUnit report goes to `artifacts: reports: junit`, so the merge request shows it.
Registry credentials come from the masked CI/CD variables ENVBUILD_REGISTRY_USER and
ENVBUILD_REGISTRY_PASSWORD (none set: no login). The verify jobs run with the runner's
own shell and Docker (a GPU runner's executor): python3 and docker must be there. Every
job installs envbuild from the requirement in ENVBUILD_INSTALL: the release that wrote the
pipeline, unless a CI/CD variable of that name (which wins over the file's) says otherwise.
"""
from __future__ import annotations

from envbuild.ci import MANIFEST, Pipeline, dump

DOCKER = "docker:27"
VENV = ".envbuild-venv"  # in the job's working folder: no root needed


def _install(p: Pipeline) -> list[str]:
    return [f"python3 -m venv {VENV}", p.install(f"{VENV}/bin/python")]


def render(p: Pipeline) -> str:
    envbuild = f"{VENV}/bin/envbuild"
    pipeline: dict = {
        "stages": ["build", "verify"],
        "variables": p.variables(),
        "envbuild-build": {
            "stage": "build",
            "image": f"{DOCKER}-cli",
            "services": [f"{DOCKER}-dind"],
            "variables": {"DOCKER_HOST": "tcp://docker:2375", "DOCKER_TLS_CERTDIR": ""},
            "parallel": {"matrix": [{"PLAN_ITEM": [str(i) for i in p.items]}]},
            "before_script": ["apk add --no-cache python3", *_install(p), p.login()],
            "script": [p.build(envbuild, "PLAN_ITEM")],
            "artifacts": {"paths": [MANIFEST], "expire_in": "1 week"},
        },
    }
    for v in p.verify:
        report = f"envbuild-verify-{v.target}"
        pipeline[f"envbuild-verify-{v.target}"] = {
            "stage": "verify",
            "tags": list(v.labels),
            "needs": [{"job": "envbuild-build", "parallel": {"matrix": [{"PLAN_ITEM": str(v.item)}]},
                       "artifacts": True}],
            "variables": {"TARGET": v.target},
            "before_script": [*_install(p), p.login()],
            "script": [p.check(envbuild, "TARGET")],
            "artifacts": {"when": "always", "paths": [f"{report}.xml", f"{report}.json"],
                          "reports": {"junit": f"{report}.xml"}},
        }
    return dump(pipeline, "# Written by `envbuild export gitlab-ci`: build each image of the fleet plan,\n"
                          "# then verify each target on a runner with its GPU (chosen by its tags).\n")
