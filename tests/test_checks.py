"""The checks' kinds-only summaries against the problems `check_build` writes."""
from __future__ import annotations

import pytest

from envbuild import frameworks, matrix
from envbuild.core.model import FrameworkRequest, Spec
from envbuild.resolver import checks
from envbuild.resolver.context import Index
from envbuild.resolver.request import read_request

M = matrix.load()

# GPU lists that make the per-capability shortcut matter: capabilities repeated before
# and after the first unsupported one, Kepler with Blackwell, a compute capability given
# as a number, and a model the matrix does not know (left out of the checks).
GPU_SETS = [
    ("Tesla K10",),
    ("B200",),
    ("V100", "T4", "V100", "Tesla K80", "T4", "B200", "Tesla K80"),
    ("Tesla K80", "A100", "L4", "Tesla K10", "H100", "GB200", "6.1", "RTX 5090"),
    ("Jetson Nano", "no such GPU", "GTX 1080", "5.2"),
    ("Tesla K80",),  # under the lowest GPU of JAX 0.4.4-0.4.24's era, which CUDA 11 still compiles for
    ("GTX 750 Ti", "A100"),  # 5.0: under JAX >= 0.4.25's floor
    # 8.6 and 8.9 run sm_80 code, but a local CUDA 11.0-11.7 ptxas knows neither 8.9 (nor 11.0 8.6)
    ("A10", "RTX 4090", "A10", "RTX 4090", "A100"),
]


def _summary_of(problems: list[checks.Problem]) -> tuple[frozenset[str], frozenset[str], bool]:
    return (frozenset(p.kind for p in problems if not p.soft), frozenset(p.kind for p in problems if p.soft),
            any(p.kind == "framework_cuda_mismatch" and not p.message for p in problems))


@pytest.mark.parametrize("name", frameworks.names())
@pytest.mark.parametrize("driver,cuda", [("580.65.06", None), ("470.57.02", "11.4"), ("450.80.02", "11.0")])
def test_summaries_have_the_kinds_check_build_writes(name, driver, cuda):
    ix = Index(M)  # a fresh index
    for gpus in GPU_SETS:
        spec = Spec(frameworks=(FrameworkRequest(name, None),), gpus=gpus, driver=driver, cuda=cuda)
        req = read_request(spec, ix)
        pin = req.cuda
        builds = ix.builds[name]
        found = checks.summaries_of(builds, req, ix, pin)  # before any problem is written
        written = [_summary_of(checks.check_build(b, req, ix, pin)) for b in builds]
        assert found == written, gpus
        table = checks.summaries(req, ix, pin)
        for b, summary in zip(builds, written):
            assert table[b] == summary, (b.label, gpus)
