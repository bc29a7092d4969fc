"""The connection to the Docker engine, with one clear line when it is not there."""
from __future__ import annotations

import os

from envbuild.errors import EnvironmentProblem


def _not_running(why: str) -> EnvironmentProblem:
    host = os.environ.get("DOCKER_HOST")
    where = f"DOCKER_HOST={host}" if host else "unix:///var/run/docker.sock"
    return EnvironmentProblem(
        f"the Docker engine is not running or not reachable at {where} ({why})",
        hint="start it with `sudo systemctl start docker` (or `sudo dockerd &`), or point DOCKER_HOST at a running engine",
    )


def connect():
    import docker

    try:
        client = docker.from_env(timeout=600)
        client.ping()
    except docker.errors.DockerException as exc:
        raise _not_running(type(exc).__name__) from None
    return client


# --- the light path: the engine's HTTP API over its socket, with the standard library ------
# Importing the docker SDK (and requests under it) costs ~0.25 s; a cache hit that only
# asks "is this tag here?" should not pay that, so the ping and the look-up go direct.

def _light_connection(timeout: float):
    """An HTTP connection to the engine for the plain setups (unix socket, tcp without TLS);
    None when only the SDK knows how to reach it (TLS, ssh, contexts)."""
    import http.client
    import socket

    host = os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
    if os.environ.get("DOCKER_TLS_VERIFY") or os.environ.get("DOCKER_CONTEXT"):
        return None
    if host.startswith("unix://"):
        path = host[len("unix://"):]

        class UnixConnection(http.client.HTTPConnection):
            def connect(self):
                self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                self.sock.settimeout(timeout)
                self.sock.connect(path)

        return UnixConnection("localhost", timeout=timeout)
    if host.startswith("tcp://"):
        return http.client.HTTPConnection(host[len("tcp://"):], timeout=timeout)
    return None


def light_get(path: str, timeout: float = 5.0) -> tuple[int, dict | None] | None:
    """(status, JSON body) of GET `path` on the engine; None when the light path does not apply.
    Raises EnvironmentProblem when the engine does not answer."""
    import json

    connection = _light_connection(timeout)
    if connection is None:
        return None
    try:
        connection.request("GET", path)
        answer = connection.getresponse()
        body = answer.read()
    except OSError:
        raise _not_running("no answer on its socket") from None
    finally:
        connection.close()
    try:
        return answer.status, (json.loads(body) if body and body[:1] in b"{[" else None)
    except ValueError:
        return answer.status, None


def ping() -> None:
    """Fail in well under a second when the engine is down (SDK fallback for TLS/ssh)."""
    if light_get("/_ping") is None:
        connect()


def light_inspect(ref: str) -> dict | None:
    """The engine's record of image `ref`, None when it has none; falls back to the SDK."""
    import urllib.parse

    answer = light_get(f"/images/{urllib.parse.quote(ref, safe='')}/json")
    if answer is None:
        client = connect()
        image_id = local_image_id(client, ref)
        return client.api.inspect_image(image_id) if image_id else None
    status, body = answer
    return body if status == 200 and isinstance(body, dict) else None


def light_history(ref: str) -> list[dict] | None:
    """The engine's history of image `ref`, newest step first (`CreatedBy`, `Size` of the
    layer it made); None when it has no such image. Falls back to the SDK."""
    import urllib.parse

    answer = light_get(f"/images/{urllib.parse.quote(ref, safe='')}/history")
    if answer is None:
        import docker

        try:
            return connect().api.history(ref)
        except docker.errors.ImageNotFound:
            return None
    status, body = answer
    return body if status == 200 and isinstance(body, list) else None


def local_image_id(client, ref: str) -> str | None:
    import docker

    try:
        return client.api.inspect_image(ref)["Id"]
    except docker.errors.ImageNotFound:
        return None
