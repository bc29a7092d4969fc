"""`envbuild verify IMAGE`: run the probe inside the image on this host's GPUs."""
from __future__ import annotations

import argparse
import json

HELP = "run the GPU probe inside an image and report pass/fail per check (JSON, JUnit)"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("image", metavar="IMAGE", help="image reference, e.g. 127.0.0.1:5000/team/train:tag")
    parser.add_argument("--gpus", default="all", metavar="all|N|IDS",
                        help="GPUs to give the container: all (default), a count, or indices/UUIDs like 0,1")
    parser.add_argument("--json", nargs="?", const="-", metavar="FILE",
                        help="print the JSON report on stdout (schema/verify.schema.json), or write it to FILE")
    parser.add_argument("--junit", metavar="FILE", help="write JUnit XML (one testcase per check) to FILE")
    parser.add_argument("--expect", metavar="SPEC", help="spec file the image should satisfy (resolved for comparison)")
    parser.add_argument("--no-perf", action="store_true", help="skip the bandwidth and GEMM measurements")
    parser.add_argument("--timeout", type=int, default=900, help="seconds to wait for the probe (default 900)")


def run(args: argparse.Namespace) -> int:
    from envbuild import atomic
    from envbuild.verify import run_verify
    from envbuild.verify.junit import write_junit
    from envbuild.verify.summary import summary_text

    import sys

    from envbuild.progress import Progress

    report = run_verify(args.image, gpus=args.gpus, expect_spec=args.expect, timeout=args.timeout,
                        perf=not args.no_perf, progress=Progress(sys.stderr))
    data = report.to_json()
    if args.json == "-":
        print(json.dumps(data, indent=2))
    else:
        if args.json:
            atomic.write_text(args.json, json.dumps(data, indent=2) + "\n")
        print(summary_text(report))
    if args.junit:
        write_junit(args.junit, report.checks, elapsed_s=report.elapsed_s, properties=report.properties())
    return report.exit_code
