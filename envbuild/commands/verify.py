"""`envbuild verify IMAGE`: run the probe inside the image on this host's GPUs."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from envbuild import html, pipeline
from envbuild.commands._spec import load_spec
from envbuild.core import fields
from envbuild.core.model import to_jsonable
from envbuild.fleet import load_fleet, manifest
from envbuild.fleet.judge import image_spec, judge
from envbuild.fleet.manifest import images_for
from envbuild.html import verify_page
from envbuild.image.facts import read
from envbuild.infra import atomic
from envbuild.infra.errors import Unresolved, UserError
from envbuild.output import say
from envbuild.output.progress import Progress
from envbuild.verify import fleet as fleet_report, junit, summary
from envbuild.verify.runner import run_verify


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("image", metavar="IMAGE", nargs="?",
                        help="image reference, e.g. 127.0.0.1:5555/team/train:tag (or --manifest: each target's own)")
    parser.add_argument("--gpus", default="all", metavar="all|N|IDS",
                        help="GPUs to give the container: all (default), a count, or indices/UUIDs like 0,1")
    parser.add_argument("--json", nargs="?", const="-", metavar="FILE",
                        help="print the JSON report on stdout (schema/verify.schema.json), or write it to FILE")
    parser.add_argument("--junit", metavar="FILE", help="write JUnit XML (one testcase per check) to FILE")
    parser.add_argument("--html", metavar="FILE", help="write a self-contained HTML page: each check, and the measured "
                        "bandwidth and TFLOP/s against the GPU's peak (per target with --fleet)")
    parser.add_argument("--expect", metavar="SPEC", help="spec file the image should satisfy (resolved for comparison)")
    parser.add_argument("--no-perf", action="store_true", help="skip the bandwidth and GEMM measurements")
    parser.add_argument("--timeout", type=int, default=900, help="seconds to wait for the probe (default 900)")
    parser.add_argument("--static", action="store_true",
                        help="only the probe's checks that need no GPU (the library builds, their CUDA variant and "
                             "architectures, the image's CUDA): for a host or a node without one")
    fleet = parser.add_argument_group("fleet (run the probe on every target through its scheduler; docs/fleets.md)")
    fleet.add_argument("--fleet", metavar="FLEET.yaml", help="submit the probe to every target of this fleet file")
    fleet.add_argument("--target", action="append", default=[], metavar="NAME", help="only these targets (repeatable)")
    fleet.add_argument("--workdir", default="envbuild-verify", metavar="DIR",
                       help="where job scripts and outputs go; on a cluster, a folder the nodes share (default ./envbuild-verify)")
    fleet.add_argument("--kube-context", metavar="NAME", help="submit k8s targets with this kubeconfig context (default: the current one)")
    fleet.add_argument("--manifest", metavar="FILE",
                       help="each target runs its own image, as `envbuild image --fleet` wrote them in FILE "
                            "(fleet-images.json); without --fleet, the one --target's image is verified on this host")
    fleet.add_argument("--force", action="store_true",
                       help="run the probe on targets where the stack (--expect SPEC, else the image's labels) does not resolve")
    fleet.add_argument("--strict", action="store_true",
                       help="also leave out targets where a link of the stack could not be checked")


def run(args: argparse.Namespace) -> int:
    if args.html:
        html.check_target(args.html, inputs=(args.fleet, args.expect, args.manifest), others=(args.json, args.junit))
    if args.manifest and args.image:
        raise UserError("give IMAGE or --manifest, not both", where="--manifest",
                        hint="the manifest names each target's image")
    if args.fleet or (args.target and not args.manifest):
        return _run_fleet(args)
    if args.manifest:
        args.image = _image_from_manifest(args)
    if not args.image:
        raise UserError("no image to verify", where="verify", hint="name the IMAGE, or --manifest FILE --target NAME")

    report = run_verify(args.image, gpus=args.gpus, expect=_expected(args.expect) if args.expect else None,
                        facts=pipeline.probe_facts(), timeout=args.timeout, perf=not args.no_perf,
                        progress=Progress(sys.stderr), static=args.static)
    data = report.to_json()
    _answer(args, data, lambda: summary.summary_text(report))
    if args.junit:
        junit.write_junit(args.junit, report.checks, elapsed_s=report.elapsed_s, properties=report.properties())
    if args.html:
        html.write(args.html, verify_page.render(data))
    return report.exit_code


def _expected(path: str):
    """--expect SPEC: resolve the spec, and expect what it resolved to."""
    spec = load_spec(path, for_image=True)  # the stack as the image built from it has it
    try:
        resolution = pipeline.resolve(spec)
    except Unresolved as exc:
        raise UserError(f"the expected spec does not resolve: {exc.first}", where=path,
                        hint="run `envbuild resolve` on it and apply a fix") from None
    return pipeline.expectations(resolution)


def _run_fleet(args: argparse.Namespace) -> int:
    if not args.fleet:
        raise UserError("--target needs --fleet", where="--target", hint="pass --fleet FLEET.yaml")
    fleet = load_fleet(args.fleet)
    targets = fleet.select(args.target)
    if args.manifest:  # each target's own image, checked against the fleet as it is now
        images = {name: e.image for name, e in images_for(args.manifest, targets, fleet.targets).items()}
    elif args.image:
        images = fields.image_ref(args.image, "IMAGE")  # it reaches every target's job definition
    else:
        raise UserError("no image to verify", where="--fleet", hint="name the IMAGE, or --manifest fleet-images.json")
    skipped, verdicts, unchecked = _judge_targets(args, targets, images)
    report = fleet_report.verify_fleet(images, targets, Path(args.workdir), static=args.static, timeout=args.timeout,
                                       kube_context=args.kube_context, skipped=skipped, verdicts=verdicts,
                                       unchecked=unchecked)
    if args.manifest:
        report["manifest"] = args.manifest
    _answer(args, report, lambda: fleet_report.summary_text(report))
    if args.junit:
        fleet_report.write_junit(args.junit, report)
    if args.html:
        html.write(args.html, verify_page.render_fleet(report))
    return 0 if report["ok"] else 1


def _image_from_manifest(args: argparse.Namespace) -> str:
    """The image of the one --target in the manifest, verified here, on this host's GPUs (a
    CI runner that carries the target's GPU)."""
    if len(args.target) != 1:
        raise UserError("--manifest without --fleet verifies one target on this host", where="--manifest",
                        hint="name it with --target NAME, or pass --fleet FLEET.yaml to run every target's job")
    name = fields.dns_label(args.target[0], "--target", "target name")
    entries = manifest.read(args.manifest)
    if name not in entries:
        raise UserError(f"target {name} is not in the manifest", where=args.manifest,
                        hint=f"targets there: {', '.join(entries) or 'none'}")
    return entries[name].image


def _judge_targets(args: argparse.Namespace, targets, images) -> tuple[dict[str, str], dict[str, str], dict[str, list]]:
    """(target -> why it is not run, target -> the stack's verdict there, target -> the links
    not checked there, as `resolve --json` lists them): the stack is --expect SPEC, else the
    one the labels of the image the target runs record (`images`: one image, or target name
    -> its own, from a manifest). A target where it conflicts (or, with --strict, is
    unverified) is not run, unless --force."""
    image_of = images.get if isinstance(images, dict) else (lambda name: images)
    groups: dict[str, list] = {}  # the targets of each image, judged by that image's stack
    for t in targets:
        groups.setdefault("" if args.expect else image_of(t.name), []).append(t)
    judged, skipped = {}, {}
    for image, members in groups.items():
        if args.expect:
            spec, why = load_spec(args.expect, for_image=True), ""
        else:
            spec, why = image_spec(image, members[0].platform)
        if spec is None:
            say.warning(f"the targets were not judged before running: {why}" if len(groups) == 1 else
                        f"targets {', '.join(t.name for t in members)} were not judged before running: {why}")
            continue
        for name, j in judge(spec, tuple(members), read_base=read).items():
            judged[name] = j
            if j.refused(args.strict or spec.strict) and not args.force:
                why = "does not run" if j.verdict == "conflict" else "could not be checked (--strict)"
                skipped[name] = f"the stack {why} on this target: {j.reason}"
                say.warning(f"{name}: not run: {skipped[name]} (--force runs it anyway)")
            elif j.verdict != "ok":
                say.warning(f"{name}: the stack is {j.verdict} there: {j.reason}")
    return (skipped, {name: j.verdict for name, j in judged.items()},
            {name: to_jsonable(j.resolution.unchecked) for name, j in judged.items()})


def _answer(args: argparse.Namespace, data: dict, summary) -> None:
    """The JSON report on stdout (`--json`) or in a file (`--json FILE`, then the summary too)."""
    if args.json == "-":
        print(json.dumps(data, indent=2))
        return
    if args.json:
        atomic.write_output(args.json, json.dumps(data, indent=2) + "\n")
    print(summary())
