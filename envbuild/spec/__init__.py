"""Reading a spec: parse (YAML -> raw mapping with positions) then validate (-> `Spec`).

Completion (choosing what the spec leaves open) is the resolver's job, not this package's.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from envbuild.core.model import Spec
from envbuild.infra.errors import UserError
from envbuild.spec.parse import RawSpec, parse_text, read_spec_file
from envbuild.spec.validate import GpuCheck, validate_raw

__all__ = ["load_spec", "spec_from_mapping", "spec_from_text", "RawSpec"]


def load_spec(path: str | Path, gpu_check: GpuCheck | None = None) -> Spec:
    """Read, parse and validate a spec file; bad input raises `UserError`. GPU names are
    checked against `gpu_check` (envbuild.matrix.lookup.spec_gpu_check) when given."""
    return validate_raw(read_spec_file(path), gpu_check)


def spec_from_text(text: str, source: str | None = None, gpu_check: GpuCheck | None = None) -> Spec:
    return validate_raw(parse_text(text, source), gpu_check)


def spec_from_mapping(data: Any, source: str | None = None, gpu_check: GpuCheck | None = None) -> Spec:
    """Validate an already-loaded mapping (no line numbers: messages name the key path)."""
    if not isinstance(data, dict):
        raise UserError("a spec must be a mapping of keys", where=source or "spec")
    return validate_raw(RawSpec(data=dict(data), source=source), gpu_check)
