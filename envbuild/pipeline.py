"""The stages from a spec to a pushed image, and the one place that knows their order:

    resolve -> lock -> context -> build -> verify gate -> tag, push

Each stage takes values and returns values. A stage that refuses raises: `Unresolved`
(the resolver's conflicts), `LockRefused` (the solver's), `VerifyFailed` (the gate),
`UserError`/`EnvironmentProblem` for bad input and unreachable services; `envbuild/cli.py`
renders them. Commands run a prefix of the order: `wheelhouse` stops after lock,
`dockerfile` after context, `image` runs it all.

The stage modules do not call each other: the Dockerfile stage only reads the lock
folder (the base pin is recorded by this module through `envbuild.lock.base_record`), the
image stage does not verify, and verification gets its expectations as a value. Neither
the Dockerfile stage nor verification reads the matrices: this module hands them what
the tables say (`context_facts`, `probe_facts`).
"""
from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

import yaml

from envbuild import matrix
from envbuild.core.model import Resolution, Spec
from envbuild.dockerfile import locked, lockfiles
from envbuild.dockerfile.context import Base, BuildContext, catalog_base, check_output, write_context
from envbuild.dockerfile.mirror import apply_mirror
from envbuild.dockerfile.reference import parse
from envbuild.dockerfile.render import MatrixFacts
from envbuild.image import build as engine_build, engine, make, tag
from envbuild.image.credentials import check_push_access
from envbuild.image.facts import read, read_local
from envbuild.image.make import ImageOptions, ImageResult
from envbuild.image.registry import manifest_digest, pin
from envbuild.infra.errors import LockRefused, Unresolved, UserError, VerifyFailed
from envbuild.infra.paths import MATRICES_DIR
from envbuild.lock import api, base_record
from envbuild.lock.check import check
from envbuild.lock.folder import foreign_entries
from envbuild.matrix.lookup import installer_python_min
from envbuild.output import say
from envbuild.resolver import other_platforms, resolve as run_resolver
from envbuild.verify.probe_api import facts_from_matrices, sm_of
from envbuild.verify.runner import Expectations, ExpectedFramework, ProbeFacts, run_verify
from envbuild.verify.summary import summary_text

# --- resolve ------------------------------------------------------------------------------


def resolve(spec: Spec) -> Resolution:
    """The Resolution of `spec`; Unresolved (carrying it) when it has conflicts, or is
    unverified under `strict`. An unverified resolution otherwise goes on (its report says
    which links were not checked)."""
    resolution = run_resolver(spec, read_base=read)
    if not resolution.usable:
        raise Unresolved(resolution)
    return resolution


# --- lock ---------------------------------------------------------------------------------


def platform_resolutions(spec: Spec, resolution: Resolution) -> dict[str, Resolution]:
    """The resolution of each other platform the spec's lock covers (target.platforms):
    each is locked from its own. Unresolved for the first that has conflicts."""
    others = other_platforms(spec, resolution, read_base=read)
    refused = next((other for other in others.values() if not other.usable), None)
    if refused is not None:
        raise Unresolved(refused)
    return others


def lock(spec: Spec, resolution: Resolution, *, lock_dir: Path | None, scratch: Path, quiet: bool = False,
         index_url: str | None = None, extra_index_urls: tuple[str, ...] = (), glibc: str | None = None) -> Path:
    """A lock folder that matches the spec (every platform it names): `lock_dir` as it is
    when it is current, else a fresh lock written there (or under `scratch` when no folder
    was named). The pip indexes and the target's glibc go to `envbuild.lock.api.lock`."""
    others = platform_resolutions(spec, resolution)
    if lock_dir is not None:
        if lock_dir.is_dir() and not check(spec, resolution, None, lock_dir, others):
            return lock_dir
        _refuse_foreign_lock_dir(lock_dir)
        target = lock_dir
    else:
        target = scratch / "lock"
    if not quiet:
        say.note(f"locking into {target}")
    try:
        api.lock(spec, resolution, None, target, platform_resolutions=others, read_base=read_local,
                 index_url=index_url, extra_index_urls=extra_index_urls, glibc=glibc)
    except api.LockConflict as exc:  # a failed pip lock included
        reason = (str(exc).splitlines() or [""])[0]
        raise LockRefused(spec.hash(), tuple(c.message for c in exc.conflicts or ()), reason) from None
    return target


def _refuse_foreign_lock_dir(lock_dir: Path) -> None:
    """A --lock-dir that holds anything but a lock (a project root, /etc) is read, never
    written: `envbuild lock -o DIR` is the one command that puts a lock among other files."""
    foreign = foreign_entries(lock_dir)
    if foreign:
        shown = ", ".join(foreign[:3]) + (", ..." if len(foreign) > 3 else "")
        raise UserError(f"the lock there is missing or out of date, and the folder holds files that are no part "
                        f"of a lock ({shown}), so envbuild does not write one there", where=f"--lock-dir {lock_dir}",
                        hint=f"name a new folder, which envbuild creates, or run `envbuild lock -o {lock_dir}` first")


# --- context ------------------------------------------------------------------------------


def base(resolution: Resolution, *, mirror: str | None = None, pin_digests: bool = False) -> Base:
    """What FROM names: the catalog's base through `mirror`, pinned by the digest its tag
    has now in the registry when `pin_digests`."""
    ref = apply_mirror(parse(catalog_base(resolution).ref), mirror)
    if pin_digests:
        ref = pin(ref)
    return Base(str(ref), ref.digest)


def context_facts(resolution: Resolution) -> MatrixFacts:
    """What the matrices say that the context stage needs for this stack: the base family's
    Dockerfile data, the minor-version driver floor of its CUDA major, and the oldest
    python3 the in-image installer runs on in each mode."""
    m = matrix.load()
    stack = resolution.resolved
    families = {row.family: row for row in m.base_families}
    family = families.get(stack.base_image.family)
    if family is None:
        raise UserError(f"no Dockerfile data for base family {stack.base_image.family!r}",
                        hint=f"families: {', '.join(sorted(families))} (matrices/base_images.yaml `families`)")
    major = int(stack.cuda.split(".")[0]) if stack.cuda else None
    floor = next((r.floor_linux for r in m.minor_compat if r.major == major and r.floor_linux), None)
    modes = dict.fromkeys(row.installer for row in m.installer_pythons)
    pythons = tuple((mode, installer_python_min(m, mode).python_min) for mode in modes)
    layers = tuple((row.layer, row.packages) for row in m.image_layers)
    return MatrixFacts(image_python=family.image_python, dockerfile_comment=family.dockerfile_comment,
                       driver_floor=floor, installer_python=pythons, layers=layers)


def context(out: Path, resolution: Resolution, lock_dir: Path, *, platform: str | None = None,
            mirror: str | None = None, pin_digests: bool = False, wheelhouse: Path | None = None,
            force: bool = False) -> BuildContext:
    """The build context in `out`. A pinned base is recorded in the lock folder first (once
    `out` is known to be writable), so the lock, and the image's copy of it, name the exact
    base it was built on."""
    chosen = base(resolution, mirror=mirror, pin_digests=pin_digests)
    facts = context_facts(resolution)  # before the pin is recorded: missing data leaves the lock as it was
    if chosen.digest:
        check_output(out, resolution, lock_dir, force=force)  # a refused folder leaves the lock as it was
        base_record.write(lock_dir, resolution.resolved.base_image.ref, chosen.ref.split("@")[0], chosen.digest)
    return write_context(out, resolution, lock_dir, facts=facts, platform=platform, base=chosen, wheelhouse=wheelhouse,
                         force=force)


def content_ref(resolution: Resolution, repository: str, lock_dir: Path, *, mirror: str | None = None,
                pin_digests: bool = False, wheelhouse: Path | None = None) -> str:
    """repository:content-tag, the tag `envbuild image` gives this locked stack's image
    (its build context is written to a temporary folder and hashed; nothing is built)."""
    platform = resolution.resolved.platform
    with tempfile.TemporaryDirectory(prefix="envbuild-tag-") as scratch:
        built = context(Path(scratch) / "context", resolution, lock_dir, platform=platform, mirror=mirror,
                        pin_digests=pin_digests, wheelhouse=wheelhouse)
        return f"{repository}:{tag.content_tag(resolution, built.path, built.base_digest, platform)}"


def image_ref(resolution: Resolution, repository: str, lock_dir: Path, *, mirror: str | None = None,
              pin_digests: bool = False, wheelhouse: Path | None = None) -> str:
    """The reference `envbuild image` gives this locked stack's image, without building it:
    repository:content-tag, by digest too when the registry has that tag (a job that runs
    it then pulls exactly that image)."""
    ref = content_ref(resolution, repository, lock_dir, mirror=mirror, pin_digests=pin_digests, wheelhouse=wheelhouse)
    try:
        digest = manifest_digest(parse(ref), timeout=5)
    except UserError:  # registry unreachable: the tag alone still names the image
        digest = None
    return f"{ref}@{digest}" if digest else ref


# --- verify gate --------------------------------------------------------------------------


def expectations(resolution: Resolution, lock_dir: Path | None = None, platform: str | None = None) -> Expectations:
    """What the probe should find in an image of this resolved spec (built from the lock in
    `lock_dir`: the CUDA that lock installs, which a framework's requirements may have moved)."""
    stack = resolution.resolved
    cuda = stack.cuda
    if lock_dir is not None:
        cuda = locked.installed_cuda(lockfiles.read_lock_dir(lock_dir, platform or stack.platform), stack.cuda)
    sms = sorted({str(sm_of(g.compute_capability)) for g in stack.gpus if sm_of(g.compute_capability)}, key=int)
    return Expectations(cuda=cuda, sms=tuple(sms), gpus=tuple(g.name for g in stack.gpus),
                        frameworks=tuple(ExpectedFramework(f.name, f.version, f.cuda) for f in stack.frameworks))


def probe_facts() -> ProbeFacts:
    """What the probe is told from envbuild's matrices: peak figures, minor-version driver
    floors, data-center GPUs and GPU aliases (read as the probe reads them when bundled)."""
    return ProbeFacts.from_probe(facts_from_matrices(str(MATRICES_DIR), yaml.safe_load))


def verify_gate(image_id: str, expect: Expectations, progress) -> dict:
    """Run the probe on the image; VerifyFailed unless its required checks pass. Returns
    the report's summary."""
    progress.line(f"verifying {image_id[:19]} before tagging it")
    report = run_verify(image_id, gpus="all", expect=expect, facts=probe_facts(), client=None, progress=progress)
    progress.line(summary_text(report))
    if not report.ok:
        raise VerifyFailed(f"the image {image_id[:19]} failed verification; no tag was moved onto it "
                           "and nothing was pushed",
                           hint="see the probe's report above; `envbuild verify IMAGE` runs it again")
    return report.to_json()["summary"]


# --- the image: context -> build -> verify gate -> tag, push -------------------------------


def make_image(resolution: Resolution, lock_dir: Path, options: ImageOptions, *, progress=None) -> ImageResult:
    """The image for a resolved, locked spec: built or found by its content tag, verified
    when asked, then tagged and pushed."""
    start = time.monotonic()
    progress = progress or engine_build.Progress()
    make.check_repository(options.repository)
    platform = options.platform or resolution.resolved.platform
    if options.push:  # a refused login fails now, not after a long build
        check_push_access(options.repository)
    workdir = Path(tempfile.mkdtemp(prefix="envbuild-image-"))
    try:
        built = context(options.keep_context or workdir / "context", resolution, lock_dir, platform=platform,
                        mirror=options.mirror, pin_digests=options.pin_digests, wheelhouse=options.wheelhouse,
                        force=options.force_context)
        with engine.answering("the build"):
            result = make.build(resolution, built, options, platform=platform, progress=progress)
        if not result.done:
            if options.verify and result.image_id:  # a cache hit too: an earlier run may have skipped the gate
                with engine.answering("verification"):
                    result.verification = verify_gate(result.image_id, expectations(resolution, lock_dir, platform),
                                                      progress)
            with engine.answering("tagging"):
                make.tag(result, options, progress=progress, start=start)
            if options.push:
                with engine.answering("the push", afterwards=make.PUSH_AFTERWARDS):
                    make.push(result, options, progress=progress, platform=platform)
        result.seconds = time.monotonic() - start
        return result
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
