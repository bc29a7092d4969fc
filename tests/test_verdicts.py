"""A build's verdict (what the choice among builds reads) is the kinds of the problems
`check_build` reports for it, although the verdict judges the first GPU of each compute
capability only and shares the GPU links' answer among builds of one `gpu.signature`."""
from __future__ import annotations

import pytest

from envbuild import frameworks, matrix
from envbuild.core.model import FrameworkRequest, Spec
from envbuild.resolver import checks
from envbuild.resolver.context import Index
from envbuild.resolver.request import read_request

M = matrix.load()

# Capabilities repeated before and after the first unsupported one, Kepler with Blackwell,
# a capability given as a number, a model the matrix does not know, GPUs under an era's
# floor, and GPUs a local CUDA 11.0-11.7 ptxas does not know.
GPU_SETS = [
    ("V100", "T4", "V100", "Tesla K80", "T4", "B200", "Tesla K80"),
    ("Tesla K80", "A100", "L4", "Tesla K10", "H100", "GB200", "6.1", "RTX 5090"),
    ("Jetson Nano", "no such GPU", "GTX 1080", "5.2"),
    ("GTX 750 Ti", "A100"),
    ("A10", "RTX 4090", "A10", "RTX 4090", "A100"),
]


@pytest.mark.parametrize("name", frameworks.names())
@pytest.mark.parametrize("driver,cuda,python", [("580.65.06", None, None), ("470.57.02", "11.4", "3.8"),
                                                ("450.80.02", "11.0", "3.12")])
def test_a_build_s_verdict_is_the_kinds_of_its_reported_problems(name, driver, cuda, python):
    ix = Index(M)  # a fresh index: the verdicts are worked out before any problem is written
    kinds = set()
    for gpus in GPU_SETS:
        spec = Spec(frameworks=(FrameworkRequest(name, None),), gpus=gpus, driver=driver, cuda=cuda, python=python)
        req = read_request(spec, ix)
        builds = ix.builds[name]
        verdicts = [checks.verdict(b, req, ix, req.cuda) for b in builds]
        for b, verdict in zip(builds, verdicts):
            assert verdict == checks.Verdict.of(checks.check_build(b, req, ix, req.cuda)), (b.label, gpus)
            kinds |= verdict.hard | verdict.soft
    assert kinds  # the requests meet problems, so the comparison holds something
