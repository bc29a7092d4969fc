"""`fleet-images.json`: the image each target of a fleet runs, by reference and digest.

`envbuild image --fleet` writes it (atomically), `verify --fleet --manifest` and
`export KIND --fleet --manifest` read it. Each entry records what the target was when its
image was planned (GPU, MIG profile, driver, platform), so a manifest that no longer
matches the fleet file is refused instead of sending a target an image planned for
another GPU or driver:

    {"envbuild_manifest": 1, "fleet": "fleet.yaml",
     "targets": {"a100": {"image": "REPO:TAG@sha256:...", "reference": "REPO:TAG",
                          "digest": "sha256:...", "plan_item": 1, "verdict": "ok",
                          "target": {"gpu": "A100", "mig": null, "driver": "550.54.15",
                                     "platform": "linux-64"}}}}

A run that builds some targets keeps the entries of the others, and drops those of its
targets whose image failed. Every value read back is checked like a flag would be (names,
image references, digests): they reach job definitions.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envbuild.core import fields
from envbuild.fleet import Target
from envbuild.infra import atomic
from envbuild.infra.errors import UserError

FORMAT = 1
MAX_BYTES = 16 * 1024 * 1024  # thousands of targets fit many times over
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
_FACTS = ("gpu", "mig", "driver", "platform")  # what a target's image was planned for


@dataclass(frozen=True)
class Entry:
    target: str
    reference: str  # repository:content-tag
    digest: str | None  # the pushed manifest digest; None when the image was not pushed
    plan_item: int
    verdict: str
    planned_for: dict[str, str | None]  # the target's _FACTS when its image was planned

    @property
    def image(self) -> str:
        """The reference a job pulls: by digest when there is one."""
        return f"{self.reference}@{self.digest}" if self.digest else self.reference

    def to_json(self) -> dict[str, Any]:
        return {"image": self.image, "reference": self.reference, "digest": self.digest,
                "plan_item": self.plan_item, "verdict": self.verdict, "target": dict(self.planned_for)}


def entry(target: Target, reference: str, digest: str | None, plan_item: int, verdict: str) -> Entry:
    return Entry(target.name, reference, digest, plan_item, verdict, _facts(target))


def _facts(target: Target) -> dict[str, str | None]:
    return {"gpu": target.gpu, "mig": target.mig, "driver": target.driver, "platform": target.platform}


def read(path: str | Path) -> dict[str, Entry]:
    """The entries of a manifest, by target name; bad input (one UserError) otherwise."""
    path = Path(path)
    where = str(path)
    try:
        with path.open("rb") as fh:
            raw = fh.read(MAX_BYTES + 1)
    except FileNotFoundError:
        raise UserError("no such manifest", where=where,
                        hint="write it with `envbuild image SPEC --fleet FLEET --push --manifest FILE`") from None
    except IsADirectoryError:
        raise UserError("is a folder, not a manifest file", where=where) from None
    if len(raw) > MAX_BYTES:
        raise UserError(f"the manifest is larger than {MAX_BYTES // (1024 * 1024)} MiB", where=where,
                        hint="give the fleet-images.json `envbuild image --fleet` wrote")
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise UserError(f"not a JSON file ({type(exc).__name__})", where=where,
                        hint="give the fleet-images.json `envbuild image --fleet` wrote") from None
    if not isinstance(data, dict) or data.get("envbuild_manifest") != FORMAT or not isinstance(data.get("targets"), dict):
        raise UserError("not an envbuild fleet manifest", where=where,
                        hint="give the fleet-images.json `envbuild image --fleet` wrote")
    return {name: _entry(name, body, where) for name, body in data["targets"].items()}


def _entry(name: Any, body: Any, where: str) -> Entry:
    name = fields.dns_label(name, where, "manifest target name")
    if not isinstance(body, dict) or not isinstance(body.get("target"), dict):
        raise UserError(f"the entry of target {name} is malformed", where=where,
                        hint="write the manifest again with `envbuild image --fleet`")
    reference = fields.image_ref(body.get("reference"), where, tag=True, what=f"image reference of target {name}")
    digest = body.get("digest")
    if digest is not None and not (isinstance(digest, str) and _DIGEST.fullmatch(digest)):
        raise UserError(f"the digest of target {name} is malformed", where=where, hint="sha256: and 64 hex digits")
    item = body.get("plan_item")
    if isinstance(item, bool) or not isinstance(item, int) or item < 1:
        raise UserError(f"the plan item of target {name} is malformed", where=where, hint="a whole number from 1")
    facts = body["target"]
    planned = {}
    for key in _FACTS:
        value = facts.get(key)
        if value is not None:
            value = fields.text(value, where, f"target {name}'s {key}", limit=80)
        planned[key] = value
    verdict = body.get("verdict") if body.get("verdict") in ("ok", "unverified") else "ok"
    return Entry(name, reference, digest, item, verdict, planned)


def check_existing(path: str | Path) -> dict[str, Entry]:
    """Before a build: the entries of the manifest already at `path` (kept for the targets
    this run does not build); a file there that is not a manifest is refused, never replaced."""
    path = Path(path)
    if not path.exists():
        if not path.parent.is_dir():
            raise UserError("the folder does not exist", where=f"--manifest {path}", hint="create it, or name another file")
        return {}
    try:
        return read(path)
    except UserError as exc:
        raise UserError(f"{path} exists and is not an envbuild fleet manifest; it is left as it is",
                        where="--manifest", hint=f"name another file ({exc.message})") from None


def write(path: str | Path, kept: dict[str, Entry], entries: list[Entry], *, fleet: str,
          dropped: set[str] = frozenset()) -> None:
    """`kept` (an earlier manifest's entries) updated with `entries`, without `dropped`
    (targets of this run whose image failed), written atomically."""
    merged = {name: e for name, e in kept.items() if name not in dropped}
    merged.update({e.target: e for e in entries})
    data = {"envbuild_manifest": FORMAT, "fleet": fleet,
            "targets": {name: merged[name].to_json() for name in sorted(merged)}}
    atomic.write_text(path, json.dumps(data, indent=2) + "\n")


def images_for(path: str | Path, targets: tuple[Target, ...], fleet: tuple[Target, ...]) -> dict[str, Entry]:
    """The entry of each of `targets` (selected from the fleet `fleet`): bad input when one
    is missing, when one was planned for another GPU, MIG profile, driver or platform than
    the fleet now says, or when the manifest names targets the fleet does not have."""
    entries = read(path)
    known = {t.name for t in fleet}
    strangers = [name for name in entries if name not in known]
    if strangers:
        raise UserError(f"the manifest names target {strangers[0]!r}, which the fleet does not have", where=str(path),
                        hint="was it written for another fleet file? build again with `envbuild image SPEC --fleet FLEET`")
    out = {}
    for t in targets:
        found = entries.get(t.name)
        if found is None:
            raise UserError(f"target {t.name} is not in the manifest", where=str(path),
                            hint=f"build its image: `envbuild image SPEC --fleet FLEET --target {t.name} --push "
                                 f"--manifest {path}` (a failed image leaves its targets out)")
        now = _facts(t)
        changed = [k for k in _FACTS if found.planned_for.get(k) != now[k]]
        if changed:
            key = changed[0]
            raise UserError(f"the manifest does not match the fleet: target {t.name}'s image was planned for "
                            f"{key} {found.planned_for.get(key)}, the fleet now says {now[key]}", where=str(path),
                            hint="plan and build again: `envbuild image SPEC --fleet FLEET --push`")
        out[t.name] = found
    return out
