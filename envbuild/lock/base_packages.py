"""What the base image's Python already carries, so that a pip environment uses it
instead of installing it again.

A pip environment is a venv at /opt/env over the base's python3 with the system site
packages visible: whatever that Python imports stays importable, and the venv holds only
what is missing or different. The lock is still the whole closure, hash-checked, so it
installs anywhere; it is solved with constraints equal to the versions the base carries,
so it picks them where the spec allows, and the lock folder records which pins the base
provides (`base-packages.json`). The image installs only the others.

What a base carries is known, in this order, from:
- the image itself, when the local engine holds it: the distributions its python3 imports
  (`envbuild.image.facts`, run once and cached by image ID);
- the catalog, for framework images (`base_carries` in matrices/base_images.yaml): the
  framework's pip packages at the image's build, and the wheels those pin exactly (read
  from the wheels' own metadata on the index);
- nvidia/cuda images: nothing (their python3 comes from the distribution).
Otherwise everything is installed, with a note saying why.
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field, replace
from urllib.parse import unquote, urlsplit

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from envbuild import matrix
from envbuild.infra.errors import EnvironmentProblem
from envbuild.infra.pypi import SimpleIndex
from envbuild.lock import pip_lock
from envbuild.lock.pip_tags import machine_for
from envbuild.resolver.base import carries_resolved_build



@dataclass(frozen=True)
class BaseContents:
    """The Python distributions a base image carries, and where that is known from."""

    ref: str
    source: str
    packages: dict[str, str]  # canonical name -> version as the base has it
    digest: str | None = None
    exact_only: bool = False  # the catalog's record: only these packages are known, not the rest


@dataclass(frozen=True)
class Split:
    """A pip lock against a base: which pins the base provides and which the image installs."""

    base: BaseContents | None
    from_base: dict[str, str] = field(default_factory=dict)  # canonical name -> locked version
    differs: dict[str, dict] = field(default_factory=dict)  # name -> {"locked", "base", "bytes"}
    note: str | None = None

    def record(self, platform: str) -> dict:
        return {"base_image": self.base.ref if self.base else None, "digest": self.base.digest if self.base else None,
                "platform": platform, "source": self.base.source if self.base else None,
                "from_base": dict(sorted(self.from_base.items())), "differs": dict(sorted(self.differs.items())),
                "note": self.note}


# --- what the base carries ------------------------------------------------------------------

def contents(resolution, m, read_base=None) -> tuple[BaseContents | None, str | None]:
    """What the resolved base image carries, or None and why it is not known.
    `read_base(ref)` reads an image the local engine holds (`image_facts.read_local`)."""
    stack = resolution.resolved
    base = stack.base_image
    if base is None:
        return None, None
    found = read_base(base.ref) if read_base is not None else None
    if found is not None and found.distributions is not None:
        packages = {canonicalize_name(name): version for name, version in found.distributions}
        return BaseContents(base.ref, f"read from the image through the local engine ({found.digest[:19]}: its "
                                      f"python3 run once)", packages, digest=found.digest), None
    if base.family == "cuda":
        return BaseContents(base.ref, "nvidia/cuda images carry no Python packages (the Dockerfile adds the "
                                      "distribution's python3)", {}), None
    carried = _catalog_contents(resolution, m)
    if carried is not None:
        return carried, None
    why = (found.problem if found is not None and found.problem else
           "the local engine does not hold it" if read_base is not None else "the image was not read")
    return None, (f"what the base image {base.ref} carries is not known ({why}), so every locked package is "
                  f"installed; `docker pull {base.ref}` and lock again to install only what it lacks")


def _catalog_contents(resolution, m) -> BaseContents | None:
    """A framework image's record in the catalog: the framework's pip packages at the
    image's build when that build is the resolved one."""
    stack = resolution.resolved
    base = stack.base_image
    row = next((r for r in m.base_carries if r.family == base.family), None)
    if row is None:
        return None
    for framework in stack.frameworks:
        if framework.installer == "pip" and carries_resolved_build(m, base, framework, row):
            packages = {canonicalize_name(_name(text)): text.split("==", 1)[1] for text in framework.pip_requirements
                        if "==" in text}
            return BaseContents(base.ref, f"the catalog: {row.source}; with the wheels these pin exactly, read from "
                                          f"their metadata on the index (only these are known: `docker pull` the base "
                                          f"and lock again to use the rest of what it carries)", packages,
                                exact_only=True)
    return None


def _name(requirement: str) -> str:
    return re.split(r"[\s=<>!~\[;]", requirement.strip(), maxsplit=1)[0]


# --- constraints handed to the solver -----------------------------------------------------------

def constraints(base: BaseContents, requirements: tuple[str, ...]) -> tuple[tuple[str, ...], dict[str, str]]:
    """`name==version` for every distribution the base carries that the requirements allow
    (the solver then picks it where it can), and {name: requirement} for those the spec
    itself asks at another version. A base version with a local label (`2.8.0+cu128`) is
    constrained by its public version: the index may serve the same build without it."""
    asked = {}
    for text in requirements:
        try:
            requirement = Requirement(text)
        except ValueError:
            continue
        asked[canonicalize_name(requirement.name)] = requirement
    out, forced = [], {}
    for name, version in sorted(base.packages.items()):
        public = version.split("+")[0]
        wanted = asked.get(name)
        if wanted is not None and wanted.specifier and not wanted.specifier.contains(version, prereleases=True):
            forced[name] = str(wanted)
            continue
        if _is_version(public):
            out.append(f"{name}=={public}")
    return tuple(out), forced


def _is_version(text: str) -> bool:
    try:
        Version(text)
    except InvalidVersion:
        return False
    return True


# --- after the solve ------------------------------------------------------------------------

def split(base: BaseContents | None, pins, resolution, note: str | None, exact_pins=None) -> Split:
    """Which locked pins the base provides (the same version, or the resolved framework
    build the lock names in its index form) and which differ from the base's."""
    if base is None:
        return Split(None, note=note)
    builds = _resolved_builds(resolution)
    known = dict(base.packages)
    if exact_pins:
        known.update(exact_pins)
    from_base, differs = {}, {}
    for pin in pins:
        name = canonicalize_name(pin.name)
        have = known.get(name)
        if have is None:
            continue
        try:
            same = Version(have) == Version(pin.version) or builds.get(name) == have
        except InvalidVersion:
            same = have == pin.version
        if same:
            from_base[name] = pin.version
        else:
            differs[name] = {"locked": pin.version, "base": have,
                             "bytes": download_size(pin)}
    if differs:
        listed = ", ".join(f"{n} {d['locked']} (the base has {d['base']})" for n, d in sorted(differs.items()))
        total = sum(d["bytes"] or 0 for d in differs.values())
        size = f", {_size(total)} to download" if total else ""
        unknown = " (size unknown for some)" if any(d["bytes"] is None for d in differs.values()) else ""
        note = ((note + "; ") if note else "") + (f"the spec needs other versions than the base image carries, so "
                                                  f"the image installs them over the base's: {listed}{size}{unknown}")
    return Split(base, from_base, differs, note)


def _resolved_builds(resolution) -> dict[str, str]:
    """The resolved framework builds with their local labels (`torch` -> `2.8.0+cu128`):
    a base that carries one carries the build a PyPI-form pin (`torch==2.8.0`) names."""
    out = {}
    for framework in resolution.resolved.frameworks:
        for text in framework.pip_requirements:
            if "==" in text and "+" in text:
                out[canonicalize_name(_name(text))] = text.split("==", 1)[1].strip()
    return out


def _size(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n} B"


def exact_dependencies(base: BaseContents, pins, request) -> dict[str, str]:
    """For the catalog's record: what the carried framework wheels pin exactly (`==`) for the
    target, from each wheel's own metadata on the index; those wheels are in the image at
    those versions too (pip installed them with the framework)."""
    if not base.exact_only or request is None:
        return {}
    env = _marker_environment(request)
    out = {}
    for pin in pins:
        if canonicalize_name(pin.name) not in base.packages:
            continue
        text = _metadata(pin, request)
        for line in (text or "").splitlines():
            if not line.startswith("Requires-Dist:"):
                continue
            try:
                requirement = Requirement(line.split(":", 1)[1].strip())
            except ValueError:
                continue
            if requirement.marker is not None and not requirement.marker.evaluate({**env, "extra": ""}):
                continue
            clauses = list(requirement.specifier)
            if len(clauses) == 1 and clauses[0].operator == "==" and "*" not in clauses[0].version:
                out[canonicalize_name(requirement.name)] = clauses[0].version
    return out


def _marker_environment(request) -> dict[str, str]:
    return {"python_version": request.python, "python_full_version": f"{request.python}.0",
            "sys_platform": "linux", "platform_system": "Linux", "os_name": "posix",
            "platform_machine": machine_for(request.platform), "implementation_name": "cpython",
            "platform_python_implementation": "CPython"}


# --- the files of a pin ---------------------------------------------------------------------------

def _wheel(pin):
    """The largest wheel of `pin` the target can install (the lock lists only those), or None."""
    wheels = [f for f in pin.files if f.kind == "wheel"]
    return max(wheels, key=lambda f: f.size or 0) if wheels else None


def download_size(pin) -> int | None:
    """What installing `pin` downloads: its wheel's size as the index states it (a local
    file's own size), None when neither says."""
    wheel = _wheel(pin)
    if wheel is None:
        return None
    if wheel.size:
        return int(wheel.size)
    if wheel.url.startswith("file:") or wheel.url.startswith("/"):
        try:
            return os.path.getsize(unquote(urlsplit(wheel.url).path) if wheel.url.startswith("file:") else wheel.url)
        except OSError:
            return None
    return None


def _metadata(pin, request) -> str | None:
    """The core metadata of `pin`'s wheel, read from its index (PEP 658, else a few range
    requests into the wheel)."""
    wheel = _wheel(pin)
    if wheel is None or not wheel.url.startswith(("https:", "http:")):
        return None
    try:
        return SimpleIndex(request.index_url, timeout=10).metadata(
            {"url": wheel.url, "filename": wheel.url.rsplit("/", 1)[-1]})
    except EnvironmentProblem:
        return None


# --- the record in the lock folder ------------------------------------------------------------

def record_text(found: Split, platform: str) -> str:
    return json.dumps(found.record(platform), indent=2) + "\n"
# --- the lock ------------------------------------------------------------------------------------

def lock_over_base(resolution, request, *, timeout: float, allow_unhashed: bool, read_base=None, lock=None):
    """The pip lock of `request` solved with the base's versions as constraints, and its
    split: (PipLock, Split). When the spec cannot be locked at every version the base
    carries, it is locked without them and the split says what differs. `lock(request,
    explain)` makes each lock (default: uv and the hash guard of pip_lock; the lock API passes one that
    also holds the CUDA wheels to the resolved release)."""
    if lock is None:
        def lock(req, explain=True):
            pins = pip_lock.resolve_uv(req, timeout, explain=explain)
            return pip_lock.checked_lock(req, pins, allow_unhashed=allow_unhashed)

    base, note = contents(resolution, matrix.load(), read_base)
    locked = None
    if base is not None:
        wanted, _forced = constraints(base, request.requirements)
        if wanted:
            constrained = replace(request, constraints=wanted)
            try:
                pip_lock.check_indexes(constrained, timeout)
                locked = lock(constrained, False)
            except pip_lock.PipLockFailed:
                note = (f"the spec cannot be locked at every version the base image {base.ref} carries, so it was "
                        f"locked without them")
    if locked is None:
        locked = lock(request)
    exact = exact_dependencies(base, locked.pins, request) if base is not None else {}
    return locked, split(base, locked.pins, resolution, note, exact)
