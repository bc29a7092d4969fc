"""What a lock records about its inputs, so `envbuild lock --check` can tell when it no
longer matches: the spec hash, the matrix data version and a hash of the resolved stack
(plus the stack itself, for readers such as the Dockerfile renderer)."""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Sequence

from envbuild import __version__
from envbuild.core.model import Resolution, sha256_json, to_jsonable

PREFIX = "envbuild."


@dataclass(frozen=True)
class Stamp:
    """What a lock was made from (spec, matrices, resolved stack, platforms), to tell when it is stale."""

    spec_hash: str
    matrix_version: str
    resolved_hash: str
    platforms: tuple[str, ...]

    def fields(self) -> dict[str, str]:
        return {
            "spec_hash": self.spec_hash,
            "matrix_version": self.matrix_version,
            "resolved_hash": self.resolved_hash,
            "platforms": ",".join(self.platforms),
        }

    def differences(self, found: dict[str, str]) -> list[str]:
        """Human lines for every field where `found` (read from a lock) differs."""
        lines = []
        labels = {"spec_hash": "the spec changed", "matrix_version": "the matrix data changed",
                  "resolved_hash": "the resolved stack changed", "platforms": "the platforms changed"}
        for key, expected in self.fields().items():
            actual = found.get(key)
            if actual != expected:
                lines.append(f"{labels[key]} (lock has {key}={actual or 'nothing'}, now {expected})")
        return lines


def stamp_for(resolutions: "Sequence[Resolution]", platforms: tuple[str, ...]) -> Stamp:
    """The stamp of a lock of `platforms`, each locked from its own resolution (same order).
    The spec is hashed as the lock's (its platform the first locked one, its platforms the
    locked ones), so that a command that picks another of them (`image --platform`) finds
    the same lock current; one platform's stack is hashed alone, as it always was."""
    spec = dataclasses.replace(resolutions[0].spec, platform=platforms[0],
                               platforms=tuple(platforms) if len(platforms) > 1 else ())
    stacks = [to_jsonable(r.resolved) for r in resolutions]
    return Stamp(
        spec_hash=spec.hash(),
        matrix_version=resolutions[0].matrix_version,
        resolved_hash=sha256_json(stacks[0] if len(stacks) == 1 else stacks),
        platforms=tuple(platforms),
    )


def custom_metadata(stamp: Stamp, resolution: Resolution, virtual: dict[str, str]) -> dict[str, str]:
    """conda-lock's LockMeta.custom_metadata is a str -> str mapping; JSON goes in as text."""
    data = {PREFIX + key: value for key, value in stamp.fields().items()}
    data[PREFIX + "version"] = __version__
    data[PREFIX + "resolved"] = json.dumps(to_jsonable(resolution.resolved), sort_keys=True, separators=(",", ":"))
    for platform, packages in virtual.items():
        data[f"{PREFIX}virtual_packages.{platform}"] = packages
    return data


def read_custom_metadata(data: dict[str, str] | None) -> dict[str, str]:
    return {k[len(PREFIX):]: v for k, v in (data or {}).items() if k.startswith(PREFIX)}
