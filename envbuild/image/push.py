"""`docker push` through the SDK with progress, retries and clear auth errors.

Credentials are the user's Docker config, which the SDK reads (auths and credential
helpers) and sends to the engine; envbuild never sees or prints them.
"""
from __future__ import annotations

import re
import time
from dataclasses import dataclass

from envbuild.dockerfile.reference import parse
from envbuild.infra.errors import EnvironmentProblem, UserError

AUTH_WORDS = ("unauthorized", "authentication required", "no basic auth credentials", "denied",
              "401", "403", "forbidden")
TRANSIENT_WORDS = ("connection reset", "connection refused", "timeout", "timed out", "eof", "502", "503", "504",
                   "tls handshake", "broken pipe", "temporarily unavailable", "blob upload unknown",
                   "internal server error", "500")


class PushFailed(UserError):
    exit_code = 1


def _registry_of(repository: str) -> str:
    return parse(repository).registry


@dataclass(frozen=True)
class Pushed:
    digest: str  # of the pushed manifest
    uploaded: frozenset[str]  # the layers the registry did not have, by the engine's short id (12 hex)


def push(client, repository: str, tag: str, *, attempts: int = 4, backoff: float = 1.0, progress=None) -> Pushed:
    """Push `repository:tag`; return the pushed manifest digest and the layers it uploaded."""
    import docker

    registry = _registry_of(repository)
    last_error = ""
    uploaded = set()  # over every attempt: a layer sent before a retry is not sent again
    for attempt in range(1, attempts + 1):
        digest, error = None, None
        layers_done, layers = set(), {}  # layer id -> its progress task while it uploads
        try:
            for item in client.api.push(repository, tag, stream=True, decode=True):
                if "error" in item:
                    error = (item.get("errorDetail") or {}).get("message") or item["error"]
                    break
                aux = item.get("aux")
                if isinstance(aux, dict) and aux.get("Digest"):
                    digest = aux["Digest"]
                status, layer = item.get("status", ""), item.get("id")
                if status == "Pushed" and layer:
                    uploaded.add(layer)
                if not progress or not layer:
                    continue
                detail = item.get("progressDetail") or {}
                if status == "Pushing" and detail.get("current") is not None:
                    task = layers.get(layer) or layers.setdefault(
                        layer, progress.task(f"layer {layer}", total=detail.get("total")))
                    task.update(detail["current"], total=detail.get("total"))
                elif status in ("Pushed", "Layer already exists") or status.startswith("Mounted from"):
                    if layer in layers_done:
                        continue
                    layers_done.add(layer)
                    task = layers.pop(layer, None)
                    if task is not None:  # uploaded now: bytes, rate and time
                        task.done("pushed")
                    else:
                        progress.line(f"  {progress.elapsed()}  layer {layer}: {status.lower()}")
        except docker.errors.APIError as exc:
            error = exc.explanation or str(exc)
        except docker.errors.DockerException as exc:
            error = str(exc)
        for task in layers.values():  # uploads this attempt left unfinished: a retry starts them again
            task.done("interrupted")
        if error is None and digest:
            return Pushed(digest, frozenset(uploaded))
        error = error or "the engine reported no digest"
        if mentions(error, AUTH_WORDS):
            raise EnvironmentProblem(
                f"registry {registry} refused the push of {repository}:{tag} ({_clean(error)})",
                hint=f"log in with `docker login {registry}` (envbuild uses your Docker credentials)",
            )
        last_error = error
        transient = mentions(error, TRANSIENT_WORDS)
        if attempt < attempts and transient:
            delay = backoff * 2 ** (attempt - 1)
            if progress:
                progress.line(f"  push failed ({_clean(error)}); retrying in {delay:.0f}s ({attempt}/{attempts})")
            time.sleep(delay)
            continue
        if transient:  # the registry (or the way to it) went away: not a refusal of this image
            raise EnvironmentProblem(
                f"registry {registry} dropped the connection while {repository}:{tag} was pushed, "
                f"{attempt} time(s) ({_clean(error)})",
                hint=f"check that {registry} is up and reachable from the Docker engine, then run the command again; "
                     "a tag whose push did not finish was not moved")
        break
    raise PushFailed(f"pushing {repository}:{tag} to {registry} failed: {_clean(last_error)}")


def mentions(error: str, words: tuple[str, ...]) -> bool:
    """Whether the engine's message holds one of `words`; a status code counts only as a
    number of its own, not inside a port (127.0.0.1:40183), a digest or a tag."""
    lowered = error.lower()
    return any(re.search(rf"(?<![\w:./-]){word}(?![\w./-])", lowered) if word.isdigit() else word in lowered
               for word in words)


def _clean(message: str) -> str:
    return " ".join(message.split())[:300]
