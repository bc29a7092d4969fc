"""What a release's wheel files say: the Pythons and platforms it can be installed on, and
the requirements its core metadata lists (a framework plugin reads its own fields from them).

Pure functions over an index's file list and core metadata (see `envbuild.infra.pypi`); the
rows they make are written to `matrices/wheels.yaml` by `envbuild matrix refresh`.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import InvalidSdistFilename, InvalidWheelFilename, parse_sdist_filename, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from envbuild.core.model import PLATFORMS  # envbuild's platform names, in the order rows list them


@dataclass(frozen=True)
class IndexFields:
    """What a release's core metadata adds to its `matrices/wheels.yaml` row."""

    fields: dict[str, Any] = field(default_factory=dict)  # further keys of the row (`cuda`, `pins`, `inferred`)
    notes: tuple[str, ...] = ()  # what could not be read, for the refresh report
    pinned: dict[str, set[str]] = field(default_factory=dict)  # project -> releases it pins: recorded too


def tag_platforms(tag: str) -> tuple[str, ...]:
    """Wheel platform tag -> envbuild platforms (musllinux and 32-bit tags count for none:
    envbuild targets glibc Linux, 64-bit Windows and macOS)."""
    if tag == "any":
        return PLATFORMS
    if tag.startswith(("manylinux", "linux_")):
        if tag.endswith("x86_64"):
            return ("linux-64",)
        if tag.endswith("aarch64"):
            return ("linux-aarch64",)
        return ()
    if tag == "win_amd64":
        return ("win-64",)
    if tag.startswith("macosx_"):
        arch = tag.split("_", 3)[-1]
        return {"x86_64": ("osx-64",), "intel": ("osx-64",), "universal": ("osx-64",), "arm64": ("osx-arm64",),
                "universal2": ("osx-64", "osx-arm64")}.get(arch, ())
    return ()


def tag_pythons(interpreter: str, abi: str, requires_python: str | None, universe: tuple[str, ...]) -> tuple[str, ...]:
    """Wheel interpreter/ABI tags -> CPython feature releases ("3.11") it installs on.
    Free-threaded builds (cp313t) are left out: a plain `python: 3.13` is the GIL build."""
    try:
        allowed = SpecifierSet(requires_python or "")
    except ValueError:
        allowed = SpecifierSet()

    def ok(py: str) -> bool:
        return allowed.contains(py + ".0", prereleases=True) or allowed.contains(py + ".99", prereleases=True)

    m = re.fullmatch(r"cp(\d)(\d+)", interpreter)
    if m:
        py = f"{m.group(1)}.{m.group(2)}"
        if abi == "abi3":
            return tuple(p for p in universe if Version(p) >= Version(py) and p[0] == py[0] and ok(p))
        if abi.endswith("t"):
            return ()
        return (py,)
    m = re.fullmatch(r"py(\d)(\d*)", interpreter)
    if m and abi == "none":
        low = Version(f"{m.group(1)}.{m.group(2) or 0}")
        return tuple(p for p in universe if p[0] == m.group(1) and Version(p) >= low and ok(p))
    return ()


def by_version(files: list[dict]) -> dict[Version, list[tuple[dict, frozenset | None]]]:
    """Non-yanked files grouped by release: (file, wheel tags), tags None for an sdist."""
    out: dict[Version, list] = {}
    for f in files:
        if f.get("yanked"):
            continue
        try:
            _name, v, _build, tags = parse_wheel_filename(f["filename"])
        except (InvalidWheelFilename, InvalidVersion):
            v, tags = _sdist_version(f["filename"]), None
            if v is None:
                continue
        out.setdefault(v, []).append((f, tags))
    return out


def summarize(grouped: dict[Version, list], version: str, universe: tuple[str, ...], *,
              pure: bool = False) -> dict[str, tuple[str, ...]]:
    """platform -> Pythons that have a (non-yanked) wheel of `version` (files from
    `by_version`); {"any": Pythons} when every wheel is pure Python. With `pure`, a release
    published only as an sdist (early `jax`) counts as a pure wheel for its Requires-Python."""
    found: dict[str, set[str]] = {}
    for f, tags in grouped.get(Version(version), ()):
        if tags is None:
            if pure:
                found.setdefault("any", set()).update(tag_pythons("py3", "none", f.get("requires-python"), universe))
            continue
        for tag in tags:
            pythons = tag_pythons(tag.interpreter, tag.abi, f.get("requires-python"), universe)
            for plat in ("any",) if tag.platform == "any" else tag_platforms(tag.platform):
                found.setdefault(plat, set()).update(pythons)
    if "any" in found and len(found) > 1:  # a pure wheel next to binary ones: it serves every platform
        pure_pys = found.pop("any")
        for plat in PLATFORMS:
            found.setdefault(plat, set()).update(pure_pys)
    return {p: tuple(sorted(found[p], key=Version)) for p in ("any", *PLATFORMS) if found.get(p)}


def pythons_on(wheels, platform: str) -> frozenset[str] | None:
    """Pythons with a wheel for `platform` from a row's `wheels` pairs; None = no wheel there."""
    found = dict(wheels)
    text = found.get(platform, found.get("any"))
    return frozenset(text.split()) if text else None


def _sdist_version(filename: str) -> Version | None:
    try:
        return parse_sdist_filename(filename)[1]
    except (InvalidSdistFilename, InvalidVersion):
        return None


def released_versions(grouped: dict[Version, list]) -> list[Version]:
    """Every final release with at least one non-yanked wheel (files from `by_version`)."""
    return sorted(v for v, items in grouped.items()
                  if not (v.is_prerelease or v.is_devrelease) and any(tags is not None for _f, tags in items))


# --- core metadata -------------------------------------------------------------------------
def requires_dist(metadata: str) -> list:
    out = []
    for line in metadata.splitlines():
        if not line.startswith("Requires-Dist:"):
            continue
        try:
            out.append(Requirement(line.split(":", 1)[1].strip()))
        except InvalidRequirement:
            continue
    return out


# the environment markers of a Linux x86_64 install, for Requires-Dist
LINUX = {"sys_platform": "linux", "platform_system": "Linux", "platform_machine": "x86_64", "os_name": "posix"}


def pinned(spec: SpecifierSet) -> Version | None:
    """The one version `spec` admits: `==X` or `>=X,<=X`; None for a range."""
    eq = [s.version for s in spec if s.operator in ("==", "===") and not s.version.endswith(".*")]
    if eq:
        try:
            return Version(eq[0])
        except InvalidVersion:
            return None
    lo = {s.version for s in spec if s.operator == ">="}
    hi = {s.version for s in spec if s.operator == "<="}
    same = lo & hi
    return Version(same.pop()) if same else None
