"""The Python links: is the build published for the Python asked for, and does its pip
requirement lock there (the lock proof of matrices/lockable.yaml)?"""
from __future__ import annotations

from envbuild.core.values import ConflictKind
from envbuild.core.versions import ordered_versions
from envbuild.frameworks.build import Build
from envbuild.resolver.context import Index, fact
from envbuild.resolver.lockable import locking_releases
from envbuild.resolver.problem import Hints, Problem, unknown
from envbuild.resolver.request import Request


def python(b: Build, req: Request) -> list[Problem]:
    if req.python is None:
        return []
    pythons = b.pythons_on(req.platform)
    if pythons is None:
        return [unknown(f"the matrix has no Python range for {b.label}", ("python",), framework=b.framework)]
    if req.python in pythons:
        return []
    # named: the Pythons published there (those the lock proof found to fail too, when no other is left)
    pythons = pythons or b.published_pythons(req.platform)
    if b.wheels is not None and b.wheels.pythons(req.platform):
        # the artefacts decide: name the newest Python that has a wheel
        newest = ordered_versions(pythons)[-1]
        return [Problem(ConflictKind.PYTHON_UNSUPPORTED,
                        f"{b.framework} {b.version} has {req.platform} wheels ({b.wheels.label}) for Python "
                        f"{py_range(pythons)}, the newest {newest}; you asked for Python {req.python}, so Python "
                        f"or the {b.framework} version must move",
                        b.wheels.facts(req.platform), framework=b.framework, hints=Hints(pythons=pythons))]
    return [Problem(ConflictKind.PYTHON_UNSUPPORTED,
                    f"{b.framework} {b.version} is published for Python {py_range(pythons)}; you asked for "
                    f"Python {req.python}, so Python or the {b.framework} version must move",
                    (fact(f"{b.framework} {b.version}: python {b.python_text}", b.row),), framework=b.framework,
                    hints=Hints(pythons=pythons))]


def lock_proof(b: Build, req: Request, ix: Index) -> list[Problem]:
    """The lock proof found that the build's pip requirement does not lock on the platform:
    for any Python, or for the one the request pins (matrices/lockable.yaml)."""
    refused = b.unlockable.get(req.platform)
    if not refused:
        return []
    if req.python is not None and req.python not in refused:
        return []
    remaining = b.pythons_on(req.platform)
    if req.python is None and remaining:
        return []  # completion chooses among the Pythons not found to fail
    rows = [r for r in b.lock_proof if r.platform == req.platform and not r.lockable]
    row = next(r for r in rows if req.python is None or req.python in r.pythons.split())
    locks = frozenset(remaining or ())
    what = f"Python {req.python}" if req.python else f"Python {py_range(refused)}"
    others = [v for v in locking_releases(ix.m, b.framework, req.platform, b.version) if v != b.version]
    moves = f"Python ({py_range(locks)} has wheels and is not found to fail) or " if locks else ""
    return [Problem(ConflictKind.NOT_LOCKABLE,
                    f"{row.requirement} does not lock on {req.platform} for {what}: {row.why}; so {moves}the "
                    f"{b.framework} version must move" + (f" ({b.framework} {', '.join(others)} lock there)" if others else ""),
                    (fact(f"lock proof {row.read}: {row.requirement} on {row.platform}, Python {row.pythons}: does not lock",
                          row),), framework=b.framework, hints=Hints(pythons=locks))]


def py_range(pythons: frozenset[str]) -> str:
    ordered = ordered_versions(pythons)
    return ordered[0] if len(ordered) == 1 else f"{ordered[0]}-{ordered[-1]}"
