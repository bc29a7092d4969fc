"""`envbuild env [SPEC] [--prefix DIR]`: the spec's environment on this host, resolved for
its driver, GPUs, platform and Python, locked, and installed with every file's hash checked
(a venv made by uv for pip environments, a prefix linked by py-rattler for conda ones).

Exit 0 when the environment is ready (created, updated or already current), 1 when the
stack does not resolve or cannot be locked, 2 for bad input (a prefix holding files
envbuild did not write included), 3 when an index, a channel or the needed Python is
missing, or the operating system refused a write.
"""
from __future__ import annotations

import shlex
import sys
from pathlib import Path

from envbuild.commands._spec import gpu_text, spec_from_args
from envbuild.core.model import to_jsonable
from envbuild.dockerfile.locked import normalize
from envbuild.hostenv import hostinfo
from envbuild.hostenv import prefix as prefixes, python
from envbuild.hostenv.install import python_runs
from envbuild.hostenv.make import ensure
from envbuild.hostenv.request import Host, for_host, resolve_for_host
from envbuild.infra.errors import Unresolved
from envbuild.output import say
from envbuild.output.jsonout import emit
from envbuild.output.progress import Progress
from envbuild.output.report import say_unchecked
from envbuild.spec.cli_args import add_spec_arguments
from envbuild.spec.validate import check_index_url


def configure(parser) -> None:
    add_env_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print the outcome as JSON (schema/env.schema.json)")


def add_env_arguments(parser) -> None:
    """The flags `env` and `run` share."""
    add_spec_arguments(parser)
    parser.add_argument("--prefix", type=Path, metavar="DIR",
                        help="where the environment lives (default: .envbuild/envs/<spec name> beside the spec file)")
    parser.add_argument("--index-url", metavar="URL",
                        help="base pip index for the lock (default: https://pypi.org/simple)")
    parser.add_argument("--extra-index-url", action="append", default=[], metavar="URL",
                        help="a further pip index for the lock, repeatable")


def run(args) -> int:
    result = make_env(args)
    if args.json:
        emit(to_json(result))
    else:
        print(summary(result, args))
    return 0


def make_env(args, *, warn_when_current: bool = True):
    """Resolve for this host and make the prefix current (EnvResult); warnings and progress
    go to stderr. `warn_when_current=False` (`run`): the warnings about the target only
    when the environment is (re)installed, so a command's output is not prefixed by them."""
    for flag, url in [("--index-url", args.index_url)] + [("--extra-index-url", u) for u in args.extra_index_url]:
        if url is not None:
            check_index_url(url, flag)

    target_from_flags = bool(args.driver or args.gpu)
    args.host = False  # this host is read below, where a missing driver is a warning, not an error
    spec = spec_from_args(args)
    prefix = args.prefix if args.prefix is not None else prefixes.default_prefix(spec.source)
    prefixes.guard(prefix, "--prefix" if args.prefix is not None else "prefix")
    host = read_host()
    request = for_host(spec, host, target_from_flags=target_from_flags)
    request, resolution = resolve_for_host(request, lambda: _host_python(prefix))
    def warn() -> None:
        for note in (*request.notes, *(w.message for w in resolution.warnings)):
            say.warning(note)
        say_unchecked(resolution)

    if warn_when_current or not resolution.usable:  # where the target came from explains a conflict too
        warn()
    if not resolution.usable:  # a conflict, or an unverified stack under --strict
        raise Unresolved(resolution)
    progress = Progress(sys.stderr, quiet=args.quiet)
    return ensure(request, resolution, prefix, host, progress=progress, index_url=args.index_url,
                  extra_index_urls=tuple(args.extra_index_url), before_install=None if warn_when_current else warn)


def read_host():
    """This machine's platform, glibc, NVIDIA driver and GPUs (as a spec names them)."""
    info = hostinfo.detect(require_driver=False, check_docker=False)
    return Host(platform=hostinfo.platform_name(), glibc=hostinfo.glibc(), driver=info.driver,
                gpus=tuple(dict.fromkeys(gpu_text(g) for g in info.gpus)) if info.driver else ())


def _host_python(prefix) -> str | None:
    """The Python version a pip environment gets when the spec leaves it open: the one the
    existing environment runs (kept while it fits), else this host's default."""
    marker = prefixes.read_marker(prefix)
    if marker and marker.get("installer") == "pip" and marker.get("python") and python_runs(prefix):
        return str(marker["python"])
    return python.default_version()


def to_json(result) -> dict:
    record, stack = result.record, result.resolution.resolved
    lock_dir = result.prefix / prefixes.LOCK_DIR
    return {
        "verdict": result.resolution.verdict,
        "unchecked": to_jsonable(result.resolution.unchecked),
        "action": result.action,
        "prefix": str(result.prefix),
        "installer": record.get("installer"),
        "python": record.get("python"),
        "interpreter": record.get("interpreter"),
        "platform": record.get("platform"),
        "glibc": record.get("glibc"),
        "target": record.get("target"),
        "frameworks": [{"name": f.name, "version": f.version, "cuda": f.cuda} for f in stack.frameworks],
        "cuda": stack.cuda,
        "lock": {"folder": str(lock_dir), "sha256": record.get("lock_sha256"),
                 "files": sorted(p.name for p in lock_dir.iterdir() if p.is_file()) if lock_dir.is_dir() else []},
        "packages": record.get("packages") or [],
        "warnings": list(result.request.notes) + [w.message for w in result.resolution.warnings],
        "resolved": to_jsonable(stack),
        "seconds": round(result.seconds, 3),
    }


def summary(result, args) -> str:
    """What the environment is and how to use it (stdout)."""
    record, stack = result.record, result.resolution.resolved
    if result.action == "unchanged":
        head = f"environment {result.prefix} is up to date (lock sha256 {record.get('lock_sha256', '')[:12]}); nothing to do"
    else:
        head = f"environment {result.prefix} {result.action} in {result.seconds:.1f} s"
    versions = {p["name"]: p["version"] for p in record.get("packages") or []}
    frameworks = []
    for framework in stack.frameworks:
        exact = next((versions[n] for n in _package_names(framework) if n in versions), framework.version)
        frameworks.append(f"{framework.name} {exact} ({framework.installer}, CUDA {framework.cuda})")
    target = record.get("target") or {}
    where = {"host": "read from this host", "spec": "the spec's: this host has no NVIDIA driver",
             "flags": "from the command line"}.get(target.get("source"), "")
    gpus = ", ".join(target.get("gpus") or []) or "no GPU named"
    spec_arg = f" {shlex.quote(args.spec)}" if getattr(args, "spec", None) else ""
    prefix_arg = f" --prefix {shlex.quote(str(args.prefix))}" if getattr(args, "prefix", None) is not None else ""
    lines = [
        head,
        f"  {'; '.join(frameworks) or 'no framework'}",
        f"  Python {record.get('python')} ({record.get('installer')}), {record.get('platform')}, "
        f"glibc {record.get('glibc') or 'unknown'}, {len(versions)} locked packages",
        f"  target: driver {target.get('driver') or 'none'}, {gpus} ({where})",
        f"  lock: {result.prefix / prefixes.LOCK_DIR}",
        f"  run in it: envbuild run{spec_arg}{prefix_arg} -- python ...  (or: {_activate_hint(record, result.prefix)})",
    ]
    return "\n".join(lines)


def _activate_hint(record: dict, prefix) -> str:
    if record.get("installer") == "conda":
        return f"micromamba activate {prefix}, or conda activate {prefix}"
    return f"source {prefix}/bin/activate"


def _package_names(framework) -> list[str]:
    """The locked package names that carry a framework's version (cupy-cuda12x, torch, ...)."""
    names = [normalize(r.split("==")[0].split("[")[0].strip()) for r in framework.pip_requirements]
    names += [normalize(s.split("=")[0].split()[0].strip()) for s in framework.conda_specs]
    return names + [framework.name]
