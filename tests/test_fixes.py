"""Every fix the resolver offers, applied with Spec.with_changes and resolved again, passes."""
from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from envbuild import matrix
from envbuild.core.model import FrameworkRequest, Spec
from envbuild.frameworks.build import known_pythons
from envbuild.infra.errors import UserError
from envbuild.resolver import resolve
from envbuild.resolver.context import index
from envbuild.spec import load_spec

M = matrix.load()
IX = index(M)
RECIPES = sorted(Path(__file__).resolve().parent.parent.joinpath("recipes").glob("*.yaml"))
DRIVERS = sorted({r.min_driver_linux for r in M.cuda_releases if r.min_driver_linux})
GPUS = sorted({g.aliases[0] if g.aliases else g.name for g in M.gpus})
CUDAS = tuple(str(minor) for minor in IX.minors)  # as a spec writes them
FRAMEWORKS = ("pytorch", "tensorflow", "jax", "rapids", "cupy")


def assert_fixes_pass(result) -> None:
    for conflict in result.conflicts:
        assert len(conflict.fixes) <= 3
        for fix in conflict.fixes:
            fixed = resolve(result.spec.with_changes(fix.changes), M)
            # no conflict: ok, or unverified where the matrices lack a fact about the moved stack
            assert fixed.usable, (conflict.message, fix, [c.message for c in fixed.conflicts], fixed.unchecked)


@pytest.mark.parametrize("path", RECIPES, ids=lambda p: p.name)
def test_recipe_fixes_pass(path):
    result = resolve(load_spec(path), M)
    assert_fixes_pass(result)


def test_the_classic_recipe_offers_fixes():
    result = resolve(load_spec(Path("recipes/pytorch-1.6-cudatoolkit-11.0.yaml")), M)
    assert result.verdict == "conflict" and result.conflicts[0].fixes


@st.composite
def stacks(draw) -> Spec:
    name = draw(st.sampled_from(FRAMEWORKS))
    versions = IX.versions[name]
    version = draw(st.one_of(st.none(), st.sampled_from(versions)))
    return Spec(
        frameworks=(FrameworkRequest(name, version),),
        cuda=draw(st.one_of(st.none(), st.sampled_from(CUDAS))),
        python=draw(st.one_of(st.none(), st.sampled_from(known_pythons()[2:]))),
        driver=draw(st.one_of(st.none(), st.sampled_from(DRIVERS))),
        gpus=tuple(draw(st.lists(st.sampled_from(GPUS), max_size=2, unique=True))),
        installer=draw(st.one_of(st.none(), st.sampled_from(("pip", "conda")))),
        platform=draw(st.sampled_from(("linux-64", "linux-64", "linux-64", "win-64", "osx-arm64"))),
    )


@pytest.mark.slow
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stacks())
def test_every_offered_fix_passes(spec):
    try:
        result = resolve(spec, M)
    except UserError:
        return
    assert (result.verdict == "conflict") == bool(result.conflicts)
    assert (result.verdict == "unverified") == (bool(result.unchecked) and not result.conflicts)
    if result.ok:
        # completion never falls back to a CPU build
        assert all(f.cuda for f in result.resolved.frameworks)
    assert_fixes_pass(result)
