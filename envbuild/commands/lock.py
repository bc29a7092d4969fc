"""`envbuild lock`: solve the resolved stack for the target GPU with a real conda solver
and write conda-lock.yml, conda-<platform>.lock and/or requirements.lock.

Exit 0 when the lock was written (or, with --check, is up to date), 1 when the stack
cannot be locked (conflicts are printed like `resolve` prints them) or the lock is
stale, 2 for bad input, 3 when a channel or index cannot be read.
"""
from __future__ import annotations

import dataclasses
import json
import sys

from envbuild.commands._spec import spec_from_args
from envbuild.core.model import to_jsonable
from envbuild.image.facts import read, read_local
from envbuild.infra.urls import mask_text
from envbuild.lock.api import LockConflict, lock
from envbuild.lock.check import check
from envbuild.lock.gpu import all_framework_packages
from envbuild.output import say
from envbuild.output.report import render, say_unchecked
from envbuild.resolver import other_platforms, resolve
from envbuild.spec.cli_args import add_judged_for_argument, add_spec_arguments
from envbuild.spec.validate import check_index_url


def configure(parser) -> None:
    add_spec_arguments(parser, multi_platform=True)
    add_judged_for_argument(parser)
    parser.add_argument("-o", "--output", dest="out_dir", default=".", metavar="DIR",
                        help="folder for the lockfiles (default: current folder)")
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 when the lock no longer matches the spec, matrices or resolved stack")
    parser.add_argument("--index-url", metavar="URL",
                        help="base pip index for the pip lock (default: https://pypi.org/simple; the lock names "
                             "only the indexes given here and the framework's own)")
    parser.add_argument("--extra-index-url", action="append", default=[], metavar="URL",
                        help="a further pip index for the pip lock, repeatable")
    parser.add_argument("--allow-unhashed", action="store_true",
                        help="write a pip lock even when the index publishes no sha256 for some files")
    parser.add_argument("--json", action="store_true", help="print the outcome as JSON")


def run(args) -> int:
    for flag, url in [("--index-url", args.index_url)] + [("--extra-index-url", u) for u in args.extra_index_url]:
        if url is not None:
            check_index_url(url, flag)
    spec = spec_from_args(args)  # a repeated --platform names the lock's platforms
    resolution = resolve(spec, read_base=read)
    # each further platform of the lock is locked from its own resolution; the first one
    # that does not resolve is the answer
    others = other_platforms(spec, resolution, read_base=read) if resolution.usable else {}
    refused = next((other for other in others.values() if not other.usable), None)
    if refused is not None:
        resolution, others = refused, {}
    if args.check:
        return _check(spec, resolution, others, args)
    if not resolution.usable:
        return _refuse(resolution, resolution.conflicts, "", args)

    say_unchecked(resolution)

    try:
        result = lock(spec, resolution, None, args.out_dir, index_url=args.index_url,
                      extra_index_urls=tuple(args.extra_index_url), allow_unhashed=args.allow_unhashed,
                      platform_resolutions=others, read_base=read_local)
    except LockConflict as exc:
        return _refuse(resolution, exc.conflicts, exc.raw, args)

    for note in result.notes:
        say.warning(note)
    if args.json:
        _print_json({
            "verdict": resolution.verdict, "unchecked": to_jsonable(resolution.unchecked),
            "spec_hash": result.stamp.spec_hash, "matrix_version": result.stamp.matrix_version,
            "resolved_hash": result.stamp.resolved_hash, "platforms": list(result.platforms),
            "files": [str(p) for p in result.files], "pip_hashed": result.pip_hashed, "notes": list(result.notes),
            "packages": {platform: [f"{p.name}={p.version}={p.build}" for p in packages]
                         for platform, packages in result.conda.items()},
            "pip_packages": {platform: [{"name": p.name, "version": p.version, "hashes": list(p.hashes)} for p in pins]
                             for platform, pins in result.pip.items()},
            "cuda": to_jsonable(result.cuda),
            "conflicts": [], "base_packages": result.base,
        })
        return 0
    for platform, packages in result.conda.items():
        frameworks = [p for p in packages if p.name in _framework_packages()]
        shown = ", ".join(f"{p.name} {p.version} ({p.build})" for p in frameworks)
        print(f"{platform}: {len(packages)} conda packages" + (f"; {shown}" if shown else ""))
    for report in result.cuda:
        print("\n".join(report.lines(warnings=False)))  # the warnings go to stderr with the notes
    for path in result.files:
        print(f"wrote {path}")
    if result.base and result.base["from_base"]:
        reused = result.base["from_base"]
        print(f"the base image {result.base['base_image']} provides {len(reused)} locked packages (the image does not "
              f"install them): {', '.join(f'{n} {v}' for n, v in sorted(reused.items()))}")
    return 0


def _framework_packages() -> set[str]:
    return set(all_framework_packages())


def _check(spec, resolution, others, args) -> int:
    problems = check(spec, resolution, None, args.out_dir, others)
    if args.json:
        _print_json({"verdict": "stale" if problems else "ok", "up_to_date": not problems, "problems": problems})
    elif problems:
        print("lock is out of date:")
        for line in problems:
            print(f"  {line}")
        print("run `envbuild lock` again to update it")
    else:
        print("lock is up to date")
    return 1 if problems else 0


def _refuse(resolution, conflicts, raw: str, args) -> int:
    # no conflict: an unverified stack, which --strict refuses
    verdict = "conflict" if conflicts else resolution.verdict
    if args.json:
        _print_json({"verdict": verdict, "spec_hash": resolution.spec.hash(), "files": [],
                     "conflicts": to_jsonable(tuple(conflicts)), "unchecked": to_jsonable(resolution.unchecked),
                     **({"solver": raw} if args.verbose and raw else {})})
        return 1
    refused = dataclasses.replace(resolution, verdict=verdict, conflicts=tuple(conflicts))
    print(mask_text(render(refused)))
    print("nothing was written")
    if args.verbose and raw:
        print(mask_text("\nsolver explanation:\n" + raw))
    return 1


def _print_json(data) -> None:
    sys.stdout.write(mask_text(json.dumps(data, indent=2)) + "\n")  # no credentials in any value
