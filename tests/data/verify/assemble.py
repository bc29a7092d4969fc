"""Writes h100_report.json: an `envbuild verify --json` report of an H100 run, assembled
here (no GPU on the machines that run the tests) with the probe's own code.

    python3 tests/data/verify/assemble.py > tests/data/verify/h100_report.json

- env.* and static.* checks: the probe run on this machine, with the CUDA variables of a
  CUDA 12.8 image;
- gpu.nvidia_smi and gpu.driver_cuda: the probe's code reading the nvidia-smi output recorded
  on an H100 80GB HBM3 with driver 580.159.04 (tests/data/nvidia_smi/h100_r580_*);
- gpu.cuda_init: written in the probe's words for one device and driver API CUDA 13.0 (this
  machine has no libcuda to call);
- perf.*: the probe's `child_perf` judging times that give published measurements of that GPU
  (reference/verify_perf.md): copy 2,540 GB/s (DCGM's dcgmproftester reference for the H100
  80GB HBM3 SKU, nvvs/diag-skus.yaml.in), FP32 GEMM 39 TFLOP/s (the same file's FP32
  reference), BF16 GEMM 794.5 TFLOP/s (stas00/ml-engineering's MAMF table, H100 SXM). No
  published TF32 measurement was found, so the TF32 GEMM is reported as not measured.
- the verdict, summary and signatures: envbuild.verify.runner.Report.
"""
from __future__ import annotations

import json
import os
import stat
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

HERE = Path(__file__).resolve().parent
SMI = HERE.parent / "nvidia_smi"
MEASURED = {"copy_gbs": 2540.0, "fp32": 39.0, "bf16": 794.5}  # see the docstring for the sources
GPU = (0, "NVIDIA H100 80GB HBM3", "9.0")


class RecordedH100:
    """A perf backend whose timings are those the published figures imply."""

    label = "torch"

    def devices(self):
        return [GPU]

    def free_bytes(self, i):
        return 80 << 30

    def measure(self, i, op):
        return op()  # each op returns its own time in seconds

    def copy_op(self, i, nbytes):
        return lambda: 2.0 * nbytes / (MEASURED["copy_gbs"] * 1e9)

    def gemm_op(self, i, n, kind):
        if kind not in MEASURED:
            return None, "not measured in this recorded run"
        return (lambda: 2.0 * n ** 3 / (MEASURED[kind] * 1e12)), "%s, random normal input" % {
            "fp32": "torch.float32", "bf16": "torch.bfloat16"}[kind]

    def release(self):
        pass


def main() -> None:
    sys.path.insert(0, str(HERE.parents[2]))
    from envbuild.verify import probe
    from envbuild.verify.runner import Report

    with tempfile.TemporaryDirectory() as tmp:
        fake = Path(tmp) / "nvidia-smi"
        fake.write_text("#!/bin/sh\ncase \"$*\" in\n  *--query-gpu*) cat '%s' ;;\n  *) cat '%s' ;;\nesac\n"
                        % (SMI / "h100_r580_query.csv", SMI / "h100_r580_plain.txt"))
        fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
        os.environ["PATH"] = f"{tmp}:{os.environ['PATH']}"
        os.environ.update(CUDA_VERSION="12.8.1", NVIDIA_REQUIRE_CUDA="cuda>=12.8",
                          NVIDIA_VISIBLE_DEVICES="all", NVIDIA_DRIVER_CAPABILITIES="compute,utility")
        args = SimpleNamespace(static=False, no_perf=True, serial=True, timeout=120, expect=None, expect_sm=None,
                               expect_cuda=None, expect_frameworks=None, facts=None, labels=None)
        report = probe.run_probe(args)
    checks = [c for c in report["checks"] if c["name"] != "gpu.cuda_init"]
    at = next(i for i, c in enumerate(checks) if c["name"] == "gpu.nvidia_smi") + 1
    checks.insert(at, probe.check("gpu.cuda_init", "pass", "cuInit ok: 1 device(s), driver API CUDA 13.0",
                                  data={"ok": True, "code": 0, "driver_cuda": "13.0", "error": None, "devices": 1}))
    probe._PERF_WARM[:] = [(RecordedH100(), [])]
    checks += probe.child_perf({"gpu_present": True, "facts": probe.bundled_facts()})
    for c in checks:
        if c["name"] == "static.python":  # this machine's interpreter, not the image's
            c["details"] = "Python 3.12.3 at /usr/bin/python3"
    report.update(checks=checks, host="gpu-node-01", python="3.12.3", elapsed_s=41.7)
    out = Report(image="127.0.0.1:5555/team/train:h100", probe=report, gpu_request="all", elapsed_s=44.2).to_json()
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
