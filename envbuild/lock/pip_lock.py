"""The pip path: a requirements-style lock with the exact framework wheel of the resolved
CUDA variant (`torch==2.1.2+cu121`), the index that serves it, and the companions.

When the indexes answer, pip's own resolver (`pip install --dry-run --report`) pins the
whole dependency closure for the TARGET (platform tags, Python version) and reports the
sha256 the index publishes for each file; the lock then installs with --require-hashes.
When an index cannot be reached, only the direct requirements are pinned and the file
and the command output say that no hashes were taken. Hashes are never made up.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass

from envbuild.errors import UserError
from envbuild.lock.metadata import Stamp
from envbuild.lock.virtual import glibc_for
from envbuild.model import Conflict, Fix, Resolution, Spec

DEFAULT_INDEX = "https://pypi.org/simple"
LOCKFILE = "requirements.lock"
STAMP_PREFIX = "# envbuild."
MACHINES = {"linux-64": "x86_64", "linux-aarch64": "aarch64"}


def lock_name(platform: str, first: bool) -> str:
    """requirements.lock for the first platform, requirements-<platform>.lock for others."""
    return LOCKFILE if first else f"requirements-{platform}.lock"


@dataclass(frozen=True)
class PipRequest:
    platform: str
    python: str  # major.minor of the target interpreter
    glibc: str
    requirements: tuple[str, ...]
    index_url: str
    extra_index_urls: tuple[str, ...]
    frameworks: tuple[str, ...] = ()  # the resolved framework wheels among `requirements`


@dataclass(frozen=True)
class PipPin:
    name: str
    version: str
    sha256: str | None


@dataclass(frozen=True)
class PipLock:
    request: PipRequest
    pins: tuple[PipPin, ...]  # the whole closure, or only the direct requirements
    hashed: bool
    note: str  # why there are no hashes; "" when hashed


class PipLockFailed(Exception):
    def __init__(self, conflict: Conflict, raw: str):
        self.conflicts = (conflict,)
        self.raw = raw
        super().__init__(conflict.message)


def _exact(requirement: str, where: str) -> "tuple[str, str] | None":
    """(name, version) when `requirement` pins one exact version, else None."""
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        req = Requirement(requirement)
    except InvalidRequirement as exc:
        raise UserError(f"invalid pip requirement {requirement!r}: {exc}", where=where,
                        hint="write it like `einops==0.7.0`") from None
    specs = list(req.specifier)
    if len(specs) == 1 and specs[0].operator in ("==", "===") and not specs[0].version.endswith(".*"):
        return req.name, specs[0].version
    return None


def build_pip_request(spec: Spec, resolution: Resolution, platform: str, index_url: str | None) -> PipRequest | None:
    stack = resolution.resolved
    requirements: list[str] = []
    frameworks: list[str] = []
    extra: list[str] = []
    for framework in stack.frameworks:
        if framework.installer != "pip":
            continue
        if not framework.pip_requirements:
            raise UserError(f"the resolution gives no pip requirement for {framework.name} {framework.version}",
                            hint="run `envbuild resolve` to see the resolved stack")
        for text in framework.pip_requirements:
            _exact(text, f"resolved {framework.name}")  # validates the syntax
            requirements.append(text)
            frameworks.append(text)
        if framework.pip_index_url and framework.pip_index_url not in extra:
            extra.append(framework.pip_index_url)
    for text in spec.pip_packages:
        _exact(text, "packages.pip")  # validates the syntax
        requirements.append(text)
    if not requirements:
        return None
    base = index_url or DEFAULT_INDEX
    return PipRequest(
        platform=platform,
        python=".".join(stack.python.split(".")[:2]),
        glibc=glibc_for(stack.base_image.os if stack.base_image else None),
        requirements=tuple(requirements),
        index_url=base,
        extra_index_urls=tuple(u for u in extra if u != base),
        frameworks=tuple(frameworks),
    )


def _unreachable(request: PipRequest, timeout: float) -> str | None:
    """The first index that does not answer, with the reason; None when all answer. Any
    HTTP status counts as an answer (a 404 for the project page is the resolver's business)."""
    import requests
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    project = canonicalize_name(Requirement(request.requirements[0]).name)
    for url in (request.index_url, *request.extra_index_urls):
        if url.startswith("file:"):
            continue
        try:
            with requests.get(f"{url.rstrip('/')}/{project}/", timeout=timeout, stream=True):
                pass
        except requests.RequestException as exc:
            return f"{url} ({type(exc).__name__})"
    return None


def _pip_command(request: PipRequest, report: str, target: str, timeout: float) -> list[str]:
    machine = MACHINES.get(request.platform)
    if machine is None:
        raise UserError(f"pip locks are made for {', '.join(MACHINES)}, not {request.platform}", where="--platform")
    glibc = request.glibc.replace(".", "_")
    command = [
        sys.executable, "-m", "pip", "install", "--isolated", "--dry-run", "--ignore-installed", "--quiet",
        "--disable-pip-version-check", "--report", report, "--target", target,
        "--only-binary=:all:", "--implementation", "cp", "--python-version", request.python,
        # pip widens a manylinux_2_X tag to every older one; plain linux_* is what the
        # PyTorch index tags many of its wheels with.
        "--platform", f"manylinux_{glibc}_{machine}", "--platform", f"linux_{machine}",
        "--index-url", request.index_url, "--timeout", str(int(timeout)), "--retries", "1",
    ]
    for url in request.extra_index_urls:
        command += ["--extra-index-url", url]
    return command + list(request.requirements)


def _resolve_with_pip(request: PipRequest, timeout: float) -> tuple[PipPin, ...]:
    with tempfile.TemporaryDirectory(prefix="envbuild-pip-") as tmp:
        report = os.path.join(tmp, "report.json")
        command = _pip_command(request, report, os.path.join(tmp, "target"), timeout)
        done = subprocess.run(command, capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            raise PipLockFailed(_pip_conflict(request, done.stderr), done.stderr.strip())
        with open(report, encoding="utf-8") as handle:
            data = json.load(handle)
    pins = []
    for item in data.get("install", []):
        hashes = (item.get("download_info", {}).get("archive_info") or {}).get("hashes") or {}
        pins.append(PipPin(item["metadata"]["name"], item["metadata"]["version"], hashes.get("sha256")))
    return tuple(sorted(pins, key=lambda p: p.name.lower()))


def _pip_conflict(request: PipRequest, stderr: str) -> Conflict:
    errors = [line.strip()[len("ERROR:"):].strip() for line in stderr.splitlines() if line.strip().startswith("ERROR:")]
    where = ", ".join((request.index_url, *request.extra_index_urls))
    # pip names the requirement it could not satisfy ("No matching distribution found
    # for X", "Cannot install X because ..."); a framework wheel there means the variant
    # is not on the index for this target.
    for wanted in request.frameworks:
        if any(wanted in line for line in errors):
            return Conflict(
                kind="framework_cuda_mismatch",
                message=f"no wheel of {wanted} for CPython {request.python} on {request.platform} in {where}; "
                        f"the CUDA variant, the Python version or the index must move",
                fixes=(Fix("check the index URL of the CUDA variant (e.g. https://download.pytorch.org/whl/cu121)"),),
            )
    last = errors[0] if errors else "pip found no solution"
    return Conflict(kind="library_abi", message=f"pip cannot resolve the pip requirements for {request.platform}: {last}")


def lock_pip(request: PipRequest, *, timeout: float = 10.0) -> PipLock:
    down = _unreachable(request, timeout)
    if down is None:
        pins = _resolve_with_pip(request, timeout)
        missing = [p.name for p in pins if not p.sha256]
        if not missing:
            return PipLock(request, pins, hashed=True, note="")
        return PipLock(request, pins, hashed=False,
                       note=f"the index published no sha256 for {', '.join(missing)}, so no hashes were written")
    direct = []
    for text in request.requirements:
        exact = _exact(text, "packages.pip")
        direct.append(PipPin(*exact, None) if exact else PipPin(text, "", None))
    return PipLock(request, tuple(direct), hashed=False,
                   note=f"the package index {down} could not be reached, so only the direct requirements are "
                        f"pinned and no hashes were taken; re-run `envbuild lock` where the index is reachable")


def render(lock: PipLock, stamp: Stamp) -> str:
    request = lock.request
    lines = [
        "# pip requirements lock written by `envbuild lock`; do not edit.",
        f"# Target: {request.platform}, CPython {request.python}.",
    ]
    if lock.hashed:
        lines.append("# Every package is pinned with the sha256 its index publishes:")
        lines.append(f"#   pip install --require-hashes -r {lock_name(request.platform, True)}")
    else:
        lines.append(f"# NO HASHES: {lock.note}.")
    lines += [f"{STAMP_PREFIX}{key}: {value}" for key, value in stamp.fields().items()]
    lines.append(f"--index-url {request.index_url}")
    lines += [f"--extra-index-url {url}" for url in request.extra_index_urls]
    for pin in lock.pins:
        line = f"{pin.name}=={pin.version}" if pin.version else pin.name
        if pin.sha256:
            line += f" \\\n    --hash=sha256:{pin.sha256}"
        lines.append(line)
    return "\n".join(lines) + "\n"


def read_stamp(text: str) -> dict[str, str]:
    found = {}
    for line in text.splitlines():
        if line.startswith(STAMP_PREFIX) and ":" in line:
            key, value = line[len(STAMP_PREFIX):].split(":", 1)
            found[key.strip()] = value.strip()
    return found
