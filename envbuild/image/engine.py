"""The connection to the Docker engine, with one clear line when it is not there."""
from __future__ import annotations

import os

from envbuild.errors import EnvironmentProblem


def connect():
    import docker

    try:
        client = docker.from_env(timeout=600)
        client.ping()
    except docker.errors.DockerException as exc:
        host = os.environ.get("DOCKER_HOST")
        where = f"DOCKER_HOST={host}" if host else "unix:///var/run/docker.sock"
        raise EnvironmentProblem(
            f"the Docker engine is not running or not reachable at {where} ({type(exc).__name__})",
            hint="start it with `sudo systemctl start docker` (or `sudo dockerd &`), or point DOCKER_HOST at a running engine",
        ) from None
    return client


def local_image_id(client, ref: str) -> str | None:
    import docker

    try:
        return client.api.inspect_image(ref)["Id"]
    except docker.errors.ImageNotFound:
        return None
