"""The base image a spec names, as a catalog row, so that the same checks run on it as on
any image of `matrices/base_images.yaml`.

- A catalog image, also under a mirror path (`127.0.0.1:5555/nvidia/cuda:TAG` is the
  catalog's `nvidia/cuda:TAG`: the same repository path and tag under another registry):
  its catalog row.
- Any other image is a base of family `custom` (or the family the spec names). Its facts
  (CUDA, cuDNN, Python, OS, flavour, framework) come, in this order, from the spec
  (`base_image: {ref: ..., cuda: ...}` or --base-fact), then from the image itself
  (`envbuild.image.facts`: its config env through the local engine or the registry, and
  python3 run in it when the engine holds it; the commands hand that reader in). What neither says stays unknown, with the
  reason in the row's `unread`; the resolver then reports those links as not checked.

The row's `source` says where each fact came from.
"""
from __future__ import annotations

import dataclasses
import re

from envbuild.core.model import CUSTOM_FAMILY, Spec
from envbuild.core.versions import parse_version
from envbuild.matrix import tables as t
from envbuild.resolver.context import ImageCuda

_VERSION = re.compile(r"\d+(?:\.\d+)*")
_REQUIRE_CUDA = re.compile(r"cuda>=(\d+\.\d+)")


def with_named_base(m, spec: Spec, *, read=None):
    """`m` with a row for the spec's `base_image` when the catalog has none for it as
    named (or the spec states facts about it); `m` itself otherwise. `read(ref, platform)`
    reads the facts the spec leaves open from the image (`envbuild.image.facts.read`,
    handed in by the commands: the resolver itself reaches no engine or registry)."""
    if not spec.base_image or (m.named_base is not None and m.named_base.ref == spec.base_image):
        return m  # no base named, or its row is there (a fix resolved with the same matrices)
    catalog = catalog_image(m.base_images, spec.base_image)
    if catalog is not None and catalog.ref == spec.base_image and not spec.base_facts:
        return m
    return dataclasses.replace(m, named_base=named_row(m, spec, catalog, read))


def catalog_image(images, ref: str) -> t.BaseImage | None:
    """The catalog row `ref` names: the same reference (Docker Hub's `docker.io/` and
    `library/` prefixes aside), or the same repository path and tag under another registry
    or a path prefix (a mirror, a pull-through cache, another AWS region)."""
    bare = ref.removeprefix("docker.io/").removeprefix("library/")
    exact = next((img for img in images if img.ref == bare), None)
    if exact is not None or "@" in ref:
        return exact
    wanted = _path_and_tag(ref)
    if wanted is None:
        return None
    parts = wanted[0].split("/")
    suffixes = {"/".join(parts[i:]) for i in range(len(parts))}
    return next((img for img in images if (row := _path_and_tag(img.ref)) is not None and row[1] == wanted[1]
                 and row[0] in suffixes), None)


def _path_and_tag(ref: str) -> tuple[str, str] | None:
    """(repository path without its registry host or Docker Hub's `library/`, tag); None
    without a tag. A first component is a registry host when it has a dot or a colon or
    is `localhost`, as Docker reads references."""
    name, _, tag = ref.rpartition(":")
    if not name or "/" in tag:
        return None
    parts = name.split("/")
    if len(parts) > 1 and ("." in parts[0] or ":" in parts[0] or parts[0] == "localhost"):
        parts = parts[1:]
    if parts[0] == "library":
        parts = parts[1:]
    return "/".join(parts), tag


def named_row(m, spec: Spec, catalog: t.BaseImage | None, read) -> t.BaseImage:
    """The row for the spec's base image: the catalog's (for a mirror path) or an empty
    `custom` one, with the stated facts laid over it and, for an image outside the
    catalog, the open facts read from the image."""
    stated = dict(spec.base_facts)
    where = "stated in the spec's base_image or with --base-fact"
    facts: dict[str, str | None] = {}
    origins: list[str] = []
    if catalog is not None:
        facts = {"family": catalog.family, "flavour": catalog.flavour, "cuda": catalog.cuda, "cudnn": catalog.cudnn,
                 "python": catalog.python, "os": catalog.os, "framework": _framework_fact(catalog)}
        origins.append(f"the catalog's {catalog.ref} ({catalog.source})")
    if stated:
        facts.update(stated)
        origins.insert(0, f"{', '.join(sorted(stated))} {where}")
    unread = None
    if catalog is None:
        open_facts = [name for name in ("cuda", "cudnn", "python", "os", "flavour", "framework") if name not in stated]
        if read is not None and open_facts:
            found = read(spec.base_image, spec.platform)
            learned, used = _read_facts(m, found)
            learned = {k: v for k, v in learned.items() if k in open_facts}
            facts.update(learned)
            if learned:
                what = f"{found.ref}" + (f" ({found.digest[:19]})" if found.digest else "")
                origins.append(f"{', '.join(f'{k} {learned[k]} ({used[k]})' for k in sorted(learned))} read from "
                               f"{what} through {found.where}")
            unread = found.problem or (found.notes[0] if found.notes else None)
        elif open_facts:
            unread = "the image was not read"
    framework, framework_version = (facts.get("framework") or "").partition("==")[::2]
    return t.BaseImage(
        ref=spec.base_image, family=facts.get("family") or CUSTOM_FAMILY, flavour=facts.get("flavour"),
        framework=framework or None, framework_version=framework_version or None, cuda=facts.get("cuda"),
        cudnn=facts.get("cudnn"), python=facts.get("python"), os=facts.get("os"),
        platforms=catalog.platforms if catalog is not None else (spec.platform,),
        python_source=catalog.python_source if catalog is not None and "python" not in stated else None,
        source="; ".join(origins) or f"{spec.base_image}: nothing stated, nothing read", unread=unread)


def _framework_fact(img: t.BaseImage) -> str | None:
    return f"{img.framework.lower()}=={img.framework_version}" if img.framework and img.framework_version else None


def _read_facts(m, found) -> tuple[dict[str, str], dict[str, str]]:
    """The facts an image read states, and for each what stated it."""
    facts: dict[str, str] = {}
    used: dict[str, str] = {}
    env = dict(found.env)
    for row in m.image_env:
        value = env.get(row.env)
        if value is None or row.fact in facts:
            continue
        fact = _env_fact(row, value)
        if fact and row.fact == "cuda" and ImageCuda.read(fact) is None:
            continue  # not a CUDA version the checks can compare (the fact stays unknown)
        if fact:
            facts[row.fact] = fact
            used[row.fact] = row.env
    if found.python:  # python3 itself outranks an env variable
        facts["python"], used["python"] = found.python, "python3 run in it"
    if "python" in facts:
        facts["python"] = ".".join(facts["python"].split(".")[:2])
    label = os_label(dict(found.os))
    if label and label in {row.os for row in m.target_glibc}:  # an OS whose glibc a lock can state
        facts["os"], used["os"] = label, "/etc/os-release"
    return facts, used


def _env_fact(row: t.ImageEnv, value: str) -> str | None:
    if row.fact == "framework":  # the whole version: a nightly's 2.4.0.dev20240514 is not 2.4.0
        try:
            parse_version(value.strip())
        except ValueError:
            return None
        return f"{row.value}=={value.strip()}" if row.value else None
    if row.value:
        return row.value
    if row.env == "NVIDIA_REQUIRE_CUDA":
        found = _REQUIRE_CUDA.search(value)
        return found.group(1) if found else None
    found = _VERSION.match(value.strip())
    return found.group(0) if found else None


def os_label(release: dict[str, str]) -> str | None:
    """The OS as base image tags name it (ubuntu22.04, debian12, rockylinux9, ubi9), from
    /etc/os-release's ID and VERSION_ID; None when it does not say."""
    name, version = release.get("ID"), release.get("VERSION_ID")
    if not name or not version:
        return None
    major = version.split(".")[0]
    return {"ubuntu": f"ubuntu{version}", "debian": f"debian{major}", "rocky": f"rockylinux{major}",
            "rhel": f"ubi{major}", "centos": f"centos{major}", "amzn": f"amzn{version}"}.get(name)
