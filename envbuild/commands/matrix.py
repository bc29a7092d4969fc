"""`envbuild matrix`: ask the compatibility matrices one question.

    envbuild matrix gpu A10G                  compute capability, architecture, CUDA range
    envbuild matrix cuda 11.0                 minimum driver and the architectures it compiles
    envbuild matrix driver 450.80.02          newest CUDA that driver runs
    envbuild matrix pytorch 1.6.0 --installer conda
    envbuild matrix tensorflow|jax|rapids|cupy VERSION
    envbuild matrix images --family rapids --cuda 12
    envbuild matrix refresh [--check]       re-read wheels.yaml from the package index

Every query takes `--json`. Answers carry the source of each fact; facts read only in a
third-party copy are marked [secondary], derived ones [inferred].
"""
from __future__ import annotations

import argparse
import dataclasses
import datetime
import difflib
import json
import sys
import time
from pathlib import Path

from envbuild import frameworks, html, matrix
from envbuild.core.values import BaseFamily, DriverVersion, Platform
from envbuild.core.versions import parse_constraint, parse_version
from envbuild.fleet import load_fleet
from envbuild.hostenv import hostinfo
from envbuild.html import grid_page
from envbuild.infra import atomic, pypi
from envbuild.infra.errors import EnvironmentProblem, UserError
from envbuild.infra.paths import MATRICES_DIR
from envbuild.lock import proof
from envbuild.matrix import lookup as L, refresh
from envbuild.matrix.lookup import version
from envbuild.resolver import arch_grid


def configure(parser: argparse.ArgumentParser) -> None:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true", help="print JSON instead of text")
    sub = parser.add_subparsers(dest="topic", metavar="TOPIC", required=True)
    p = sub.add_parser("gpu", parents=[common], help="a GPU model or compute capability (A10G, 'RTX 3090', 8.6)")
    p.add_argument("name")
    p = sub.add_parser("cuda", parents=[common], help="a CUDA version: minimum driver, compilable architectures")
    p.add_argument("version")
    p.add_argument("--platform", default="linux-64", help="linux-64 (default), linux-aarch64 or win-64")
    p = sub.add_parser("driver", parents=[common], help="a driver version: newest CUDA it runs")
    p.add_argument("version")
    p.add_argument("--platform", default="linux-64", help="linux-64 (default), linux-aarch64 or win-64")
    for plugin in frameworks.all():
        name = plugin.name
        p = sub.add_parser(name, parents=[common], help=f"{name} builds for a version (or constraint)")
        p.add_argument("version", nargs="?", help="version or constraint: 1.6.0, 2.1, '2.1.*', '>=2.1,<2.3', 1.7.1+cu101")
        if plugin.view.query_installer:
            p.add_argument("--installer", choices=("conda", "pip"))
        p.add_argument("--cuda", help="only builds for this CUDA variant (prefix match: 12 ~ 12.4)")
    p = sub.add_parser("grid", parents=[common],
                       help="a framework's builds x GPU architectures: which carry SASS or PTX for which sm_")
    p.add_argument("framework", metavar="FRAMEWORK", help="pytorch or tensorflow (the tables that list compiled architectures)")
    p.add_argument("version", nargs="?", help="only these releases: 2.8.0, '2.*', '>=2.4'")
    p.add_argument("--installer", choices=("conda", "pip"))
    p.add_argument("--cuda", help="only builds for this CUDA variant (prefix match: 12 ~ 12.4)")
    p.add_argument("--gpu", action="append", default=[], metavar="NAME", help="highlight this GPU (repeatable)")
    p.add_argument("--fleet", metavar="FLEET.yaml", help="highlight the GPUs of this fleet's targets")
    p.add_argument("--host", action="store_true", help="highlight this host's GPUs (read with nvidia-smi)")
    form = p.add_mutually_exclusive_group()
    form.add_argument("--html", metavar="FILE", help="write the grid as a self-contained HTML page")
    form.add_argument("--markdown", action="store_true", help="print a Markdown table (for a README or a pull request)")
    p = sub.add_parser("images", parents=[common], help="the base image catalog, filtered")
    p.add_argument("--family", choices=tuple(f.value for f in BaseFamily))
    p.add_argument("--cuda")
    p.add_argument("--flavour", choices=("base", "runtime", "devel"))
    p.add_argument("--framework")
    p.add_argument("--framework-version")
    p.add_argument("--python")
    p.add_argument("--platform")
    p = sub.add_parser("refresh", help="rebuild matrices/wheels.yaml from the package index and print what changed")
    p.add_argument("--check", action="store_true",
                   help="write nothing; exit 1 when the matrices and the index disagree")
    p.add_argument("--offline", action="store_true", help="read the index answers kept in --cache only")
    p.add_argument("--cache", metavar="DIR", help="keep the raw index answers here (read them back with --offline)")
    p.add_argument("--index-url", metavar="URL",
                   help="simple index to read (default: PIP_INDEX_URL, pip's config, else https://pypi.org/simple)")
    p.add_argument("--data", metavar="DIR", help="matrices folder to compare and write (default: the bundled one)")
    p.add_argument("--diff", metavar="FILE", help="write the dated diff here (default: wheels.diff next to the data)")
    p.add_argument("--lock-proof", action="store_true",
                   help="instead, lock each pip build's requirement with uv (newest release of each series, every "
                        "platform and Python it has wheels for) and rebuild matrices/lockable.yaml")
    p.add_argument("--sample", type=int, metavar="N",
                   help="with --lock-proof: about N cases spread over the frameworks, compared with the committed "
                        "table (nothing is written)")
    p.add_argument("--every-release", action="store_true", help="with --lock-proof: every release, not the newest of each series")
    p.add_argument("--workers", type=int, default=4, metavar="N", help="with --lock-proof: locks run at once (default 4)")


def run(args: argparse.Namespace) -> int:
    if args.topic == "refresh":
        return _lock_proof(args) if args.lock_proof else _refresh(args)
    if args.topic == "grid":
        return _grid(args)
    m = matrix.load()
    handler = {"gpu": _gpu, "cuda": _cuda, "driver": _driver, "images": _images}.get(args.topic, _framework)
    data, lines = handler(m, args)
    if args.json:
        json.dump({"verdict": "ok", "query": args.topic, "matrix_version": m.version, **data}, sys.stdout, indent=2,
                  default=_jsonable)
        sys.stdout.write("\n")
    else:
        print("\n".join(lines))
    return 0


# --- shared pieces -------------------------------------------------------------------------
def _jsonable(value):
    if dataclasses.is_dataclass(value):
        return dataclasses.asdict(value)
    raise TypeError(f"cannot serialise {type(value).__name__}")


def _row(obj) -> dict:
    return dataclasses.asdict(obj)


def _marks(row) -> str:
    marks = [m for m, on in (("secondary", getattr(row, "secondary", False)), ("inferred", getattr(row, "inferred", False))) if on]
    return f" [{', '.join(marks)}]" if marks else ""


def _suggest(word: str, choices, what: str, where: str) -> UserError:
    choices = list(dict.fromkeys(str(c) for c in choices))
    close = difflib.get_close_matches(word, choices, n=3, cutoff=0.5)
    hint = f"did you mean {', '.join(repr(c) for c in close)}?" if close else f"see `envbuild matrix {where}`"
    return UserError(f"unknown {what} {word!r}", where=f"matrix {where}", hint=hint)


def _table(headers: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(str(x)) for x in col) for col in zip(headers, *rows)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return [fmt.format(*headers).rstrip()] + [fmt.format(*map(str, r)).rstrip() for r in rows]


def _version_or_error(text: str, what: str, where: str):
    v = version(text)
    if v is None:
        raise UserError(f"malformed {what} {text!r}", where=f"matrix {where}", hint="expected something like 12.4 or 535.104.05")
    return v


# --- gpu -------------------------------------------------------------------------------------------
def _gpu(m, args):
    cc = L.parse_compute_capability(args.name)
    if cc is not None:
        gpus = L.gpus_with_cc(m, cc)
        sm = L.sm_of(cc)
        data = {"compute_capability": cc, "sm": f"sm_{sm}", "gpus": [g.name for g in gpus],
                "cuda_min": L.min_cuda_for_sm(m, sm), "cuda_last": L.last_cuda_for_sm(m, sm),
                "linux_drivers": _drivers(m, cc)}
        lines = [f"compute capability {cc} (sm_{sm})", f"  GPUs ({len(gpus)}): {', '.join(data['gpus']) or 'none in the matrix'}"]
        lines += _cuda_range_lines(data) + _driver_lines(data)
        return data, lines
    rows = L.gpu_candidates(m, args.name)
    if len(rows) > 1:  # the name fits GPUs of different compute capabilities: say so, never pick one
        names = " or ".join(f"{g.name} ({g.compute_capability})" for g in rows)
        raise UserError(f"ambiguous GPU {args.name!r}: {names}", where="matrix gpu",
                        hint="name the model in full, or give its compute capability")
    if not rows:
        raise _suggest(args.name, L.gpu_names(m), "GPU", "gpu")
    gpu = rows[0]
    sm = L.sm_of(gpu.compute_capability)
    exact = L.gpu_key(args.name) in {L.gpu_key(n) for n in (gpu.name, *gpu.aliases)}
    data = {"gpu": _row(gpu), "sm": f"sm_{sm}", "cuda_min": L.min_cuda_for_sm(m, sm), "cuda_last": L.last_cuda_for_sm(m, sm),
            "exact_name": exact, "linux_drivers": _drivers(m, gpu.compute_capability)}
    kind = {True: "data center", False: "not data center", None: "unknown"}[gpu.datacenter]
    lines = [
        f"{gpu.name}: compute capability {gpu.compute_capability} (sm_{sm}), {gpu.architecture}, {kind}",
        f"  aliases: {', '.join(gpu.aliases) or '-'}",
    ]
    if not exact:
        lines.append(f"  {args.name!r} matched without its board, edition or product-line words (they do not change the compute capability)")
    if gpu.memory_gb is not None:
        lines.append(f"  memory: {gpu.memory_gb} GB")
    if gpu.host_platforms:
        lines.append(f"  part of: {gpu.host}; runs only {', '.join(gpu.host_platforms)} builds")
    lines += _cuda_range_lines(data) + _driver_lines(data)
    lines.append(f"  source: {gpu.source}{_marks(gpu)}")
    return data, lines


def _cuda_range_lines(data) -> list[str]:
    if data["cuda_min"] is None:
        return ["  no CUDA toolkit in the matrix compiles for it"]
    last = f" up to CUDA {data['cuda_last']}" if data["cuda_last"] else " (still in the newest toolkit)"
    return [f"  CUDA toolkits compile for it from {data['cuda_min']}{last}"]


def _drivers(m, cc: str) -> dict | None:
    """The `architectures` row of the GPU's Linux drivers; None for an integrated (Tegra) GPU."""
    row = L.driver_architecture(m, cc)
    return _row(row) if row is not None else None


def _driver_lines(data) -> list[str]:
    d = data["linux_drivers"]
    if d is None:
        return ["  Linux drivers: come with Linux for Tegra (the branch rules do not apply)"]
    low = f"R{d['first_branch']} (e.g. {d['first_driver_linux']})" if d["first_branch"] else None
    high = f"R{d['last_branch']} (e.g. {d['last_driver_linux']})" if d["last_branch"] else None
    span = f"{low} to {high}" if low and high else f"{low} and newer" if low else f"{high} and older" if high else \
        "no last branch; the first is not read"
    return [f"  Linux drivers that drive it: {span}"]


# --- cuda / driver -----------------------------------------------------------------------------------
def _cuda(m, args):
    v = _version_or_error(args.version, "CUDA version", "cuda")
    driver, rule = L.min_driver_for_cuda(m, args.version, args.platform)
    releases = [r for r in m.cuda_releases if L.same_release_prefix(v, L.version(r.version))]
    arch = L.toolkit_arch_row(m, args.version)
    if driver is None and not releases and arch is None:
        known = sorted({L.major_minor(r.version) for r in m.cuda_releases}, key=L.version)
        raise _suggest(args.version, known, "CUDA version", "cuda")
    data = {"cuda": args.version, "platform": args.platform, "min_driver": rule,
            "releases": [_row(r) for r in releases], "sms": list(arch.sms) if arch else None,
            "sms_source": arch.source if arch else None}
    lines = [f"CUDA {args.version} on {args.platform}"]
    lines.append(f"  minimum driver: {driver or 'unknown'}" + (f" - {rule.rule}" if driver else f" ({rule.rule})"))
    if rule.toolkit_driver and rule.toolkit_driver != driver:
        lines.append(f"  driver released with it: {rule.toolkit_driver} (needed for PTX JIT of code built with it)")
    if rule.source:
        lines.append(f"  source: {rule.source}{_marks(rule)}")
    if not releases:
        lines.append("  no toolkit release with this number in the matrix")
    if arch:
        lines.append(f"  compiles for: {', '.join('sm_' + s for s in arch.sms)}")
        lines.append(f"  source: {arch.source}{_marks(arch)}")
    else:
        lines.append("  compilable architectures: not in the matrix")
    return data, lines


def _driver(m, args):
    try:
        driver = DriverVersion.parse(args.version)  # `R580` and `580` name the branch
    except ValueError:
        raise UserError(f"malformed driver version {args.version!r}", where="matrix driver",
                        hint="expected something like 535.104.05 or R580") from None
    cuda, info = L.max_cuda_for_driver(m, str(driver), args.platform)
    data = {"driver": str(driver), "platform": args.platform, "cuda": cuda, "native_cuda": info.native_cuda, "rule": info}
    lines = [f"driver {driver} on {args.platform}: newest CUDA {cuda or 'none'}", f"  {info.rule}"]
    if info.source:
        lines.append(f"  source: {info.source}{_marks(info)}")
    if Platform(args.platform).linux:
        data["architectures"] = _driven(m, driver.parts[0])
        lines += _driven_lines(data["architectures"])
    return data, lines


def _driven(m, branch: int) -> list[dict]:
    """Per GPU architecture row: does a Linux driver of `branch` drive it (`drives`), and else why not."""
    out = []
    for row in m.driver_architectures:
        missed = row.misses(branch)
        why = None
        if missed == "past":
            why = f"last branch R{row.last_branch}"
        elif missed == "before":
            why = f"from R{row.first_branch} (e.g. {row.first_driver_linux})"
        for cc in row.compute_capabilities:
            out.append({"architecture": row.architecture, "compute_capability": cc, "drives": missed is None, "why": why})
    return out


def _driven_lines(rows: list[dict]) -> list[str]:
    def grouped(items):
        by: dict = {}
        for r in items:
            by.setdefault((r["architecture"], r["why"]), []).append(r["compute_capability"])
        return [f"{arch} ({', '.join(ccs)})" + (f": {why}" if why else "") for (arch, why), ccs in by.items()]

    lines = [f"  drives (Linux): {', '.join(grouped(r for r in rows if r['drives'])) or 'no GPU in the matrix'}"]
    missed = [r for r in rows if not r["drives"]]
    if missed:
        lines.append(f"  does not drive: {'; '.join(grouped(missed))}")
    lines.append("  (integrated Tegra GPUs come with Linux for Tegra; not judged)")
    return lines


# --- frameworks ----------------------------------------------------------------------------------------
def _framework_version(row) -> str:
    return getattr(row, "version", None) or getattr(row, "package", "")


def _select(rows, query: str | None, topic: str):
    """Rows whose version matches `query` (a version prefix or a constraint)."""
    if not query:
        return list(rows), None
    local_cuda = None
    chosen = frameworks.get(topic).view.select_rows(rows, query, lambda text, what: _version_or_error(text, what, topic))
    if chosen is not None:
        return chosen, None
    try:
        constraint = parse_constraint(query)
        if constraint.local:
            label = frameworks.read_label(constraint.local)
            if label.kind != "cuda":  # +cpu, +rocm…, a git hash: no CUDA variant to select
                raise ValueError(f"+{constraint.local} names no CUDA build (write e.g. +cu121 or +cuda11.cudnn86)")
            local_cuda = label.cuda
    except ValueError as exc:
        raise UserError(str(exc), where=f"matrix {topic}") from None
    out = []
    for r in rows:
        v = L.version(r.version)
        if v is not None and constraint.specifier.contains(v, prereleases=True):
            out.append(r)
    return out, local_cuda


def _framework(m, args):
    topic = args.topic
    rows = _framework_rows(m, topic, args)
    data = {"framework": topic, "query": args.version, "rows": [_row(r) for r in rows]}
    return data, _framework_lines(topic, rows)


def _framework_rows(m, topic: str, args) -> list:
    """The framework's rows that the version query, --installer and --cuda select."""
    table = frameworks.get(topic).rows(m)
    if not table:
        raise UserError(f"the matrix has no {topic} table", where=f"matrix {topic}")
    rows, local_cuda = _select(table, args.version, topic)
    cuda = args.cuda or local_cuda
    if getattr(args, "installer", None):
        rows = [r for r in rows if r.installer == args.installer]
    if cuda:
        rows = [r for r in rows if _cuda_matches(r, cuda)]
    if local_cuda:
        rows = [r for r in rows if getattr(r, "installer", "pip") == "pip"]
    if not rows:
        if args.version and not _select(table, args.version, topic)[0]:
            raise _suggest(args.version, [_framework_version(r) for r in table], f"{topic} version", topic)
        raise UserError(f"no {topic} {args.version or ''} build matches the filters".replace("  ", " "),
                        where=f"matrix {topic}", hint="drop --installer/--cuda to see every build")
    return rows


def _cuda_matches(row, cuda: str) -> bool:
    want = L.version(cuda)
    if want is None:
        raise UserError(f"malformed CUDA version {cuda!r}", where="matrix --cuda")
    if hasattr(row, "cuda_majors"):
        return want.release[0] in row.cuda_majors
    if hasattr(row, "cuda_min") and hasattr(row, "cuda_max"):
        lo, hi = L.version(row.cuda_min), L.version(row.cuda_max)
        mm = L.version(L.major_minor(cuda) or cuda)
        if len(want.release) == 1:
            return lo.release[0] <= want.release[0] <= hi.release[0]
        return lo <= mm <= hi
    have = L.version(row.cuda)
    return have is not None and L.same_release_prefix(want, have)


def _archs(archs) -> str:
    if archs is None:
        return "not read"
    return " ".join(a.replace("sm_", "").replace("compute_", "ptx") for a in archs)


def _framework_lines(topic: str, rows) -> list[str]:
    headers, body = frameworks.get(topic).view.columns(rows, _archs, _marks)
    lines = _table(headers, body)
    sources = list(dict.fromkeys(r.source for r in rows))
    lines.append("sources:")
    lines += [f"  {s}" for s in sources[:8]]
    if len(sources) > 8:
        lines.append(f"  ... and {len(sources) - 8} more (see --json)")
    return lines


# --- grid ----------------------------------------------------------------------------------------------------
def _grid(args) -> int:
    if args.html:
        html.check_target(args.html, inputs=(args.fleet,))
    m = matrix.load()
    name = frameworks.aliases().get(args.framework.lower())
    if name is None:
        raise _suggest(args.framework, frameworks.names(), "framework", "grid")
    args.framework = name
    plugin = frameworks.get(name)
    table = plugin.rows(m)
    if not table or not hasattr(table[0], "archs"):
        listing = [p.name for p in frameworks.all() if (rows := p.rows(m)) and hasattr(rows[0], "archs")]
        raise UserError(f"the {args.framework} rows record no compiled architectures", where="matrix grid",
                        hint=f"the grid is drawn for {', '.join(listing)}; see `envbuild matrix {args.framework}`")
    rows = _framework_rows(m, args.framework, args)
    filters = {"version": args.version, "installer": args.installer, "cuda": args.cuda}
    data = arch_grid.grid(m, args.framework, rows, _highlighted(m, args), filters)
    if args.html:
        html.write(args.html, grid_page.render(data))
    if args.json:
        json.dump(data, sys.stdout, indent=2)
        sys.stdout.write("\n")
    elif args.markdown:
        sys.stdout.write(arch_grid.markdown(data))
    elif args.html:
        print(f"envbuild: wrote the {args.framework} grid ({len(data['rows'])} rows) to {args.html}", file=sys.stderr)
    else:
        print(arch_grid.text(data))
    return 0


def _highlighted(m, args) -> list[dict]:
    """The GPUs to highlight, from --gpu, --fleet and --host: each GPU once, with its
    compute capability (None when the GPU table does not know it) and where it is."""
    asked: list[tuple[str, str | None, str]] = []
    for name in args.gpu:  # as `matrix gpu` reads a name: an unknown or ambiguous one is refused
        if L.parse_compute_capability(name) is None:
            rows = L.gpu_candidates(m, name)
            if len(rows) > 1:
                raise UserError(f"ambiguous GPU {name!r}: {' or '.join(f'{g.name} ({g.compute_capability})' for g in rows)}",
                                where="matrix grid --gpu", hint="name the model in full, or give its compute capability")
            if not rows:
                close = difflib.get_close_matches(name, L.gpu_names(m), n=3, cutoff=0.5)
                raise UserError(f"unknown GPU {name!r}", where="matrix grid --gpu",
                                hint=f"did you mean {', '.join(map(repr, close))}?" if close
                                else "give the model (A100, V100) or a compute capability (8.0)")
        asked.append((name, None, "--gpu"))
    if args.fleet:
        asked += [(t.gpu, None, t.name) for t in load_fleet(args.fleet).targets]
    if args.host:
        asked += [(name, cc, "this host") for name, cc in hostinfo.detect(check_docker=False).gpus]
    gpus: dict[str, dict] = {}
    for text, cc, where in asked:
        name = text
        if cc is None:
            cc = L.parse_compute_capability(text)
            if cc is not None:
                name = f"compute capability {cc}"
        if cc is None:
            row = L.find_gpu(m, text)
            if row is not None:
                name, cc = row.name, row.compute_capability
        entry = gpus.setdefault(name, {"name": name, "compute_capability": cc, "on": []})
        if where not in entry["on"]:
            entry["on"].append(where)
    return list(gpus.values())


# --- images --------------------------------------------------------------------------------------------------
def _images(m, args):
    for flag in ("cuda", "framework_version", "python"):
        value = getattr(args, flag)
        if value is not None:
            _version_or_error(value, f"--{flag.replace('_', '-')} version", "images")
    rows = L.base_images(m, family=args.family, cuda=args.cuda, flavour=args.flavour, framework=args.framework,
                         platform=args.platform, framework_version=args.framework_version, python=args.python)
    if args.framework and not rows:
        known = {r.framework for r in m.base_images if r.framework}
        if args.framework.lower() not in known:
            raise _suggest(args.framework, sorted(known), "framework", "images")
    data = {"count": len(rows), "images": [_row(r) for r in rows]}
    body = [[r.ref, r.cuda or "?", r.flavour or "-", f"{r.framework or '-'} {r.framework_version or ''}".strip(),
             r.python or "?", r.os or "?", _marks(r).strip()] for r in rows]
    lines = _table(["image", "cuda", "flavour", "framework", "python", "os", ""], body) if rows else []
    lines.append(f"{len(rows)} image(s)")
    return data, lines


# --- refresh ---------------------------------------------------------------------------------------
def _refresh(args) -> int:
    """Re-read the wheel files of every release the matrices know; print a dated diff and
    write it with the new data (or, with --check, only report and fail on disagreement)."""
    directory = Path(args.data) if args.data else MATRICES_DIR
    if not (directory / "cuda_driver.yaml").is_file():
        raise UserError(f"{directory} holds no matrices", where="matrix refresh --data", hint="give the matrices/ folder")
    m = matrix.load_from(directory)
    index = pypi.SimpleIndex(args.index_url, cache=args.cache, offline=args.offline)
    started = time.perf_counter()
    result = refresh.read(m, index, frameworks.all())
    seconds = time.perf_counter() - started
    changes, count = refresh.diff(refresh.rows_of(m), result.rows)
    today = datetime.date.today().isoformat()
    shown = directory / "wheels.yaml" if args.data else "the bundled matrices/wheels.yaml"
    head = [f"# envbuild matrix refresh {today}: {index.public_url}{' (offline, from ' + str(args.cache) + ')' if args.offline else ''}",
            f"# {len(result.rows)} releases from {result.projects} projects, {result.metadata_files} metadata files, "
            f"{seconds:.1f} s; {count} row(s) differ from {shown}"]
    lines = head + changes + [f"disagree {f}" for f in result.findings] + [f"note     {n}" for n in result.notes]
    text = "\n".join(lines) + "\n"
    print(text, end="")
    disagree = bool(count or result.findings)
    diff_file = Path(args.diff) if args.diff else None if args.check else directory / "wheels.diff"
    try:
        if count and not args.check:
            refresh.write(directory, result.rows)
            if directory == MATRICES_DIR:  # the bundled data: commands read its compiled copy
                matrix.compile_matrices()
        if diff_file is not None:
            atomic.write_output(diff_file, text)
    except OSError as exc:
        raise EnvironmentProblem(f"cannot write {exc.filename or directory}: {exc.strerror or exc}",
                                 where="matrix refresh", hint="pass --data DIR (a copy of matrices/) or --diff FILE") from None
    return 1 if args.check and disagree else 0


def _lock_proof(args) -> int:
    """Lock every pip build's requirement (or a sample) and write matrices/lockable.yaml, or
    with --sample / --check compare the answers with the committed table."""
    if args.workers < 1 or (args.sample is not None and args.sample < 1):
        raise UserError("--workers and --sample take a count of 1 or more", where="matrix refresh")
    directory = Path(args.data) if args.data else MATRICES_DIR
    if not (directory / "cuda_driver.yaml").is_file():
        raise UserError(f"{directory} holds no matrices", where="matrix refresh --data", hint="give the matrices/ folder")
    m = matrix.load_from(directory)
    today = datetime.date.today().isoformat()
    every = proof.cases(m, every_release=args.every_release)
    if args.sample:  # cases the committed table answers, so that each one sampled is compared
        known = {(r.requirement, r.index, r.platform, p) for r in m.lock_proofs for p in r.pythons.split()}
        every = [c for c in every if (c.requirement, c.index, c.platform, c.python) in known]
    chosen = proof.sample(every, args.sample) if args.sample else every
    glibc = max((row.glibc for row in m.target_glibc), key=parse_version)
    started = time.perf_counter()
    done = [0]

    def progress(case, answer):
        done[0] += 1
        if done[0] % 25 == 0:
            print(f"envbuild: lock proof: {done[0]} locked ({time.perf_counter() - started:.0f} s)", file=sys.stderr)

    cache = proof.Cache(args.cache)
    kept = sum(1 for c in chosen if (found := cache.get(c)) is not None and found.lockable is not None)
    answers = proof.sweep(chosen, cache, glibc=glibc, today=today, offline=args.offline, workers=args.workers,
                          progress=progress)
    seconds = time.perf_counter() - started
    head = [f"# envbuild matrix refresh --lock-proof {today}: {proof.PYPI}, glibc {glibc}",
            f"# {len(chosen)} of {len(every)} cases ({kept} answered from the cache), {seconds:.0f} s"]
    differ = _proof_differences(m, answers) if m.lock_proofs else []  # a first sweep has nothing to differ from
    lines = head + proof.summary(answers) + [f"differs        {line}" for line in differ]
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if args.sample or args.check:
        return 1 if args.check and differ else 0
    try:
        atomic.write_text(directory / "lockable.yaml", proof.render(proof.rows(answers)))
        atomic.write_text(Path(args.diff) if args.diff else directory / "lockable.diff", text)
        if directory == MATRICES_DIR:  # the bundled data: commands read its compiled copy
            matrix.compile_matrices()
    except OSError as exc:
        raise EnvironmentProblem(f"cannot write {exc.filename or directory}: {exc.strerror or exc}",
                                 where="matrix refresh", hint="pass --data DIR (a copy of matrices/) or --diff FILE") from None
    return 0


def _proof_differences(m, answers) -> list[str]:
    """Cases whose answer is not what the committed table says (a case it lacks included)."""
    committed = {}
    for r in m.lock_proofs:
        for python in r.pythons.split():
            committed[(r.requirement, r.index, r.platform, python)] = r.lockable
    out = []
    for case, answer in answers.items():
        if answer.lockable is None:
            continue
        was = committed.get((case.requirement, case.index, case.platform, case.python))
        if was != answer.lockable:
            now = "locks" if answer.lockable else f"does not lock ({answer.why})"
            out.append(f"{case.requirement} on {case.platform}, Python {case.python}: {now}; the table says "
                       + ("nothing" if was is None else "it locks" if was else "it does not"))
    return sorted(out)
