"""The pip path: a requirements-style lock with the exact framework wheel of the resolved
CUDA variant (`torch==2.1.2+cu121`, or `torch==2.5.1` from PyPI when PyPI's default wheel
is that very build), the indexes that serve it, and the whole dependency closure with the
sha256 of every file of each pinned version that the target can install.

The closure is resolved by uv (`uv pip compile --format pylock.toml --python-platform
--python-version --generate-hashes`) for the TARGET (its glibc's manylinux tags, its
CPython), from the indexes the spec and the command line name only, reached the way this
machine's pip configuration says (lock/pip_config.py); see docs/lock.md for the
measurement behind uv and bench/bench_pip_lock.py to repeat it. uv's pylock.toml gives
every file of each pinned version the target can install, with its sha256: the source of
both requirements.lock and envbuild's pylock.toml (lock/pylock.py).
It fails closed: an index that cannot be read is an environment error (exit 3), and a
lock without hashes is refused unless the caller allows it.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import tomllib
from dataclasses import dataclass, field, replace
from datetime import datetime
from urllib.parse import unquote, urlsplit

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from uv import find_uv_bin

from envbuild.core.model import Conflict, Fix, Resolution, Spec
from envbuild.core.values import ConflictKind
from envbuild.core.versions import pypi_form, read_local_label
from envbuild.infra.errors import EnvironmentProblem, UserError
from envbuild.infra.urls import mask, mask_text, strip_credentials
from envbuild.lock.folder import PIP_LOCKFILE
from envbuild.lock.gpu import cuda_compatible
from envbuild.lock.metadata import Stamp
from envbuild.lock.pip_config import PipSettings, uv_arguments, uv_environment, with_credentials
from envbuild.lock.pip_tags import uv_platform
from envbuild.lock.solve import SolveFailed
from envbuild.lock.virtual import glibc_for
from envbuild.output import say

DEFAULT_INDEX = "https://pypi.org/simple"
STAMP_PREFIX = "# envbuild."
UNHASHED = "# NOT FULLY HASHED:"
# Pythons a failed lock is retried with, to offer a fix that is known to lock
PROBE_PYTHONS = ("3.14", "3.13", "3.12", "3.11", "3.10", "3.9")


@dataclass(frozen=True)
class PipRequest:
    platform: str
    python: str  # major.minor of the target interpreter
    glibc: str
    requirements: tuple[str, ...]
    index_url: str  # may hold credentials: only ever handed to the installer process, in its environment
    extra_index_urls: tuple[str, ...]  # the same
    frameworks: tuple[str, ...] = ()  # the resolved framework wheels among `requirements`
    settings: PipSettings = field(default_factory=PipSettings)
    cuda: str | None = None  # the resolved CUDA the framework wheels are built for
    # `name==version` the solver must keep to if it installs `name` at all (never installs
    # it): the versions the base image carries (envbuild.lock.base_packages), and the CUDA
    # component wheels of the resolved CUDA release (envbuild.lock.cuda_check)
    constraints: tuple[str, ...] = ()

    @property
    def indexes(self) -> tuple[str, ...]:
        return (self.index_url, *self.extra_index_urls)


@dataclass(frozen=True)
class PinFile:
    """One installable file of a pinned version, as uv found it on an index."""

    kind: str  # "wheel", "sdist" or "archive" (a requirement given as `name @ URL`)
    url: str
    sha256: str | None
    size: int | None = None
    upload_time: datetime | None = None


@dataclass(frozen=True)
class PipPin:
    name: str
    version: str
    hashes: tuple[str, ...]  # "sha256:<hex>", one per file of that version the target can install
    files: tuple[PinFile, ...] = ()


@dataclass(frozen=True)
class PipLock:
    request: PipRequest
    pins: tuple[PipPin, ...]
    hashed: bool
    note: str  # which pins have no hashes; "" when hashed


class PipLockFailed(SolveFailed):
    """The pip half cannot be locked: one conflict in resolve's format, pip's own text as `raw`."""

    def __init__(self, conflict: Conflict, raw: str):
        super().__init__((conflict,), raw)


def _requirement(text: str, where: str):
    try:
        return Requirement(text)
    except InvalidRequirement as exc:
        raise UserError(f"invalid pip requirement {text!r}: {exc}", where=where,
                        hint="write it like `einops==0.7.0`") from None


def check_index_url(url: str, where: str = "--index-url") -> str:
    """A URL that goes into a requirements file line must be one line of printable text."""
    if any(not c.isprintable() or c.isspace() for c in url):
        raise UserError(f"the index URL {mask(url)!r} holds a space, newline or control character", where=where,
                        hint="give one URL such as https://pypi.org/simple")
    return url


def build_pip_request(spec: Spec, resolution: Resolution, platform: str, index_url: str | None,
                      settings: PipSettings | None = None, extra_index_urls: tuple[str, ...] = (),
                      glibc: str | None = None) -> PipRequest | None:
    """What uv is asked for `platform` (whose own resolution `resolution` is): the resolved
    framework wheels and the spec's pip packages, from the base index (`index_url`, else
    PyPI), the framework's variant index and `extra_index_urls`; None when there is no pip
    requirement. pip's configuration (`settings`) adds no index, only credentials for these.
    `glibc`: the target's C library when known directly (a host), else the base image OS's."""
    settings = settings or PipSettings()
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
        # PyPI's own wheel is the resolved build (matrices: pypi_default): lock it from the
        # base index, so a PyPI mirror is all a user needs.
        from_pypi = framework.pypi_default and platform == stack.platform
        for text in framework.pip_requirements:
            _requirement(text, f"resolved {framework.name}")
            text = pypi_form(text) if from_pypi else text
            requirements.append(text)
            frameworks.append(text)
        if framework.pip_index_url and not from_pypi and framework.pip_index_url not in extra:
            extra.append(framework.pip_index_url)
    for text in spec.pip_packages:
        _requirement(text, "packages.pip")
        requirements.append(text)
    if not requirements:
        return None
    base = check_index_url(index_url) if index_url else DEFAULT_INDEX
    extra += [check_index_url(u, "--extra-index-url") for u in extra_index_urls if u not in extra]
    gpu = [f.cuda for f in stack.frameworks if f.installer == "pip" and f.cuda]
    return PipRequest(
        platform=platform,
        python=".".join(stack.python.split(".")[:2]),
        glibc=glibc or glibc_for(stack.base_image.os if stack.base_image else None),
        requirements=tuple(requirements),
        index_url=with_credentials(base, settings),
        extra_index_urls=tuple(with_credentials(u, settings) for u in extra if u != base),
        frameworks=tuple(frameworks),
        settings=settings,
        cuda=gpu[0] if gpu else None,
    )


# --- reaching the indexes ---------------------------------------------------------------

def check_indexes(request: PipRequest, timeout: float) -> None:
    """Every index answers for the first requirement's project page, or EnvironmentProblem
    names the index (credentials masked) and why. Any status but 401/403/5xx is an answer:
    a 404 for one project is the resolver's business."""
    import requests
    project = canonicalize_name(_requirement(request.requirements[0], "requirements").name)
    verify: "str | bool" = request.settings.cert or True
    proxies = {"http": request.settings.proxy, "https": request.settings.proxy} if request.settings.proxy else None
    for url in request.indexes:
        if url.startswith("file:"):
            if not os.path.isdir(unquote(urlsplit(url).path)):
                _unreadable(url, "the folder does not exist")
            continue
        try:
            with requests.get(f"{url.rstrip('/')}/{project}/", timeout=timeout, stream=True, verify=verify,
                              proxies=proxies) as answer:
                status, reason = answer.status_code, answer.reason
        except requests.exceptions.SSLError as exc:
            _unreadable(url, f"TLS failure: {_short(exc)}", "set `cert` in pip's configuration (or PIP_CERT) to your CA bundle")
        except requests.exceptions.ProxyError as exc:
            _unreadable(url, f"the proxy failed: {_short(exc)}")
        except requests.exceptions.Timeout:
            _unreadable(url, f"no answer within {timeout:g} s")
        except requests.RequestException as exc:
            _unreadable(url, f"cannot connect: {_short(exc)}")
        else:
            if status in (401, 403):
                _unreadable(url, f"HTTP {status} {reason}: the index wants credentials",
                            "give them in ~/.netrc, a keyring, or the index URL in pip's configuration; see docs/lock.md")
            if status >= 500:
                _unreadable(url, f"HTTP {status} {reason}")


def _short(exc: Exception) -> str:
    text = mask_text(str(exc))
    inner = re.findall(r"\(Caused by \w+\((.*)\)\)", text)
    return (inner[0] if inner else text).strip("'\" ")[:200]


def _unreadable(url: str, cause: str, hint: str | None = None):
    raise EnvironmentProblem(f"cannot read the package index {mask(url)}: {cause}",
                             hint=hint or "check the URL, the network and the proxy; for offline use pass "
                                          "`--index-url` pointing at a reachable mirror")


# --- resolving with uv ------------------------------------------------------------------

def uv_command(request: PipRequest, requirements_in: str, output: str, constraints: str | None = None) -> list[str]:
    """uv's command line: no index URL and no credential on it (any local user can read a
    process's command line); the indexes travel in `uv_env`. `constraints`: a file of
    name==version lines the solver keeps to (the request's `constraints`)."""
    command = [
        find_uv_bin(), "pip", "compile", requirements_in, "-o", output, "--format", "pylock.toml", "--quiet",
        "--no-config", "--no-header", "--no-annotate", "--generate-hashes", "--no-build",
        "--python-platform", uv_platform(request.platform, request.glibc),
        # the target's version; this interpreter only spares uv a search for one (seconds)
        "--python-version", request.python, "--python", sys.executable, "--no-python-downloads",
        # pip's semantics: the best version across all indexes (the lock pins hashes anyway)
        "--index-strategy", "unsafe-best-match",
    ]
    if constraints:
        command += ["--constraint", constraints]
    return command + uv_arguments(request.settings)


def uv_env(request: PipRequest, timeout: float) -> dict[str, str]:
    env = uv_environment(request.settings, request.index_url, request.extra_index_urls)
    env.setdefault("UV_HTTP_TIMEOUT", str(int(timeout)))
    return env


def resolve_uv(request: PipRequest, timeout: float, *, explain: bool = True) -> tuple[PipPin, ...]:
    """The pinned, hashed closure; raises PipLockFailed (no solution; explained by
    re-locking variants of the request when `explain`) or EnvironmentProblem (an index
    that cannot be read, named by asking each index when `explain`; anything else uv
    could not do)."""
    with tempfile.TemporaryDirectory(prefix="envbuild-uv-") as tmp:
        requirements_in = os.path.join(tmp, "requirements.in")
        with open(requirements_in, "w", encoding="utf-8") as handle:
            handle.write("\n".join(request.requirements) + "\n")
        output = os.path.join(tmp, "pylock.toml")  # uv takes this name (or pylock.NAME.toml) only
        constraints = None
        if request.constraints:
            constraints = os.path.join(tmp, "constraints.txt")
            with open(constraints, "w", encoding="utf-8") as handle:
                handle.write("\n".join(request.constraints) + "\n")
        try:
            command = uv_command(request, requirements_in, output, constraints)
            say.command(command)
            done = subprocess.run(command, capture_output=True, text=True, env=uv_env(request, timeout), timeout=900)
        except subprocess.TimeoutExpired:
            raise EnvironmentProblem("uv did not finish resolving the pip requirements within 15 minutes",
                                     hint="check the indexes' speed; run again with a warm cache") from None
        if done.returncode != 0:
            if explain:  # the cause, when it is an index that cannot be read, said as such
                check_indexes(request, timeout)
            if "No solution found" in done.stderr:
                conflict = diagnose(request, done.stderr, timeout) if explain else Conflict(ConflictKind.LIBRARY_ABI, "")
                raise PipLockFailed(conflict, mask_text(done.stderr.strip()))
            raise EnvironmentProblem(
                f"uv could not resolve the pip requirements: {_uv_cause(done.stderr)}",
                hint="check the indexes named above, the network, the proxy and the CA bundle")
        with open(output, "rb") as handle:
            return parse_pylock(tomllib.load(handle))


def parse_pylock(document: dict) -> tuple[PipPin, ...]:
    """Pins from a PEP 751 document as uv writes it: each package's wheels (or its sdist,
    or the archive of a `name @ URL` requirement) with their sha256."""
    pins = []
    for package in document.get("packages", ()):
        files = [PinFile("wheel", w.get("url") or w.get("path", ""), w.get("hashes", {}).get("sha256"),
                         w.get("size"), w.get("upload-time")) for w in package.get("wheels", ())]
        for kind in ("sdist", "archive"):
            if kind in package:
                entry = package[kind]
                files.append(PinFile(kind, entry.get("url") or entry.get("path", ""),
                                     entry.get("hashes", {}).get("sha256"), entry.get("size"), entry.get("upload-time")))
        hashes = tuple(f"sha256:{f.sha256}" for f in files if f.sha256)
        pins.append(PipPin(package["name"], package.get("version", ""), hashes, tuple(files)))
    return tuple(sorted(pins, key=lambda p: p.name.lower()))


def _uv_cause(stderr: str) -> str:
    """uv's first error line and its innermost cause, credentials masked."""
    lines = [line.strip() for line in mask_text(stderr).splitlines() if line.strip()]
    first = next((line for line in lines if line.startswith(("error:", "×"))), lines[0] if lines else "no output")
    causes = [line.split(":", 1)[1].strip() for line in lines if line.startswith("Caused by:")]
    return first.lstrip("×").removeprefix("error:").strip() + (f" ({causes[-1]})" if causes else "")


def parse_requirements(text: str) -> tuple[PipPin, ...]:
    """Pins from a `name==version --hash=...` requirements file (continuations joined)."""
    pins = []
    for entry in text.replace("\\\n", " ").splitlines():
        entry = entry.strip()
        if not entry or entry.startswith(("#", "-")):
            continue
        words = entry.split()
        name, _, version = words[0].partition("==")
        hashes = tuple(w.removeprefix("--hash=") for w in words[1:] if w.startswith("--hash="))
        pins.append(PipPin(name, version.split(";")[0], hashes))
    return tuple(sorted(pins, key=lambda p: p.name.lower()))


# --- explaining a failed lock -------------------------------------------------------------

_NAMED = re.compile(r"([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?(?:\s*(?:==|>=|<=|!=|~=|<|>)|\s+(?:was|has|have|is|are)\b)")
_NOT_NAMES = {"there", "all", "only", "we", "you", "your", "it", "and", "because", "which"}


def missing_package(stderr: str) -> str | None:
    """The package uv found no usable candidates for: the first one its explanation names."""
    text = " ".join(line.strip() for line in stderr.splitlines())
    after = text.split("Because", 1)[1] if "Because" in text else text
    for found in _NAMED.finditer(after):
        if found.group(1).lower() not in _NOT_NAMES:
            return found.group(1)
    return None


def _reason(stderr: str) -> str:
    """uv's hint (e.g. which Python ABI tags the wheels have), else its first cause line."""
    lines = [line.strip() for line in mask_text(stderr).splitlines() if line.strip()]
    hints = [line.removeprefix("hint:").strip() for line in lines if line.startswith("hint:")]
    if hints:
        return hints[0]
    because = next((line for line in lines if "Because" in line), "uv found no solution")
    return because.split("Because", 1)[1].strip().rstrip(":") if "Because" in because else because


def _locks(request: PipRequest, timeout: float) -> bool:
    try:
        resolve_uv(request, timeout, explain=False)
    except (PipLockFailed, EnvironmentProblem):
        return False
    return True


def diagnose(request: PipRequest, stderr: str, timeout: float) -> Conflict:
    """Name the package whose candidates are missing; offer a Python that does lock (each
    fix offered was itself locked)."""
    package = missing_package(stderr) or "the pip requirements"
    where = ", ".join(mask(u) for u in request.indexes)
    reason = _reason(stderr)
    for python in PROBE_PYTHONS:
        if python != request.python and _locks(replace(request, python=python), timeout):
            return Conflict(
                kind=ConflictKind.PYTHON_UNSUPPORTED,
                message=f"no usable wheel of {package} for CPython {request.python} on {request.platform} in {where} "
                        f"(it locks with CPython {python}): {reason}",
                fixes=(Fix(f"use Python {python}", {"python": python}),),
            )
    names = {_requirement(t, "requirements").name.lower() for t in request.frameworks}
    is_framework = package.split("[")[0].lower() in names
    return Conflict(
        kind=ConflictKind.FRAMEWORK_CUDA_MISMATCH if is_framework else ConflictKind.LIBRARY_ABI,
        message=f"no usable wheel of {package} for CPython {request.python} on {request.platform} in {where}: {reason}",
    )


# --- the guard and the lock ---------------------------------------------------------------

def _wrong_variant(pin: PipPin, cuda: str | None) -> str | None:
    """Why a pinned wheel with a local CUDA tag does not fit the resolved CUDA, else None."""
    local = pin.version.partition("+")[2].lower()
    if not local or not cuda:
        return None
    if local == "cpu" or local.startswith("cpu."):
        return "is a CPU build"
    built = read_local_label(local).cuda if local.startswith("cu") else None
    if built and not cuda_compatible(built, cuda):
        return f"is built for CUDA {built}"
    return None


def checked_lock(request: PipRequest, pins: tuple[PipPin, ...], *, allow_unhashed: bool) -> PipLock:
    """The lock of `pins`, refused when a wheel is not the resolved CUDA variant, or when a
    pin has no hash (uv hashes files the index publishes no hash for by reading them, so
    this is a guard) and `allow_unhashed` is false."""
    wrong = [(p, why) for p in pins if (why := _wrong_variant(p, request.cuda))]
    if wrong:
        pin, why = wrong[0]
        raise PipLockFailed(Conflict(
            kind=ConflictKind.FRAMEWORK_CUDA_MISMATCH,
            message=f"the pip lock for {request.platform} resolved {pin.name}=={pin.version}, which {why}, but the "
                    f"resolved CUDA is {request.cuda}; envbuild refuses to lock it",
            fixes=(Fix(f"pin {pin.name} to its +cu{request.cuda.replace('.', '')} build in packages.pip"),),
        ), "")
    missing = [p.name for p in pins if not p.hashes or any(f.sha256 is None for f in p.files)]
    if not missing:
        return PipLock(request, pins, hashed=True, note="")
    note = f"the index published no sha256 for {', '.join(missing)}, so they are pinned without hashes"
    if not allow_unhashed:
        raise EnvironmentProblem(note.replace("so they are pinned", "and a lock") + " is refused",
                                 hint="use an index that publishes hashes, or pass --allow-unhashed to write it anyway")
    return PipLock(request, pins, hashed=False, note=note)


# Said in the header of every pip lock file: where its packages come from.
SOURCES_NOTE = (
    "The indexes it names are the only ones it was resolved from: those the spec and the",
    "command line name. The pip configuration of the machine that wrote it was used only to",
    "reach them (CA bundle, proxy, credentials); no package source of that configuration is",
    "part of the lock.",
)


def requirement_line(pin: PipPin) -> str:
    """`name==version`, or `name @ URL` for a requirement given by URL."""
    archive = next((f for f in pin.files if f.kind == "archive"), None)
    if archive is not None:
        return f"{pin.name} @ {strip_credentials(archive.url)}"
    return f"{pin.name}=={pin.version}" if pin.version else pin.name


def render(lock: PipLock, stamp: Stamp, name: str = PIP_LOCKFILE, about: tuple[str, ...] = ()) -> str:
    """requirements.lock (`name` is the file's own name, for the install line; `about`:
    further header lines, such as what CUDA it installs)."""
    request = lock.request
    lines = [
        "# pip requirements lock written by `envbuild lock`; do not edit.",
        f"# Target: {request.platform}, CPython {request.python}.",
        *(f"# {line}" for line in about),
    ]
    if lock.hashed:
        lines.append("# Every package is pinned with the sha256 of each file of it the target can install:")
        lines.append(f"#   pip install --require-hashes -r {name}")
    else:
        lines.append(f"{UNHASHED} {lock.note}.")
    lines += [f"# {line}" for line in SOURCES_NOTE]
    lines += [f"{STAMP_PREFIX}{key}: {value}" for key, value in stamp.fields().items()]
    # Credentials never go into a file that is committed: pip and uv find them at install
    # time in ~/.netrc, a keyring, or a PIP_INDEX_URL that holds them (docs/lock.md).
    lines.append(f"--index-url {strip_credentials(request.index_url)}")
    lines += [f"--extra-index-url {strip_credentials(url)}" for url in request.extra_index_urls]
    for pin in lock.pins:
        lines.append(requirement_line(pin) + "".join(f" \\\n    --hash={h}" for h in pin.hashes))
    return "\n".join(lines) + "\n"


def is_hashed(text: str) -> bool:
    """Whether a requirements lock written by `render` pins every file with its hash."""
    return not any(line.startswith(UNHASHED) for line in text.splitlines())


def read_stamp(text: str) -> dict[str, str]:
    found = {}
    for line in text.splitlines():
        if line.startswith(STAMP_PREFIX) and ":" in line:
            key, value = line[len(STAMP_PREFIX):].split(":", 1)
            found[key.strip()] = value.strip()
    return found
