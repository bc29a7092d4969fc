"""`envbuild export github-actions|gitlab-ci SPEC --fleet FLEET`: the CI pipeline that
builds each image of the fleet plan on its own runner and verifies each target on a
runner with its GPU (envbuild/ci/). Every value is checked here, before anything is
written; a target without `scheduler.runner_labels` is bad input (a CI system cannot
tell which runner has its GPU). Targets no stack serves get no verify job (exit 1, the
pipeline for the others is written)."""
from __future__ import annotations

import json
import sys

from envbuild import __version__
from envbuild.ci import Pipeline, VerifyJob, github_actions, gitlab_ci, mirror, repo_path
from envbuild.commands._spec import spec_from_args
from envbuild.core import fields
from envbuild.dockerfile.reference import parse
from envbuild.fleet import load_fleet
from envbuild.fleet.plan import plan_fleet
from envbuild.image.facts import read
from envbuild.infra import atomic
from envbuild.infra.errors import UserError
from envbuild.output import say

RENDERERS = {"github-actions": github_actions.render, "gitlab-ci": gitlab_ci.render}


def run_ci(args) -> int:
    kind = args.kind
    for flag, on in (("--image", args.image), ("--manifest", args.manifest), ("--command", args.command),
                     ("--static", args.static)):
        if on:
            raise UserError(f"{flag} does not apply to a {kind} pipeline", where=flag,
                            hint="the pipeline builds the plan's images and verifies each target with its own")
    if not args.fleet or not args.spec:
        raise UserError(f"a {kind} pipeline needs a SPEC file and --fleet FLEET.yaml", where="export",
                        hint=f"envbuild export {kind} spec.yaml --fleet fleet.yaml -o FILE")
    spec_path = repo_path(args.spec, "SPEC", "the spec path")
    fleet_path = repo_path(args.fleet, "--fleet", "the fleet path")
    env = {"ENVBUILD_SPEC": spec_path, "ENVBUILD_FLEET": fleet_path}
    flags, watch = [], [spec_path, fleet_path]
    if args.repository:
        env["ENVBUILD_REPOSITORY"] = fields.image_ref(args.repository, "--repository", tag=False, what="repository")
        flags.append('--repository "$ENVBUILD_REPOSITORY"')
    if args.lock_dir is not None:
        env["ENVBUILD_LOCK_DIR"] = repo_path(str(args.lock_dir), "--lock-dir", "the lock folder")
        flags.append('--lock-dir "$ENVBUILD_LOCK_DIR"')
        watch.append(f"{env['ENVBUILD_LOCK_DIR']}/**")
    if args.registry_mirror:
        env["ENVBUILD_REGISTRY_MIRROR"] = mirror(args.registry_mirror, "--registry-mirror")
        flags.append('--registry-mirror "$ENVBUILD_REGISTRY_MIRROR"')
    if args.wheelhouse is not None:
        env["ENVBUILD_WHEELHOUSE"] = repo_path(str(args.wheelhouse), "--wheelhouse", "the wheelhouse")
        flags.append('--wheelhouse "$ENVBUILD_WHEELHOUSE"')
    if args.pin_digests:
        flags.append("--pin-digests")

    spec = spec_from_args(args, for_image=True)  # the plan is of images
    repository = args.repository or spec.image_repository
    if not repository:
        raise UserError("no image repository", where=spec.source or "command line",
                        hint="set image.repository in the spec or pass --repository REGISTRY/NAME")
    fleet = load_fleet(args.fleet)
    targets = fleet.select(args.target)
    unlabelled = [t for t in targets if not t.scheduler.get("runner_labels")]
    if unlabelled:
        t = unlabelled[0]
        raise UserError(f"target {t.name} names no CI runner", where=t.where,
                        hint="add scheduler.runner_labels: the labels (GitHub) or tags (GitLab) of the self-hosted "
                             "runners with its GPU, e.g. [self-hosted, gpu-a100]")
    plan = plan_fleet(spec, targets, read_base=read)
    if not plan.images:
        raise UserError("no stack of the spec serves any selected target: there is nothing to build", where="--fleet",
                        hint="see `envbuild image SPEC --fleet FLEET --plan`")
    verify = tuple(VerifyJob(r.target.name, image.item, tuple(r.target.scheduler["runner_labels"]))
                   for image in plan.images for r in image.targets)
    order = {t.name: i for i, t in enumerate(targets)}
    name = "".join(c if c.isalnum() or c in "._-" else "-" for c in (spec.name or spec_path.rsplit("/", 1)[-1]))[:60]
    pipeline = Pipeline(name=name or "spec", version=__version__, registry=parse(repository).registry,
                        env=tuple(env.items()), build_flags=tuple(flags), items=tuple(i.item for i in plan.images),
                        verify=tuple(sorted(verify, key=lambda v: order[v.target])), watch=tuple(watch))
    text = RENDERERS[kind](pipeline)
    if args.output:
        atomic.write_text(args.output, text)
        say.note(f"wrote the {kind} pipeline ({len(plan.images)} image(s), {len(verify)} target(s)) to {args.output}")
    if args.json:
        print(json.dumps({"verdict": "conflict" if plan.uncovered else "ok", "kind": kind, "file": args.output,
                          "images": len(plan.images), "targets": {v.target: v.item for v in verify},
                          "uncovered": [r.target.name for r in plan.uncovered], "definition": text}, indent=2))
    elif not args.output:
        sys.stdout.write(text)
    for r in plan.uncovered:
        reason = r.conflicts[0].message if r.conflicts else "no stack serves it"
        say.warning(f"no job for target {r.target.name}: no stack of the spec serves it: {reason}")
    return 1 if plan.uncovered else 0
