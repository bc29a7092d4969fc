"""complete.py: with one framework, the newest viable builds choose what all viable builds choose.

`evaluate` keeps, for a request of one framework whose builds are sorted newest first,
only the viable builds up to the first (release, CUDA) with a wanted Python, and checks
no link of the rest. These tests hold that shortcut to the long way, `checks.viable_of`
over every candidate, on the bundled matrices: same choice, and a prefix of the same list.
"""
from __future__ import annotations

import dataclasses
import itertools

import pytest

from envbuild import matrix
from envbuild.core.model import FrameworkRequest, Spec
from envbuild.resolver import checks, context
from envbuild.resolver.complete import _combine, _on_platform, _selected, evaluate
from envbuild.resolver.request import read_request

M = matrix.load()
FRAMEWORKS = ("pytorch", "tensorflow", "jax", "cupy", "rapids")
GPUS = ("Tesla K80", "V100", "T4", "A100", "RTX 3090", "L4", "H100", "B200", "RTX 5090", "Jetson AGX Orin")
HOSTS = (("470.239.06", None, None), ("535.104.05", "3.10", None), ("580.65.06", None, "conda"),
         ("550.54.15", "3.12", "pip"), (None, "3.8", None))


def _long_way(req, ix):
    """The outcome of the request's one framework with every viable build, as before the shortcut."""
    (name, constraint, local), = req.frameworks
    pin = local or req.cuda
    candidates, _stand_in = _selected(name, constraint, pin, ix)
    if req.installer:
        candidates = [b for b in candidates if b.installer == req.installer]
    return checks.viable_of(_on_platform(candidates, req.platform, ix), req, ix, pin)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_the_newest_viable_builds_choose_what_all_viable_builds_choose(framework):
    ix = context.index(M)
    checked = 0
    for gpu, (driver, python, installer), platform in itertools.product(GPUS, HOSTS, ("linux-64", "linux-aarch64")):
        spec = Spec(frameworks=(FrameworkRequest(framework, "*"),), gpus=(gpu,), driver=driver, python=python,
                    installer=installer, platform=platform)
        req = read_request(spec, ix)
        (name, constraint, local), = req.frameworks
        short = evaluate(name, constraint, local, req, ix)
        full = _long_way(req, ix)
        if not full:
            assert not short.viable
            continue
        assert short.viable == full[:len(short.viable)]  # a prefix, in order
        whole = dataclasses.replace(short, viable=full)
        assert _combine([short], req) == _combine([whole], req), (gpu, driver, python, installer, platform)
        checked += 1
    assert checked >= 10  # the matrices give every framework requests that some build serves


def test_the_shortcut_checks_fewer_builds():
    """An A100 on a current driver: the newest PyTorch release's builds decide, and the
    hundreds of older builds are not checked."""
    ix = context.index(M)
    spec = Spec(frameworks=(FrameworkRequest("pytorch", "*"),), gpus=("A100",), driver="580.65.06")
    req = read_request(spec, ix)
    (name, constraint, local), = req.frameworks
    short = evaluate(name, constraint, local, req, ix)
    assert short.viable and len(short.viable) < 10
    assert len({b.version for b in short.viable}) == 1
    full = _long_way(req, ix)
    assert len(full) > 10 * len(short.viable)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_the_nearest_build_is_the_one_every_build_s_summary_names(framework):
    """When no build passes, `checks.nearest` skips the host links of builds its GPU kinds
    rule out; the build it names is the first of the fewest hard kinds over all summaries."""
    ix = context.index(M)
    checked = 0
    gpus = GPUS + ("Tesla K10", "Tegra K1", "GTX 750 Ti")
    for gpu, (driver, python, installer), platform in itertools.product(gpus, HOSTS, ("linux-64", "win-64")):
        spec = Spec(frameworks=(FrameworkRequest(framework, "*"),), gpus=(gpu, "H100"), driver=driver, python=python,
                    installer=installer, platform=platform)
        req = read_request(spec, ix)
        (name, constraint, local), = req.frameworks
        pin = local or req.cuda
        candidates, _stand_in = _selected(name, constraint, pin, ix)
        if req.installer:
            candidates = [b for b in candidates if b.installer == req.installer]
        candidates = _on_platform(candidates, req.platform, ix)
        if not candidates or checks.viable_of(candidates, req, ix, pin):
            continue
        judged = checks.summaries_of(candidates, req, ix, pin)
        expected = min(((off, len(hard), rank), b) for rank, (b, (hard, _soft, off)) in enumerate(zip(candidates, judged)))[1]
        assert checks.nearest(candidates, req, ix, pin) is expected, (gpu, driver, python, installer, platform)
        assert evaluate(name, constraint, local, req, ix).nearest is expected
        checked += 1
    assert checked >= 10
