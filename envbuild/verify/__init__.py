"""Verification stage: run the probe inside an image and judge the result.

    from envbuild.verify import run_verify
    report = run_verify("registry/team/train:abc123", gpus="all", expect_spec="spec.yaml")
    report.ok          # every required check passed
    report.exit_code   # 0 when ok, 1 otherwise
    report.to_json()   # the probe's report plus what the runner added

`envbuild verify` and `envbuild image --verify` both call `run_verify`.
"""
from envbuild.verify.runner import Report, run_verify

__all__ = ["Report", "run_verify"]
