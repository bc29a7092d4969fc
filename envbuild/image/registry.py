"""Registry HTTP API v2: the digest behind a tag (for `--pin-digests`), whether a tag
exists (for the image cache check), and an image's config: the facts of a base image
outside the catalog (its `Env` says which CUDA an nvidia/cuda-derived image carries) and
the labels of an image envbuild built (the stack to judge before a job is written for it).

Credentials come from the user's Docker config (`~/.docker/config.json` or
`$DOCKER_CONFIG`, credential helpers included, read through the docker SDK). Both
challenge kinds registries use are answered: Basic (a plain `registry` with htpasswd)
and Bearer tokens (Docker Hub, ECR, GHCR, Harbor). Secrets never reach a message.
"""
from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from envbuild.dockerfile.reference import DOCKER_HUB, Reference
from envbuild.infra.errors import EnvironmentProblem

# Ask for every manifest kind, index/list first, so the digest is the one `docker pull
# name@digest` resolves on every platform (a multi-arch tag has an index).
MANIFEST_ACCEPT = ", ".join((
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
))
_CHALLENGE_PARAM = re.compile(r'(\w+)="([^"]*)"')


def docker_credentials(registry: str) -> tuple[str, str] | None:
    """(username, password) for `registry` from the user's Docker config, if any."""
    from docker import auth

    try:
        config = auth.load_config()
        entry = config.resolve_authconfig(None if registry == DOCKER_HUB else registry)
    except Exception:  # an unreadable config or a broken helper means "no credentials"
        return None
    if not entry:
        return None
    user = entry.get("username") or entry.get("Username")
    secret = entry.get("password") or entry.get("Password") or entry.get("IdentityToken")
    return (user, secret) if user and secret else None


class RegistryClient:
    """A requests session for one registry that answers auth challenges once per scope."""

    def __init__(self, ref: Reference, *, timeout: float = 10.0, actions: str = "pull"):
        import requests

        self.ref = ref
        self.actions = actions  # the token scope asked of a Bearer registry ("pull,push" before a push)
        self.timeout = timeout
        self.session = requests.Session()
        self.session.headers["User-Agent"] = "envbuild"
        self.credentials = docker_credentials(ref.registry)

    def _url(self, reference: str) -> str:
        return f"{self.ref.scheme}://{self.ref.api_host}/v2/{self.ref.path}/manifests/{reference}"

    def _request(self, method: str, url: str, **kwargs: Any):
        import requests

        try:
            return self.session.request(method, url, timeout=self.timeout, **kwargs)
        except requests.RequestException as exc:
            # A mirror serves pulls only: it is no help to a push, nor to the look-up before one.
            hint = (f"check that {self.ref.registry} is up and reachable; the image is pushed there"
                    if "push" in self.actions else
                    "check the network, or use --registry-mirror to pull through a reachable mirror")
            raise EnvironmentProblem(f"cannot reach registry {self.ref.registry} ({type(exc).__name__})",
                                     hint=hint) from None

    def _authorize(self, response) -> bool:
        """Answer a 401 challenge; True when a retry makes sense."""
        challenge = response.headers.get("WWW-Authenticate", "")
        scheme = challenge.split(" ", 1)[0].lower()
        if scheme == "basic":
            if not self.credentials:
                return False
            self.session.auth = self.credentials
            return True
        if scheme == "bearer":
            params = dict(_CHALLENGE_PARAM.findall(challenge))
            if "realm" not in params:
                return False
            query = {k: v for k, v in params.items() if k in ("service", "scope")}
            query.setdefault("scope", f"repository:{self.ref.path}:pull")
            if self.actions != "pull":
                query["scope"] = f"repository:{self.ref.path}:{self.actions}"
            token = self._request("GET", params["realm"], params=query, auth=self.credentials)
            if token.status_code != 200:
                return False
            body = token.json()
            value = body.get("token") or body.get("access_token")
            if not value:
                return False
            self.session.auth = None
            self.session.headers["Authorization"] = f"Bearer {value}"
            return True
        return False

    def manifest(self, method: str = "HEAD", reference: str | None = None):
        """The response for the reference's manifest (or the manifest `reference`, a digest
        of one of its platforms), after authentication; 404 is returned, 401/403 raise a
        clear EnvironmentProblem naming the registry."""
        url = self._url(reference or self.ref.digest or self.ref.tag or "latest")
        return self._send_authorized(method, url, {"Accept": MANIFEST_ACCEPT})

    def blob(self, digest: str):
        """The response for blob `digest` of the repository (redirects to storage are followed),
        its body not yet read."""
        url = f"{self.ref.scheme}://{self.ref.api_host}/v2/{self.ref.path}/blobs/{digest}"
        return self._send_authorized("GET", url, {}, stream=True)

    def _send_authorized(self, method: str, url: str, headers: dict, **kwargs: Any):
        response = self._request(method, url, headers=headers, **kwargs)
        if response.status_code == 401 and self._authorize(response):
            response = self._request(method, url, headers=headers, **kwargs)
        if response.status_code in (401, 403):
            how = ("the credentials in your Docker config were refused" if self.credentials
                   else "no credentials for it in your Docker config")
            raise EnvironmentProblem(
                f"registry {self.ref.registry} denied access to {self.ref.path} (HTTP {response.status_code}: {how})",
                hint=f"run `docker login {self.ref.registry}`",
            )
        return response


def manifest_digest(ref: Reference, *, timeout: float = 10.0) -> str | None:
    """The content digest of `ref`'s manifest (index for multi-arch tags); None if the
    registry has no such tag."""
    client = RegistryClient(ref, timeout=timeout)
    response = client.manifest("HEAD")
    if response.status_code == 404:
        return None
    digest = response.headers.get("Docker-Content-Digest") if response.ok else None
    if not digest and response.ok:  # some registries leave the header off HEAD answers
        response = client.manifest("GET")
        digest = response.headers.get("Docker-Content-Digest") or f"sha256:{hashlib.sha256(response.content).hexdigest()}"
    if not response.ok:
        raise EnvironmentProblem(f"registry {ref.registry} answered HTTP {response.status_code} for {ref}")
    return digest


def pin(ref: Reference, *, timeout: float = 10.0) -> Reference:
    """`ref` with the digest its tag points at now; a missing tag is an error."""
    if ref.digest:
        return ref
    digest = manifest_digest(ref, timeout=timeout)
    if digest is None:
        raise EnvironmentProblem(f"registry {ref.registry} has no image {ref}",
                                 hint="check the tag, or the --registry-mirror that serves it")
    return ref.with_digest(digest)


CONFIG_LIMIT = 4 << 20  # an image config is a few KiB; a bigger answer is not one
# The Docker/OCI architecture names of the platforms envbuild builds for
_ARCHITECTURES = {"linux-64": "amd64", "linux-aarch64": "arm64"}


def image_manifest(ref: Reference, platform: str = "linux-64", *, timeout: float = 10.0,
                   client: RegistryClient | None = None) -> tuple[str, dict] | None:
    """(digest of the tag's manifest, the image manifest of `platform`): its `config` and
    its `layers`, each with the digest and size of the compressed blob the registry keeps.
    None when the registry has no such tag; EnvironmentProblem when it cannot be read."""
    client = client or RegistryClient(ref, timeout=timeout)
    response = client.manifest("GET")
    if response.status_code == 404:
        return None
    _answered(response, ref)
    digest = response.headers.get("Docker-Content-Digest") or f"sha256:{hashlib.sha256(response.content).hexdigest()}"
    manifest = _json(response, ref)
    if "manifests" in manifest:  # an index: the manifest of the target's platform
        arch = _ARCHITECTURES.get(platform, "amd64")
        chosen = next((m for m in manifest["manifests"] if isinstance(m, dict)
                       and (m.get("platform") or {}).get("os") == "linux"
                       and (m.get("platform") or {}).get("architecture") == arch), None)
        if chosen is None:
            raise EnvironmentProblem(f"{ref} has no image for linux/{arch}",
                                     hint="name a tag built for the target platform")
        response = client.manifest("GET", chosen["digest"])
        _answered(response, ref)
        manifest = _json(response, ref)
    return digest, manifest


def image_config(ref: Reference, platform: str = "linux-64", *, timeout: float = 10.0) -> tuple[str, dict] | None:
    """(digest of the tag's manifest, the image config of `platform`): the config blob's
    JSON, whose `config.Env` and `config.Labels` say what the image was built with. None
    when the registry has no such tag; EnvironmentProblem when it cannot be read."""
    client = RegistryClient(ref, timeout=timeout)
    found = image_manifest(ref, platform, client=client)
    if found is None:
        return None
    digest, manifest = found
    config = manifest.get("config") if isinstance(manifest.get("config"), dict) else {}
    blob_digest = config.get("digest")
    if not isinstance(blob_digest, str) or not blob_digest.startswith("sha256:"):
        raise EnvironmentProblem(f"the manifest of {ref} names no image config",
                                 hint="the tag may be an artifact other than an image")
    with client.blob(blob_digest) as response:
        _answered(response, ref)
        body = response.raw.read(CONFIG_LIMIT + 1, decode_content=True)
    if len(body) > CONFIG_LIMIT or f"sha256:{hashlib.sha256(body).hexdigest()}" != blob_digest:
        raise EnvironmentProblem(f"registry {ref.registry} sent a config for {ref} that does not match its digest")
    try:
        config = json.loads(body)
    except ValueError:
        config = None
    if not isinstance(config, dict):
        raise EnvironmentProblem(f"the image config of {ref} is not a JSON object")
    return digest, config


def image_labels(ref: Reference, *, platform: str = "linux-64", timeout: float = 10.0) -> dict[str, str] | None:
    """The labels of `ref`'s image config (of its `platform` image, for a multi-arch tag),
    read as `image_config` reads it, without pulling layers; None when the registry has no
    such tag. An unreachable, refusing or malformed answer raises EnvironmentProblem."""
    found = image_config(ref, platform, timeout=timeout)
    if found is None:
        return None
    settings = found[1].get("config")
    labels = settings.get("Labels") if isinstance(settings, dict) else None
    return {str(k): str(v) for k, v in labels.items()} if isinstance(labels, dict) else {}


def _answered(response, ref: Reference) -> None:
    if not response.ok:
        raise EnvironmentProblem(f"registry {ref.registry} answered HTTP {response.status_code} for {ref}")


def _json(response, ref: Reference) -> dict:
    if len(response.content) > CONFIG_LIMIT:  # a manifest is a few KiB too
        raise EnvironmentProblem(f"registry {ref.registry} sent a manifest over 4 MiB for {ref}")
    try:
        body = response.json()
    except ValueError:
        body = None
    if not isinstance(body, dict):
        raise EnvironmentProblem(f"registry {ref.registry} sent something other than JSON for {ref}")
    return body
