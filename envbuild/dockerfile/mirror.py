"""`--registry-mirror HOST[/prefix]`: pull bases from an internal mirror instead.

Air-gapped clusters and pull-through caches (ECR, Harbor, Artifactory, a local
`registry`) serve the upstream repositories under their own host, optionally below a
prefix. The upstream registry host itself is dropped and the repository path kept:

    nvidia/cuda:12.4.1-runtime-ubuntu22.04  -> HOST/prefix/nvidia/cuda:12.4.1-runtime-ubuntu22.04
    ubuntu:22.04                            -> HOST/prefix/library/ubuntu:22.04
    763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:TAG
                                            -> HOST/prefix/pytorch-training:TAG
"""
from __future__ import annotations

import re
from dataclasses import replace

from envbuild.dockerfile.reference import Reference
from envbuild.infra.errors import UserError, shown

_MIRROR = re.compile(r"^(?P<host>[A-Za-z0-9.-]+(?::[0-9]+)?)(?P<prefix>(?:/[a-z0-9._-]+)*)/?$")


MAX_HOST_CHARS = 253 + len(":65535")  # DNS names have at most 253 characters


def parse_mirror(text: str) -> tuple[str, str]:
    match = _MIRROR.match(text.strip().removeprefix("https://").removeprefix("http://"))
    if not match or len(match["host"]) > MAX_HOST_CHARS:
        raise UserError(f"invalid --registry-mirror {shown(text)}", hint="expected HOST[:PORT][/prefix], e.g. mirror.corp:5000/dockerhub")
    return match["host"], match["prefix"].strip("/")


def apply_mirror(ref: Reference, mirror: str | None) -> Reference:
    if not mirror:
        return ref
    host, prefix = parse_mirror(mirror)
    path = f"{prefix}/{ref.path}" if prefix else ref.path
    return replace(ref, registry=host, path=path)
