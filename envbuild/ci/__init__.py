"""CI pipelines that build a fleet plan's images and verify each target on a runner with its GPU.

`envbuild export github-actions|gitlab-ci SPEC --fleet FLEET` writes one pipeline of two
stages:

  build   a matrix of one job per planned image (`envbuild image SPEC --fleet FLEET
          --plan-item N --push --manifest fleet-images.json`), on a runner with a Docker
          engine; each job keeps its fleet-images.json (the targets it serves) as an artifact;
  verify  one job per target, on a self-hosted runner with the target's GPU (its
          `scheduler.runner_labels`), which takes the manifest of the image that serves
          it and runs `envbuild verify --manifest fleet-images.json --target NAME` there,
          keeping the JUnit report (and the JSON one) as an artifact.

Each module here (`github_actions`, `gitlab_ci`) renders a `Pipeline` with a YAML dumper.
The shell lines of the pipeline are constant text that reads every value from an
environment variable, always quoted ("$ENVBUILD_SPEC"); the values themselves sit in the
YAML's variables, each checked at the door by a grammar that leaves out `$`, quotes,
braces and spaces (so neither the shell nor the CI system's own expressions read them).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import yaml

from envbuild.core import fields
from envbuild.infra.errors import UserError

CI_KINDS = ("github-actions", "gitlab-ci")
MANIFEST = "fleet-images.json"  # each build job's artifact; each verify job reads the one of its image
# registry credentials, when the registry needs them: CI secrets (GitHub) or masked CI/CD variables (GitLab)
USER_VAR, PASSWORD_VAR = "ENVBUILD_REGISTRY_USER", "ENVBUILD_REGISTRY_PASSWORD"
# the pip requirement every job installs envbuild from: by default the release that wrote the
# pipeline; a project variable of that name replaces it (an internal index's name, a wheel's
# URL, a git URL), one argument to pip, read quoted
INSTALL_VAR = "ENVBUILD_INSTALL"

_PATH = re.compile(r"[A-Za-z0-9_.][A-Za-z0-9_.@+-]*(?:/[A-Za-z0-9_.@+-]+)*")
_MIRROR = re.compile(r"[A-Za-z0-9.-]+(?::[0-9]{1,5})?(?:/[a-z0-9._-]+)*")


def repo_path(value: str, where: str, what: str) -> str:
    """A path inside the repository, relative to its root, as a CI job sees it after checkout."""
    value = fields.text(value, where, what, limit=255)
    parts = value.split("/")
    if not _PATH.fullmatch(value) or ".." in parts or value.startswith("/"):
        raise UserError(f"{what} {value!r} is not a plain path inside the repository", where=where,
                        hint="give it relative to the repository's root (run export there): letters, digits, "
                             "/ . _ - + @, no '..'")
    return "/".join(p for p in parts if p != ".") or "."


def mirror(value: str, where: str) -> str:
    value = fields.text(value, where, "registry mirror", limit=255)
    if not _MIRROR.fullmatch(value):
        raise UserError(f"malformed registry mirror {value!r}", where=where, hint="HOST[:PORT][/prefix]")
    return value


@dataclass(frozen=True)
class VerifyJob:
    target: str  # a DNS label
    item: int  # the plan item whose image serves it
    labels: tuple[str, ...]  # runner labels (checked by fields.runner_labels)


@dataclass(frozen=True)
class Pipeline:
    """What a pipeline is made of; every value already checked."""

    name: str  # the spec's name or its file's, a plain name
    version: str  # the envbuild release the jobs install (the one that planned: the same plan)
    registry: str  # the registry the images are pushed to (a host[:port])
    env: tuple[tuple[str, str], ...]  # (variable, value): the spec, the fleet, the optional flags' values
    build_flags: tuple[str, ...]  # constant flag text for `envbuild image`, e.g. '--lock-dir "$ENVBUILD_LOCK_DIR"'
    items: tuple[int, ...]
    verify: tuple[VerifyJob, ...]
    watch: tuple[str, ...]  # the paths whose change runs the pipeline

    def requirement(self) -> str:
        """What every job installs by default: the envbuild release that wrote the pipeline
        (the same release plans the same images)."""
        return f"envbuild=={self.version}"

    def variables(self, install: str | None = None) -> dict[str, str]:
        """The pipeline's variables; `install`: how the CI system's own syntax lets a project
        setting replace the default requirement (None: the YAML's value is the default,
        which a project variable overrides where the CI system allows it)."""
        return {INSTALL_VAR: install or self.requirement(), "ENVBUILD_REGISTRY": self.registry, **dict(self.env)}

    def install(self, python: str) -> str:
        return f'{python} -m pip install --disable-pip-version-check "${INSTALL_VAR}"'

    def login(self) -> str:
        """docker login when the credentials are set (the password on stdin, never in a command line)."""
        return (f'if [ -n "${{{PASSWORD_VAR}:-}}" ]; then printf \'%s\' "${PASSWORD_VAR}" | docker login '
                f'--username "${USER_VAR}" --password-stdin "$ENVBUILD_REGISTRY"; fi')

    def build(self, envbuild: str, item_var: str) -> str:
        return " ".join([f'{envbuild} image "$ENVBUILD_SPEC" --fleet "$ENVBUILD_FLEET" --plan-item "${item_var}"',
                         "--push", f"--manifest {MANIFEST}", "--progress plain", *self.build_flags])

    def check(self, envbuild: str, target_var: str) -> str:
        return (f'{envbuild} verify --manifest {MANIFEST} --target "${target_var}" '
                f'--junit "envbuild-verify-${target_var}.xml" --json "envbuild-verify-${target_var}.json"')


def dump(data: dict, header: str) -> str:
    """YAML by PyYAML's safe dumper, without anchors and aliases (a value used twice is
    written twice: not every CI system reads aliases)."""
    class Dumper(yaml.SafeDumper):
        def ignore_aliases(self, data) -> bool:
            return True

    return header + yaml.dump(data, Dumper=Dumper, sort_keys=False, width=4096, default_flow_style=False)
