"""Does a build's pip requirement lock? The lock proof's rows (matrices/lockable.yaml).

`envbuild matrix refresh --lock-proof` locks the GPU install requirement of the pip builds
(at least the newest release of each series) with uv against the real index, for each
platform and Python the wheel table gives them. A Python a build does not lock for is not
chosen when completing open fields (`Build.pythons_on` leaves it out), and a request that
pins it, or a build that locks for no Python, is a `not_lockable` conflict naming the
releases that do lock. A build the proof did not reach (an index it could not read) has
no rows: nothing is said about it.
"""
from __future__ import annotations

from envbuild import frameworks
from envbuild.core.versions import parse_version, pypi_form


def requirement(b) -> tuple[str, str | None]:
    """(what `envbuild lock` asks uv for build `b`, the build's own index next to PyPI).
    Where PyPI's untagged wheel is the build (`pypi_default`), PyPI alone serves it."""
    pins = frameworks.get(b.framework).pins(b)
    if b.pypi_default:
        return " ".join(pypi_form(r) for r in pins.pip), None
    return " ".join(pins.pip), pins.index_url


def by_requirement(rows) -> dict[tuple[str, str, str | None], tuple]:
    """(framework, requirement, index) -> the proof rows."""
    out: dict = {}
    for r in rows:
        out.setdefault((r.framework, r.requirement, r.index), []).append(r)
    return {k: tuple(v) for k, v in out.items()}


def refused(rows) -> dict[str, frozenset[str]]:
    """platform -> the Pythons the rows say do not lock."""
    out: dict[str, set[str]] = {}
    for r in rows:
        if not r.lockable:
            out.setdefault(r.platform, set()).update(r.pythons.split())
    return {k: frozenset(v) for k, v in out.items()}


def locking_releases(m, framework: str, platform: str, near: str, count: int = 4) -> list[str]:
    """The releases of `framework` whose requirement locks on `platform` for some Python,
    nearest to `near` first (newer before older at the same distance)."""
    versions = {r.version for r in m.lock_proofs if r.framework == framework and r.platform == platform and r.lockable}
    here = parse_version(near)
    newer = sorted((v for v in versions if parse_version(v) > here), key=parse_version)
    older = sorted((v for v in versions if parse_version(v) < here), key=parse_version, reverse=True)
    ordered = [v for pair in zip(newer, older) for v in pair] + newer[len(older):] + older[len(newer):]
    return ordered[:count]
