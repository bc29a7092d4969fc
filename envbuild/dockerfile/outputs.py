"""Output folders (`dockerfile -o DIR`, `image --context DIR`): envbuild replaces only the
entries it owns there and never touches anything else.

`.envbuild-outputs` in the folder records the names envbuild wrote (`Dockerfile`,
`envbuild/`). A folder that holds other entries and no record is refused unless `--force`;
even then only envbuild's own names are replaced. Folders that can never be outputs: `/`,
the parent of the spec's folder, and any folder that is or contains the lock folder.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

from envbuild import atomic
from envbuild.errors import UserError

MANIFEST = ".envbuild-outputs"
STAGE = ".envbuild-stage-"


def read_manifest(out: Path) -> list[str] | None:
    try:
        names = json.loads((out / MANIFEST).read_text(encoding="utf-8"))["owned"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not isinstance(names, list) or not all(isinstance(n, str) and n and "/" not in n and n not in (".", "..")
                                              for n in names):
        return None
    return names


def guard(out: Path, owned: tuple[str, ...], *, force: bool, spec_source: str | None,
          lock_dir: Path | None, flag: str = "-o") -> None:
    """Refuse an output folder that envbuild could not write without harming other files."""
    where = f"{flag} {out}"
    target = Path(os.path.abspath(out)).resolve()
    if target == Path(target.anchor):
        raise UserError("the output folder cannot be the filesystem root", where=where, hint="name a folder of its own")
    if spec_source and os.path.isfile(spec_source):
        spec_dir = Path(os.path.abspath(spec_source)).resolve().parent
        if target == spec_dir.parent:
            raise UserError("the output folder cannot be the parent of the spec's folder", where=where,
                            hint="name a folder of its own, e.g. -o build/context")
    if lock_dir is not None:
        lock = Path(os.path.abspath(lock_dir)).resolve()
        if lock == target or target in lock.parents:
            raise UserError(f"the output folder holds the lock folder {lock_dir}", where=where,
                            hint="write the context to a folder of its own, e.g. -o build/context")
    if not target.exists():
        return
    if not target.is_dir():
        raise UserError("exists and is not a folder", where=where, hint="name a folder")
    if read_manifest(target) is not None or force:
        return
    foreign = sorted(p.name for p in target.iterdir() if not p.name.startswith(STAGE))
    if foreign:
        shown = ", ".join(foreign[:3]) + (", ..." if len(foreign) > 3 else "")
        raise UserError(f"the folder holds files envbuild did not write ({shown})", where=where,
                        hint=f"name an empty or new folder, or pass --force to replace only {' and '.join(owned)} there")


def staging(out: Path) -> Path:
    """A fresh staging folder inside `out` (same filesystem, so the moves are renames);
    stale ones of killed runs are removed first."""
    out.mkdir(parents=True, exist_ok=True)
    for stale in out.glob(f"{STAGE}*"):
        pid = stale.name[len(STAGE):].split("-", 1)[0]
        if not pid.isdigit() or not _alive(int(pid)):
            shutil.rmtree(stale, ignore_errors=True)
    try:
        return Path(tempfile.mkdtemp(prefix=f"{STAGE}{os.getpid()}-", dir=out))
    except OSError as exc:  # name the folder the user chose, not the hidden staging folder
        raise OSError(exc.errno, exc.strerror, str(out)) from None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def replace_owned(out: Path, stage: Path, owned: tuple[str, ...]) -> None:
    """Move each owned entry from the finished `stage` into `out`, the old one aside first;
    then remove owned entries of an earlier run that this one no longer writes, and record
    what is owned now. Nothing else in `out` is touched."""
    trash = stage / ".replaced"
    trash.mkdir()
    for name in owned:
        if os.path.lexists(out / name):
            os.replace(out / name, trash / name)
        os.replace(stage / name, out / name)
    for name in read_manifest(out) or ():
        if name not in owned and os.path.lexists(out / name):
            os.replace(out / name, trash / f"old-{name}")
    atomic.write_text(out / MANIFEST, json.dumps({"written_by": "envbuild", "owned": list(owned)}, indent=2) + "\n")
