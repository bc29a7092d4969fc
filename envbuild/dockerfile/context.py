"""The build context: Dockerfile, installer, install plan, lockfiles, probe, and the
archives and wheels the build must not download.

Layout (the Dockerfile templates rely on it):

    Dockerfile
    envbuild/install.py       the in-image installer (stdlib only)
    envbuild/plan.json        what install.py does: installer, prefix, packages
    envbuild/pkgs/SUBDIR/...  conda archives whose lock URL is a local file:// path
    envbuild/pip.lock         a conda lock's pip section
    envbuild/layers/NAME/     a pip environment's layer (envbuild.dockerfile.layers): its
                              requirements.lock, and wheels/ for offline installs
    envbuild/wheelhouse/      wheels for offline installs (--wheelhouse); for a pip
                              environment only the installer's own (pip)
    envbuild/image/           copied into the image as /opt/envbuild: probe.py, lock/

`Dockerfile` and `envbuild/` are the only entries envbuild writes in the folder
(`outputs.py`): they are written in a staging folder and moved in only when complete, so a
failed run leaves the previous context as it was. An old entry is replaced only where the
folder's record proves envbuild wrote it; nothing else there is ever touched.
"""
from __future__ import annotations

import json
import os
import shutil
import urllib.parse
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path

from envbuild.core.model import Resolution
from envbuild.dockerfile import layers, locked, lockfiles, outputs, render
from envbuild.infra import atomic
from envbuild.infra.errors import UserError
from envbuild.infra.paths import PROBE_FILE
from envbuild.infra.urls import strip_text
from envbuild.lock import folder

HERE = Path(__file__).resolve().parent
OWNED = ("Dockerfile", "envbuild")  # the context's entries; everything else in the folder is the user's


@dataclass(frozen=True)
class BuildContext:
    path: Path
    dockerfile: str
    base_ref: str  # as FROM names it (mirror applied, digest when pinned)
    base_digest: str | None
    installer: str
    layers: tuple[str, ...] = ()  # what each layer the image adds to the base holds (render.final_layers)
    # a pip environment's layers after the venv: {"name", "packages": {name: version}, "bytes"}
    pip_layers: tuple[dict, ...] = ()


@dataclass(frozen=True)
class Base:
    """The base image as FROM names it: the catalog reference, through a mirror and pinned
    to a digest when asked (the pipeline's base stage asks the registry)."""

    ref: str
    digest: str | None = None


def catalog_base(resolution: Resolution) -> Base:
    stack = resolution.resolved
    if stack is None or stack.base_image is None:
        raise UserError("the resolution chose no base image", hint="set `base` or `base_image` in the spec")
    return Base(stack.base_image.ref)


def rattler_requirement() -> str:
    return f"py-rattler=={version('py-rattler')}"


def has_pip_wheel(wheelhouse: Path | None) -> bool:
    return wheelhouse is not None and any(wheelhouse.glob("pip-*.whl"))


def _local_path(url: str) -> Path | None:
    parsed = urllib.parse.urlparse(url)
    # a file URL's path, %-decoded (what urllib.request.url2pathname does on POSIX, without
    # importing http.client and email: a tenth of a second on every content tag)
    return Path(urllib.parse.unquote(parsed.path)) if parsed.scheme == "file" else None


# `envbuild wheelhouse` puts the lock's conda archives here, as an indexed channel.
LOCAL_CHANNEL = "conda-channel"


def _in_local_channel(wheelhouse: Path | None, package: lockfiles.CondaPackage) -> Path | None:
    """The locked archive from the wheelhouse's local channel, if it is there: an offline
    build then bundles it instead of downloading the lock's URL (the hash is checked at
    install either way)."""
    if wheelhouse is None:
        return None
    path = wheelhouse / LOCAL_CHANNEL / package.subdir / package.filename
    return path if path.is_file() else None


def _link_or_copy(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(src, dst)  # same filesystem: instant and no extra space
    except OSError:
        shutil.copyfile(src, dst)  # a new file: the umask's mode


def _installed_pip_lock(lock: lockfiles.LockInput) -> str:
    """The pip lock's text less the pins the base image provides, index credentials removed."""
    text = lock.pip_lock.read_text(encoding="utf-8")
    if lock.base and lock.base.get("from_base"):  # what the base image provides is used from it
        text = locked.without_base_pins(text, lock.base["from_base"])
    return strip_text(text)


def _layer_wheels(layer: layers.Layer, wheelhouse: Path) -> list[Path]:
    entries = [e for e in locked.locked_pip_entries(layer.text) if e.manager == "pip"]
    return [w for w in sorted(wheelhouse.iterdir())
            if w.is_file() and any(locked.wheel_matches(e, w) for e in entries)]


def _fill_pip(ctx: Path, lock: lockfiles.LockInput, pip_layers: list[layers.Layer], wheelhouse: Path | None,
              python_min: str | None) -> None:
    """A pip environment: the venv's plan, and each layer's part of the lock with its wheels."""
    for layer in pip_layers:
        layer_dir = ctx / "layers" / layer.name
        layer_dir.mkdir(parents=True)
        (layer_dir / "requirements.lock").write_text(layer.text, encoding="utf-8")
        for wheel in _layer_wheels(layer, wheelhouse) if wheelhouse is not None else ():
            _link_or_copy(wheel, layer_dir / "wheels" / wheel.name)
    if wheelhouse is not None:  # the installer's own pip, for a base without one
        (ctx / "wheelhouse").mkdir()
        for wheel in sorted(wheelhouse.glob("pip-*.whl")):
            _link_or_copy(wheel, ctx / "wheelhouse" / wheel.name)
    # Only what the venv step needs: any other value here would rebuild every layer.
    plan = {
        "installer": "pip",
        "prefix": render.PREFIX,
        "python_min": python_min,
        "wheelhouse": "wheelhouse" if wheelhouse is not None else None,
        # pip checks hashes when a lock has them; each layer keeps that for its own part
        "require_hashes": locked.has_hashes(lock.pip_lock.read_text(encoding="utf-8")),
    }
    (ctx / "plan.json").write_text(json.dumps(plan, indent=2) + "\n", encoding="utf-8")


def _fill(stage: Path, lock: lockfiles.LockInput, dockerfile: str, wheelhouse: Path | None,
          extra_lock_files: dict[str, str], python_min: str | None,
          pip_layers: list[layers.Layer] | None) -> None:
    ctx = stage / "envbuild"
    (ctx / "image" / "lock").mkdir(parents=True)
    (stage / "Dockerfile").write_text(dockerfile, encoding="utf-8")
    shutil.copyfile(HERE / "install.py", ctx / "install.py")  # new files: the umask's mode, not the package's
    if PROBE_FILE.is_file():
        shutil.copyfile(PROBE_FILE, ctx / "image" / "probe.py")
    for path in lock.files:  # an index URL's credentials stay out of the image
        (ctx / "image" / "lock" / path.name).write_text(strip_text(path.read_text(encoding="utf-8")), encoding="utf-8")
    for name, text in extra_lock_files.items():
        (ctx / "image" / "lock" / name).write_text(text, encoding="utf-8")
    if pip_layers is not None:
        _fill_pip(ctx, lock, pip_layers, wheelhouse, python_min)
        return

    conda = []
    for package in lock.conda:
        entry = {"url": package.url, "sha256": package.sha256, "md5": package.md5, "file": None}
        local = _local_path(package.url) or _in_local_channel(wheelhouse, package)
        if local is not None:  # a build cannot reach the host's files: bundle the archive
            if not local.is_file():
                raise UserError(f"the lock names {package.url}, which does not exist",
                                hint="re-run `envbuild lock` against the channel as it is now")
            entry["file"] = f"pkgs/{package.subdir}/{package.filename}"
            _link_or_copy(local, ctx / entry["file"])
        conda.append(entry)

    pip_lines = list(lock.pip_lines)
    if lock.pip_lock is not None:  # a conda environment's pip section, installed in the same step
        pip_lines += _installed_pip_lock(lock).splitlines()
    if pip_lines:
        (ctx / "pip.lock").write_text(strip_text("\n".join(pip_lines) + "\n"), encoding="utf-8")

    if wheelhouse is not None:
        (ctx / "wheelhouse").mkdir(exist_ok=True)  # the plan names it even when it is empty
        for wheel in sorted(wheelhouse.iterdir()):
            if wheel.is_file() and not wheel.name.startswith("."):
                _link_or_copy(wheel, ctx / "wheelhouse" / wheel.name)

    plan = {
        "installer": lock.installer,
        "prefix": render.PREFIX,
        "rattler": rattler_requirement(),
        "python_min": python_min,
        "conda": conda,
        "pip_lock": "pip.lock" if pip_lines else None,
        "wheelhouse": "wheelhouse" if wheelhouse is not None else None,
    }
    (ctx / "plan.json").write_text(strip_text(json.dumps(plan, indent=2)) + "\n", encoding="utf-8")


def check_output(out: Path, resolution: Resolution, lock_dir: Path, *, force: bool = False) -> None:
    """Refuse `out` before anything is written for it: a folder with files envbuild does not
    own (without `force`), `/`, or one that holds the lock folder."""
    outputs.guard(out, OWNED, force=force, spec_source=resolution.spec.source, lock_dir=lock_dir)


def write_context(out: Path, resolution: Resolution, lock_dir: Path, *, facts: render.MatrixFacts,
                  platform: str | None = None, base: Base | None = None, wheelhouse: Path | None = None,
                  force: bool = False) -> BuildContext:
    """Write the context into `out`, replacing only envbuild's own entries there (a folder
    with other files and no `.envbuild-outputs` record needs `force`). `base` is what FROM
    names (default: the catalog's reference); `facts` what the matrices say about this
    stack (`envbuild.pipeline.context_facts`). The lock folder is only read."""
    stack = resolution.resolved
    if not resolution.usable or stack is None:
        raise UserError("the spec does not resolve, so there is no stack to build",
                        hint="run `envbuild resolve` to see the conflicts and their fixes")
    check_output(out, resolution, lock_dir, force=force)
    platform = platform or stack.platform
    lock = lockfiles.read_lock_dir(lock_dir, platform)
    if wheelhouse is not None and not wheelhouse.is_dir():
        raise UserError("wheelhouse folder does not exist", where=str(wheelhouse))
    # --- locked files: wheelhouse coverage and installed versions ---
    if wheelhouse is not None:
        missing = locked.missing_from_wheelhouse(lock, wheelhouse)
        if missing:
            more = f" and {len(missing) - 3} more" if len(missing) > 3 else ""
            raise UserError(f"the wheelhouse lacks locked file(s) {', '.join(missing[:3])}{more}",
                            where=f"--wheelhouse {wheelhouse}",
                            hint="fill it from the same lock with `envbuild wheelhouse SPEC --lock-dir LOCK -o DIR`")
    installed = tuple(locked.installed_versions(lock, tuple(f.name for f in stack.frameworks)).items())
    cuda = locked.installed_cuda(lock, stack.cuda)
    # --- end locked files ---
    base = base or catalog_base(resolution)
    base_ref, digest = base.ref, base.digest
    pip_layers = None
    if lock.installer == "pip":
        pip_layers = layers.split(_installed_pip_lock(lock), facts.layers, layers.requested(resolution.spec.pip_packages))
    data = render.RenderInput(resolution, lock.installer, base_ref, digest, pip_wheel=has_pip_wheel(wheelhouse),
                              installed=installed, layers=tuple((x.name, layers.describe(x)) for x in pip_layers or ()),
                              wheelhouse=wheelhouse is not None, cuda=cuda, facts=facts)
    dockerfile = render.render(data)
    extra = {}
    if digest:  # the image carries the lock folder's record of this pin (the pipeline wrote it)
        extra.update(_base_record(lock_dir, digest))
    out = Path(os.path.abspath(out))
    with atomic.naming(out):
        stage = outputs.staging(out)
        try:
            _fill(stage, lock, dockerfile, wheelhouse, extra, facts.python_min(lock.installer), pip_layers)
            outputs.replace_owned(out, stage, OWNED, force=force)
        finally:
            shutil.rmtree(stage, ignore_errors=True)
    return BuildContext(out, dockerfile, base_ref, digest, lock.installer, render.final_layers(data),
                        tuple(_layer_summary(out, x) for x in pip_layers or ()))


def _layer_summary(out: Path, layer: layers.Layer) -> dict:
    """A pip layer for `dockerfile --json`: its pins, and the bytes of its wheels when the
    context holds them (an offline build)."""
    wheels = out / "envbuild" / "layers" / layer.name / "wheels"
    size = sum(p.stat().st_size for p in wheels.iterdir()) if wheels.is_dir() else None
    return {"name": layer.name, "packages": {name: version for name, version in layer.pins}, "wheel_bytes": size}


def _base_record(lock_dir: Path, digest: str) -> dict[str, str]:
    """{base-image.json: its text} when the lock folder records the base pinned by `digest`."""
    try:
        text = (lock_dir / folder.BASE_RECORD).read_text(encoding="utf-8")
        pinned = json.loads(text).get("digest")
    except (OSError, ValueError, AttributeError):
        return {}
    return {folder.BASE_RECORD: text} if pinned == digest else {}
