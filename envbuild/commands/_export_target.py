"""One target of `envbuild export`: its scheduler settings as the job's kind takes them,
and the stack's verdict there (a conflict writes nothing unless --force)."""
from __future__ import annotations

from dataclasses import replace

from envbuild.core.model import LINKS, to_jsonable
from envbuild.fleet.judge import image_spec, judge
from envbuild.image.facts import read
from envbuild.infra.errors import Refused, Unresolved
from envbuild.output import say
from envbuild.targets import scheduler_for


def for_kind(target, kind: str):
    """The target with its scheduler settings as a `kind` job takes them (the GPU always
    comes from the target; another kind's keys do not apply, unless `kind` adopts them)."""
    return target if target.kind == kind else replace(target, scheduler=scheduler_for(target.scheduler, kind))


def judge_target(spec, target, args, image: str | None = None) -> tuple[str, list, list]:
    """The stack's verdict on the target (the spec, else the labels of an image envbuild
    built: `image`, else --image), with its unchecked links and conflicts as `resolve --json` gives them. A
    conflict, or under --strict a link not checked or a stack not judged, writes nothing
    (exit 1) unless --force. A stack that could not be judged is unverified: every link of
    it is unchecked there, and a warning says why."""
    why = "no spec and no image to read one from"
    image = image or args.image  # `image`: the target's own, from a fleet manifest
    if spec is None and image:
        spec, why = image_spec(image, target.platform)
    if spec is None:
        if args.strict and not args.force:
            raise Refused(f"target {target.name}: the stack was not judged: {why}; nothing was written "
                          f"(pass the SPEC, or --force)")
        say.warning(f"the stack was not judged on target {target.name}: {why}")
        return "unverified", [{"links": list(LINKS), "message": f"the stack was not judged on target "
                                                               f"{target.name}: {why}"}], []
    judged = judge(spec, (target,), read_base=read)[target.name]
    if judged.refused(spec.strict or bool(args.strict)):
        if not args.force:
            raise Unresolved(judged.resolution, note=f"the stack does not run on target {target.name} as asked; "
                             f"nothing was written (--force writes the job anyway)")
        say.warning(f"writing the job for target {target.name} although the stack is {judged.verdict} there: "
                    f"{judged.reason}")
    elif judged.verdict == "unverified":
        say.warning(f"target {target.name}: unverified: {judged.reason}")
    return (judged.verdict, to_jsonable(judged.resolution.unchecked), to_jsonable(judged.resolution.conflicts))
