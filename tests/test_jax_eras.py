"""JAX before its plugin wheels: jaxlib's own version numbers (0.1.x before 0.3.0), its
cuDNN variants and the Pythons its wheels were built for, judged by the real resolver."""
from __future__ import annotations

from envbuild import matrix
from envbuild.core.model import FrameworkRequest, Spec
from envbuild.resolver import resolve

M = matrix.load()


def _resolve(version, **fields):
    # CUDA 11.7 has an nvidia/cuda base on Ubuntu 22.04, whose python3 is 3.10
    fields = {"cuda": "11.7", "gpus": ("A100",), "installer": "pip", **fields}
    return resolve(Spec(frameworks=(FrameworkRequest("jax", version),), **fields), M)


def test_jax_03_runs_on_python_310_as_its_jaxlib_wheels_do():
    # jax 0.3.5's classifiers stop at 3.9; the jaxlib 0.3.x wheels are cp37..cp310
    result = _resolve("0.3.5", python="3.10")
    assert result.ok, [c.message for c in result.conflicts]
    assert [c.kind for c in _resolve("0.3.5", python="3.11").conflicts] == ["python_unsupported"]


def test_jaxlib_01_pythons_follow_its_changelog():
    # no row for jaxlib 0.1.75 (a warning says so), but no conflict: 0.1.75 added Python 3.10
    assert not _resolve("0.1.75+cuda11.cudnn82", python="3.10").conflicts
    older = _resolve("0.1.74+cuda11.cudnn82", python="3.10")
    assert [c.kind for c in older.conflicts] == ["python_unsupported"]
    assert "Python 3.7-3.9" in older.conflicts[0].message


def test_jaxlib_cudnn_variants():
    # +cudnn82 needs cuDNN >= 8.2; the cudnn805 wheel of the same release loads cuDNN 8.0.5
    assert [c.kind for c in _resolve("0.1.75+cuda11.cudnn82", cudnn="8.0.5").conflicts] == ["cudnn_mismatch"]
    assert not _resolve("0.1.75+cuda11.cudnn805", cudnn="8.0.5").conflicts
    # 0.1.72's single cuda11 wheel needs cuDNN 8 (its CUDA 10 wheels, with cuDNN 7, were dropped)
    assert [c.kind for c in _resolve("0.1.72+cuda11", cudnn="7.6").conflicts] == ["cudnn_mismatch"]
