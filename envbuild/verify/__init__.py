"""Verification stage: run the probe inside an image and judge the result.

    from envbuild import pipeline
    from envbuild.verify import Expectations, run_verify
    report = run_verify("registry/team/train:abc123", gpus="all", expect=Expectations(cuda="12.4"),
                        facts=pipeline.probe_facts())
    report.ok          # every required check passed
    report.exit_code   # 0 when ok, 1 otherwise
    report.to_json()   # the probe's report plus what the runner added

`envbuild verify` and the verify gate of `envbuild image --verify` (envbuild/pipeline.py)
both call `run_verify`; they derive the Expectations from a resolved spec and read the
matrices' facts for the probe (`pipeline.probe_facts`): this package reads no table.
"""
from envbuild.verify.runner import ExpectedFramework, Expectations, ProbeFacts, Report, run_verify

__all__ = ["ExpectedFramework", "Expectations", "ProbeFacts", "Report", "run_verify"]
