"""The connection to the Docker engine, with one clear line when it is not there."""
from __future__ import annotations

import http.client
import json
import os
import socket
import sys
import urllib.parse
from contextlib import contextmanager
from typing import Iterator

from envbuild.infra.errors import EnvironmentProblem


def _address() -> str:
    host = os.environ.get("DOCKER_HOST")
    return f"DOCKER_HOST={host}" if host else "unix:///var/run/docker.sock"


@contextmanager
def answering(during: str, *, afterwards: str = "no tag was changed") -> Iterator[None]:
    """The engine's connection breaking while `during` (dockerd stopped or restarted in the
    middle of a stream) as one line, exit 3. The engine's own answers pass through."""
    try:
        yield
    except Exception as exc:
        if not _connection_lost(exc):
            raise
        raise EnvironmentProblem(f"the Docker engine stopped answering during {during} ({type(exc).__name__})",
                                 where=_address(),
                                 hint=f"check that it runs (`docker info`), then run the command again; {afterwards}"
                                 ) from None


def _connection_lost(exc: Exception) -> bool:
    """A broken connection as the socket, http.client, urllib3 (ProtocolError: IncompleteRead)
    or requests (ConnectionError) report it; never an answer the engine gave (APIError). The
    libraries are looked up, not imported: an error cannot come from one that is not loaded,
    and the cache-hit path never loads the docker SDK."""
    docker, requests, urllib3 = (sys.modules.get(name) for name in ("docker", "requests", "urllib3"))
    if docker is not None and isinstance(exc, docker.errors.APIError):
        return False
    return (isinstance(exc, (ConnectionError, http.client.HTTPException))
            or (requests is not None and isinstance(exc, requests.exceptions.RequestException))
            or (urllib3 is not None and isinstance(exc, urllib3.exceptions.HTTPError)))


def _not_running(why: str) -> EnvironmentProblem:
    where = _address()
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
