"""Check, before a long build, that the registry will take the push.

One manifest HEAD on the target repository with the user's Docker credentials (the same
ones the engine will send): a Basic registry answers 401 without a valid login; a Bearer
registry (Docker Hub, GHCR, ECR, Harbor) is asked for a token with push scope, and a
token whose grant lacks `push` is a refusal too. A 404 (no such tag yet) is the normal
answer for a new repository.
"""
from __future__ import annotations

import base64
import json

from envbuild.dockerfile.reference import parse
from envbuild.image.registry import RegistryClient
from envbuild.infra.errors import EnvironmentProblem

TIMEOUT = 1.5  # seconds per request: a refused or missing login is known well under 2 s


def check_push_access(repository: str, *, timeout: float = TIMEOUT) -> None:
    """Raise EnvironmentProblem (exit 3) when pushing to `repository` would be refused."""
    ref = parse(f"{repository}:envbuild-push-check")
    client = RegistryClient(ref, timeout=timeout, actions="pull,push")
    try:
        response = client.manifest("HEAD")
    except EnvironmentProblem as exc:
        raise EnvironmentProblem(f"before building: {exc.message}", hint=exc.hint) from None
    if response.status_code not in (200, 404):
        raise EnvironmentProblem(f"before building: registry {ref.registry} answered HTTP {response.status_code} "
                                 f"for {ref.path}", hint=f"check `docker login {ref.registry}` and the repository name")
    granted = _token_actions(client.session.headers.get("Authorization", ""), ref.path)
    if granted is not None and "push" not in granted and "*" not in granted:
        raise EnvironmentProblem(f"before building: registry {ref.registry} grants no push to {ref.path} "
                                 f"({'no credentials in your Docker config' if not client.credentials else 'your login may only pull'})",
                                 hint=f"run `docker login {ref.registry}` with an account that may push there")


def _token_actions(header: str, path: str) -> set[str] | None:
    """The actions a JWT bearer token grants on `path`; None when the token is opaque."""
    if not header.startswith("Bearer "):
        return None
    parts = header[7:].split(".")
    if len(parts) != 3:
        return None
    try:
        claims = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except (ValueError, json.JSONDecodeError):
        return None
    access = claims.get("access")
    if not isinstance(access, list):
        return None
    return {a for entry in access if entry.get("type") == "repository" and entry.get("name") == path
            for a in entry.get("actions", [])}
