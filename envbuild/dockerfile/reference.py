"""Image references (`[registry/]path[:tag][@digest]`), split the way Docker does:
the first path component is a registry host only if it has a dot or a colon or is
`localhost`; otherwise the image lives on Docker Hub (official images under `library/`)."""
from __future__ import annotations

import re
from dataclasses import dataclass, replace

from envbuild.infra.errors import UserError

DOCKER_HUB = "docker.io"
DOCKER_HUB_API = "registry-1.docker.io"
_COMPONENT = re.compile(r"^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$")
_TAG = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
_DIGEST = re.compile(r"^[a-z0-9]+:[a-f0-9]{32,}$")


@dataclass(frozen=True)
class Reference:
    registry: str  # "docker.io" for Docker Hub
    path: str  # "nvidia/cuda", "library/ubuntu"
    tag: str | None = None
    digest: str | None = None

    @property
    def api_host(self) -> str:
        return DOCKER_HUB_API if self.registry == DOCKER_HUB else self.registry

    @property
    def scheme(self) -> str:
        # Docker itself talks plain http to loopback registries only.
        host = self.registry.split(":")[0]
        return "http" if host in ("localhost", "127.0.0.1", "::1") else "https"

    def with_digest(self, digest: str) -> "Reference":
        return replace(self, digest=digest)

    def __str__(self) -> str:
        if self.registry == DOCKER_HUB:
            name = self.path[len("library/"):] if self.path.startswith("library/") else self.path
        else:
            name = f"{self.registry}/{self.path}"
        if self.tag:
            name += f":{self.tag}"
        if self.digest:
            name += f"@{self.digest}"
        return name


def parse(text: str) -> Reference:
    def bad(why: str) -> UserError:
        return UserError(f"invalid image reference {text!r}: {why}", hint="expected [REGISTRY/]NAME[:TAG][@DIGEST]")

    rest, _, digest = text.strip().partition("@")
    if digest and not _DIGEST.match(digest):
        raise bad("the digest must look like sha256:<hex>")
    tag = None
    last = rest.rsplit("/", 1)[-1]
    if ":" in last:
        rest, tag = rest.rsplit(":", 1)
        if not _TAG.match(tag):
            raise bad(f"bad tag {tag!r}")
    parts = rest.split("/")
    if len(parts) > 1 and ("." in parts[0] or ":" in parts[0] or parts[0] == "localhost"):
        registry, parts = parts[0], parts[1:]
    else:
        registry = DOCKER_HUB
        if len(parts) == 1:
            parts = ["library"] + parts
    if not parts or not all(_COMPONENT.match(p) for p in parts):
        raise bad("repository names are lowercase letters, digits and . _ - separated by /")
    return Reference(registry=registry, path="/".join(parts), tag=tag, digest=digest or None)
