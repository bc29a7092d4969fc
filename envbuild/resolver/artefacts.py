"""Which Pythons and platforms a build can really be installed on: the wheel files, on the
package index, of the artefacts its pip requirement installs (`matrices/wheels.yaml`).

A build maps to the distributions pip will fetch for it: `torch`, `tensorflow` (or
`tensorflow-gpu` before 2.1), `jax` with the `jaxlib` / `jax-cudaNN-plugin` /
`jax-cudaNN-pjrt` releases its CUDA extra pins, a CuPy wheel name (any release of the
series, since pip picks the newest one with a wheel), or RAPIDS' `cudf-cuNN` and
`cuml-cuNN`. A Python has an artefact when every one of those distributions has a wheel
for it on the platform. Conda builds and releases the file does not list have no entry
(None): the matrix's own Python range applies to them.
"""
from __future__ import annotations

from dataclasses import dataclass

from packaging.version import InvalidVersion, Version

from envbuild import frameworks
from envbuild.core.model import Fact
from envbuild.core.versions import ordered_versions
from envbuild.matrix import tables as t
from envbuild.matrix.wheels import PLATFORMS, pythons_on


@dataclass(frozen=True)
class Wheels:
    """The wheels a release really publishes, per platform and Python (read from the index)."""

    label: str  # what was read: "cupy-cuda12x 13.0.0..13.6.0" / "jax 0.4.38 + jaxlib 0.4.38 + ..."
    by_platform: dict  # platform -> frozenset of Pythons; a platform missing = no wheel there
    rows: tuple[t.WheelRelease, ...]
    inferred: bool  # the index's files stand for another build of the release (torch +cuXYZ)

    def pythons(self, platform: str) -> frozenset[str] | None:
        return self.by_platform.get(platform)

    def facts(self, platform: str) -> tuple[Fact, ...]:
        out = []
        for r in self.rows:
            pys = pythons_on(r.wheels, platform)
            shown = " ".join(ordered_versions(pys)) if pys else "none"
            out.append(Fact(f"{r.package} {r.version} wheels on {platform}: Python {shown} (index read {r.read})",
                            r.source, inferred=self.inferred or r.inferred, secondary=r.secondary))
        return tuple(dict.fromkeys(out))[:4]


class WheelTable:
    """`matrices/wheels.yaml` by distribution, parsed once per data version."""

    def __init__(self, rows: tuple[t.WheelRelease, ...]):
        self.by_name: dict[str, list[tuple[Version, t.WheelRelease]]] = {}
        self.by_release: dict[tuple[str, Version], list[t.WheelRelease]] = {}
        for r in rows:
            try:
                v = Version(r.version)
            except InvalidVersion:
                continue
            self.by_name.setdefault(r.package, []).append((v, r))
            self.by_release.setdefault((r.package, v), []).append(r)
        self._memo: dict[tuple, Wheels | None] = {}  # a build's release, names and row -> its wheels

    def exact(self, name: str, version: str) -> list[t.WheelRelease]:
        try:
            return self.by_release.get((name, Version(version)), [])
        except InvalidVersion:
            return []

    def matching(self, name: str, admits) -> list[t.WheelRelease]:
        return [r for v, r in self.by_name.get(name, ()) if admits(v)]

    def for_build(self, b) -> Wheels | None:
        if b.installer != "pip" or not self.by_name:
            return None
        # what a plugin's wheel_groups reads: the build's release and names, and its row
        key = (b.framework, b.version, b.package, b.extras, b.cuda_major, b.pypi_default, b.row)
        if key not in self._memo:
            self._memo[key] = self._make(b)
        return self._memo[key]

    def _make(self, b) -> Wheels | None:
        groups, inferred = frameworks.get(b.framework).wheel_groups(self, b)
        groups = [g for g in groups if g]  # a distribution the file does not list is not judged
        if not groups:
            return None
        by_platform: dict[str, frozenset[str]] = {}
        for plat in PLATFORMS:
            sets = []
            for group in groups:
                found = [pythons_on(r.wheels, plat) for r in group]
                union = frozenset().union(*(f for f in found if f))
                sets.append(union if any(found) else None)
            if all(s is not None for s in sets):
                by_platform[plat] = frozenset.intersection(*sets)
        label = " + ".join(_span(g) for g in groups)
        return Wheels(label, by_platform, tuple(r for g in groups for r in g[-2:]), inferred)


def _span(rows: list[t.WheelRelease]) -> str:
    versions = [r.version for r in rows]
    return f"{rows[0].package} {versions[0]}" + (f"..{versions[-1]}" if len(versions) > 1 else "")
