"""Frameworks that JIT-compile with the ptxas of a locally installed CUDA toolkit: that
ptxas must know the GPU's exact architecture, which binary compatibility does not give
(an sm_86 binary runs on an sm_89 GPU, but CUDA 11.7's ptxas cannot compile for sm_89).
The facts: `local_ptxas` family rules, and the toolkits' architectures in cuda_arch.yaml."""
from __future__ import annotations

import dataclasses

from envbuild import matrix
from envbuild.core.model import FrameworkRequest, Spec
from envbuild.resolver import resolve

M = matrix.load()
# jax 0.3.25 is an sdist only on PyPI, so the lock proof found it does not lock (a not_lockable
# conflict of its own); these tests judge the ptxas link alone, on the matrices without the proof
UNPROVEN = dataclasses.replace(M, lock_proofs=())


def _resolve(frameworks, m=M, **fields):
    spec = Spec(frameworks=tuple(FrameworkRequest(n, c) for n, c in frameworks.items()), **fields)
    return resolve(spec, m)


def test_jax_with_a_local_cuda_113_cannot_compile_for_ada():
    # jax 0.3.25's cuda11 wheel loads the system CUDA: its 11.3 ptxas knows sm_86 but not sm_89
    result = _resolve({"jax": "0.3.25"}, UNPROVEN, cuda="11.3", gpus=("RTX 4090",), driver="525.60.13", installer="pip")
    assert [c.kind for c in result.conflicts] == ["gpu_arch_unsupported"]
    conflict = result.conflicts[0]
    assert "ptxas of the local CUDA 11.3" in conflict.message and "sm_89" in conflict.message
    # the facts behind it: CUDA 11.3's architectures (CMake's list) and the family rule with its threads
    sources = " ".join(f.source for f in conflict.facts)
    assert "CMakeCUDAArchitecturesAll" in sources and "jax-ml/jax/issues/13570" in sources
    # binary compatibility alone would have passed it: the build carries sm_80-compatible code
    assert any(f.changes.get("cuda") == "11.8" for f in conflict.fixes)


def test_the_same_build_with_cuda_118_passes_and_completion_chooses_it():
    assert _resolve({"jax": "0.3.25"}, UNPROVEN, cuda="11.8", gpus=("RTX 4090",), driver="525.60.13",
                    installer="pip").ok
    # no CUDA pinned: completion picks a CUDA whose ptxas knows sm_89 (and sm_90 for the H100)
    open_cuda = _resolve({"jax": "0.3.25"}, UNPROVEN, gpus=("RTX 4090", "H100"), driver="525.60.13", installer="pip")
    assert open_cuda.ok and open_cuda.resolved.cuda == "11.8"
    # with the proof, the pin is refused as not_lockable, not for its ptxas
    proven = _resolve({"jax": "0.3.25"}, cuda="11.8", gpus=("RTX 4090",), driver="525.60.13", installer="pip")
    assert [c.kind for c in proven.conflicts] == ["not_lockable"]


def test_cuda_wheels_bring_their_own_ptxas():
    # jax 0.4.20[cuda12] installs nvidia-cuda-nvcc-cu12: no local toolkit is used, so no such check
    result = _resolve({"jax": "0.4.20"}, cuda="12.2", gpus=("RTX 4090",), driver="535.54.03", installer="pip")
    assert result.ok
    assert not any("ptxas" in w.message for w in result.warnings)


def test_a_jaxlib_without_rows_is_judged_by_its_labels_cuda():
    # jaxlib 0.1.64+cuda110 (no row): CUDA 11.0's ptxas does not know sm_86 (jax-ml/jax#6046)
    result = _resolve({"jax": "0.1.64+cuda110"}, gpus=("RTX 3090",), installer="pip")
    assert "gpu_arch_unsupported" in [c.kind for c in result.conflicts]
    assert any("ptxas of the local CUDA 11.0" in c.message for c in result.conflicts)


def test_tensorflow_xla_falls_back_to_the_driver_jit_with_a_warning():
    # TF 2.11 loads the system CUDA (2.11's tested 11.2 has no sm_89): XLA falls back to the driver
    result = _resolve({"tensorflow": "2.11.0"}, gpus=("RTX 4090",), driver="525.60.13", python="3.10",
                      installer="pip")
    assert result.ok
    assert [w.kind for w in result.warnings if "ptxas" in w.message] == ["ptx_jit"]
    # from 2.14 `tensorflow[and-cuda]` brings the nvcc wheel, so its own ptxas (2.16.1: 2.15's does not lock)
    newer = _resolve({"tensorflow": "2.16.1"}, gpus=("RTX 4090",), driver="535.54.03", python="3.10",
                     installer="pip")
    assert newer.ok and not any("ptxas" in w.message for w in newer.warnings)


def test_a_tf_nightly_is_judged_by_its_series():
    # tf-nightly 2.16.0.devYYYYMMDD is a nightly of the 2.16 series: its tested configuration decides
    from envbuild.spec import spec_from_text

    spec = spec_from_text("frameworks: {tf-nightly: '2.16.0.dev20231201'}\n"
                          "target: {gpus: [A100], driver: '550.54.15'}\ninstaller: pip\n")
    assert [f.name for f in spec.frameworks] == ["tensorflow"]
    result = resolve(spec, M)
    assert not result.conflicts and result.verdict == "unverified"  # a nightly has no row of its own
    assert result.resolved.frameworks[0].cuda == "12.3"  # the 2.16 series' tested CUDA
    assert any("judged it by the tensorflow 2.16" in u.message for u in result.unchecked)
