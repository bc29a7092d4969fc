"""Verification stage: run the probe inside an image and judge the result.

    from envbuild import pipeline
    from envbuild.verify.runner import Expectations, run_verify
    report = run_verify("registry/team/train:abc123", gpus="all", expect=Expectations(cuda="12.4"),
                        facts=pipeline.probe_facts())
    report.ok          # every required check passed
    report.exit_code   # 0 when ok, 1 otherwise
    report.to_json()   # the probe's report plus what the runner added

`envbuild verify` and the verify gate of `envbuild image --verify` (envbuild/pipeline.py)
both call `run_verify`; they derive the Expectations from a resolved spec and read the
matrices' facts for the probe (`pipeline.probe_facts`): this package reads no table.

    runner.py     one image: a container with the host's GPUs, the probe copied in
    fleet.py      `verify --fleet`: the probe as a job on each target, through its scheduler
    summary.py, junit.py   the report for a terminal and for CI
    probe.py      the probe: a standalone script, run inside images and jobs (and as
                  `python -m envbuild.verify.probe` here)
    probe_api.py  what the rest of envbuild uses of the probe, and the only module that
                  imports it

This file imports nothing, so that `python -m envbuild.verify.probe` runs the probe once,
as the script it is, and a host module that needs the probe's names does not load the runner.
"""
