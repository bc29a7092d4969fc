"""The compatibility matrices: YAML data in `matrices/`, loaded into typed tables.

Each YAML file holds one or more tables, each a list of rows whose keys are the
fields of one dataclass in `envbuild.matrix.tables`. Loading is generic: a row with
an unknown key or without a `source` is an error in the data, reported with its file
and row number.

A file no table here claims is a framework's: `<framework>.yaml`, one list of rows
whose type its plugin declares (`envbuild/frameworks/<framework>.py`). Those rows are
kept as the file states them (`Matrices.framework_rows`) and typed by the plugin with
`typed_rows`, so that adding a framework changes nothing here.

The YAML is the source; commands read a compiled copy. `python -m envbuild.matrix`
checks the YAML files and writes their tables, with the GPU name index, to
`envbuild/data/matrices.json` (package data, committed; a test holds it equal to the
YAML), and `load()` reads that file: plain JSON, read in a few milliseconds where the
YAML takes a fifth of a second to parse. Edit the YAML, then run the command.
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import yaml

from envbuild.core.model import GPU_HOST_PLATFORMS
from envbuild.infra.paths import COMPILED_MATRICES, MATRICES_DIR, compiled_matrices
from envbuild.matrix import tables as t
from envbuild.matrix.gpu_match import GpuIndex, build_index

T = TypeVar("T")

# Bump when the meaning of a table changes, so that lockfiles and image tags made
# with older data are recognised as stale.
SCHEMA_VERSION = 1


# attribute name -> (file, table key in that file, row type)
TABLES: dict[str, tuple[str, str, type]] = {
    "cuda_releases": ("cuda_driver.yaml", "releases", t.CudaRelease),
    "minor_compat": ("cuda_driver.yaml", "minor_version_compatibility", t.MinorCompat),
    "driver_architectures": ("cuda_driver.yaml", "architectures", t.DriverArchitecture),
    "gpus": ("gpus.yaml", "gpus", t.Gpu),
    "cuda_arch": ("cuda_arch.yaml", "toolkits", t.CudaArchSupport),
    "base_images": ("base_images.yaml", "images", t.BaseImage),
    "base_families": ("base_images.yaml", "families", t.BaseFamily),
    "distribution_pythons": ("base_images.yaml", "distribution_python", t.DistributionPython),
    "installer_pythons": ("base_images.yaml", "installer_python", t.InstallerPython),
    "image_env": ("base_images.yaml", "image_env", t.ImageEnv),
    "base_carries": ("base_images.yaml", "base_carries", t.BaseCarries),
    "gpu_peak": ("gpu_peak.yaml", "peaks", t.GpuPeak),
    "family_rules": ("family_rules.yaml", "rules", t.FamilyRule),
    "wheels": ("wheels.yaml", "releases", t.WheelRelease),
    "lock_proofs": ("lockable.yaml", "rows", t.LockProof),
    "mig_floors": ("mig.yaml", "floors", t.MigFloor),
    "mig_profiles": ("mig.yaml", "profiles", t.MigProfile),
    "cloud_instances": ("cloud_instances.yaml", "instances", t.CloudInstance),
    "pythons": ("pythons.yaml", "releases", t.PythonRelease),
    "packages": ("packages.yaml", "packages", t.Package),
    "image_layers": ("packages.yaml", "layers", t.ImageLayer),
    "target_glibc": ("lock_targets.yaml", "glibc", t.TargetGlibc),
    "target_defaults": ("lock_targets.yaml", "defaults", t.TargetDefaults),
    "target_archspec": ("lock_targets.yaml", "archspec", t.TargetArchspec),
}


class MatrixError(Exception):
    """The matrix data itself is broken (a bug in `matrices/`, not in the user's input)."""


@dataclasses.dataclass(frozen=True)
class Matrices:
    """Every matrix table, loaded and checked once, with the data version."""

    version: str  # content hash of the data files plus SCHEMA_VERSION: the "data version"
    cuda_releases: tuple[t.CudaRelease, ...] = ()
    minor_compat: tuple[t.MinorCompat, ...] = ()
    driver_architectures: tuple[t.DriverArchitecture, ...] = ()
    gpus: tuple[t.Gpu, ...] = ()
    cuda_arch: tuple[t.CudaArchSupport, ...] = ()
    base_images: tuple[t.BaseImage, ...] = ()
    base_families: tuple[t.BaseFamily, ...] = ()
    distribution_pythons: tuple[t.DistributionPython, ...] = ()
    installer_pythons: tuple[t.InstallerPython, ...] = ()
    image_env: tuple[t.ImageEnv, ...] = ()
    base_carries: tuple[t.BaseCarries, ...] = ()
    gpu_peak: tuple[t.GpuPeak, ...] = ()
    wheels: tuple[t.WheelRelease, ...] = ()
    lock_proofs: tuple[t.LockProof, ...] = ()
    mig_floors: tuple[t.MigFloor, ...] = ()
    mig_profiles: tuple[t.MigProfile, ...] = ()
    cloud_instances: tuple[t.CloudInstance, ...] = ()
    # name -> row lookup of `gpus`, compiled with the data (GpuIndex)
    gpu_index: Any = dataclasses.field(default=None, compare=False, repr=False)
    family_rules: tuple[t.FamilyRule, ...] = ()
    pythons: tuple[t.PythonRelease, ...] = ()
    packages: tuple[t.Package, ...] = ()
    image_layers: tuple[t.ImageLayer, ...] = ()
    target_glibc: tuple[t.TargetGlibc, ...] = ()
    target_defaults: tuple[t.TargetDefaults, ...] = ()
    target_archspec: tuple[t.TargetArchspec, ...] = ()
    # each framework's table (matrices/<framework>.yaml) as the file states it: framework ->
    # (file, key, rows as field mappings); its plugin types the rows (`typed_rows`)
    framework_rows: dict[str, tuple[str, str, tuple[dict[str, Any], ...]]] = dataclasses.field(
        default_factory=dict, compare=False, repr=False)
    # Not from the files: the row of the one base image a spec names outside the catalog
    # (or with facts stated about it), added for that resolve (envbuild.resolver.named_base)
    named_base: t.BaseImage | None = None
    # What code derives from these tables (the resolver's index, the GPU look-ups), each
    # made on first use and kept with the tables it came from (`derived`). Not data: a copy
    # made with `dataclasses.replace` (a named base image added) starts without any.
    _derived: dict[Callable[[Matrices], Any], Any] = dataclasses.field(
        default_factory=dict, init=False, compare=False, repr=False)

    def derived(self, make: Callable[[Matrices], T]) -> T:
        """`make(self)`, made once for these tables. `make` is a module-level function or
        class (it is the key: each place that derives something passes the same one)."""
        found = self._derived.get(make)
        if found is None:
            found = self._derived[make] = make(self)
        return found


def _freeze(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, dict):  # a mapping field is kept as ((key, value), ...), like the lists
        return tuple((k, _freeze(v)) for k, v in value.items())
    return value


@functools.lru_cache(maxsize=None)
def _field_names(row_type: type) -> frozenset[str]:
    return frozenset(f.name for f in dataclasses.fields(row_type))


def _row(row_type: type, raw: Any, where: str):
    if not isinstance(raw, dict):
        raise MatrixError(f"{where}: a row must be a mapping")
    names = _field_names(row_type)
    unknown = sorted(set(raw) - names - {"note", "notes"})
    if unknown:
        raise MatrixError(f"{where}: unknown field(s) {', '.join(unknown)} for {row_type.__name__}")
    if not raw.get("source") and not raw.get("reason"):
        raise MatrixError(f"{where}: every row needs a source (or, for envbuild's own decision, a reason)")
    values = {k: _freeze(v) for k, v in raw.items() if k in names}
    try:
        return row_type(**values)
    except TypeError as exc:
        raise MatrixError(f"{where}: {exc}") from None


def _framework_table(filename: str, document: Any) -> tuple[str, tuple[dict[str, Any], ...]]:
    """(key, rows) of a framework's file: one list of rows, each with its source, its
    notes left out and its lists frozen as the typed tables hold them."""
    lists = [key for key, value in document.items() if isinstance(value, list)] if isinstance(document, dict) else []
    if len(lists) != 1:
        raise MatrixError(f"{filename}: a framework's file holds one list of rows (found {len(lists)})")
    key = lists[0]
    rows = []
    for i, raw in enumerate(document[key]):
        if not isinstance(raw, dict):
            raise MatrixError(f"{filename}:{key}[{i}]: a row must be a mapping")
        if not raw.get("source") and not raw.get("reason"):
            raise MatrixError(f"{filename}:{key}[{i}]: every row needs a source (or, for envbuild's own decision, "
                              f"a reason)")
        rows.append({k: _freeze(v) for k, v in raw.items() if k not in ("note", "notes")})
    return key, tuple(rows)


def typed_rows(m: Matrices, framework: str, row_type: type) -> tuple:
    """Framework `framework`'s rows as `row_type` (its plugin's row type); a field the
    type lacks is an error in the data, with its file and row number."""
    filename, key, rows = m.framework_rows.get(framework, (f"{framework}.yaml", "", ()))
    return tuple(_row(row_type, raw, f"{filename}:{key}[{i}]") for i, raw in enumerate(rows))


def _read_files(directory: Path) -> tuple[str, dict[str, bytes]]:
    digest = hashlib.sha256(f"schema={SCHEMA_VERSION}".encode())
    files: dict[str, bytes] = {}
    for path in sorted(directory.glob("*.yaml")):
        files[path.name] = path.read_bytes()
        digest.update(path.name.encode() + b"\0" + files[path.name])
    return digest.hexdigest()[:12], files


def _parse(version: str, files: dict[str, bytes]) -> Matrices:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    documents: dict[str, dict] = {}
    for name, text in files.items():
        try:
            documents[name] = yaml.load(text, Loader=loader) or {}
        except yaml.YAMLError as exc:
            raise MatrixError(f"{name}: {exc}") from None
    tables: dict[str, tuple] = {}
    for attr, (filename, key, row_type) in TABLES.items():
        rows = documents.get(filename, {}).get(key) or []
        tables[attr] = tuple(_row(row_type, raw, f"{filename}:{key}[{i}]") for i, raw in enumerate(rows))
    tables["base_images"] = _with_distribution_python(tables["base_images"], tables["distribution_pythons"])
    _check_every_os_has_glibc(tables)
    _check_gpu_host_platforms(tables["gpus"])
    _check_image_layers(tables["image_layers"])
    shared = {filename for filename, _, _ in TABLES.values()}
    framework_rows = {name.removesuffix(".yaml"): (name, *_framework_table(name, document))
                      for name, document in documents.items() if name not in shared}
    return Matrices(version=version, **tables, framework_rows=framework_rows,
                    gpu_index=build_index(version, tables["gpus"]))


def _check_every_os_has_glibc(tables: dict[str, tuple]) -> None:
    """A lock states the target's C library (__glibc) from the base image's OS; an OS
    without a glibc row would silently be locked for the default floor instead, so such
    data does not load."""
    known = {row.os for row in tables["target_glibc"]}
    for table in ("base_images", "distribution_pythons"):
        filename, key, _ = TABLES[table]
        for i, row in enumerate(tables[table]):
            if row.os and row.os not in known:
                raise MatrixError(f"{filename}:{key}[{i}]: OS {row.os!r} has no glibc row in lock_targets.yaml "
                                  f"(add its glibc with a source, so that locks for it state the right __glibc)")


def _check_gpu_host_platforms(gpus: tuple) -> None:
    """A host platform the resolver does not know (`linux-arm64` for `linux-aarch64`) would
    match no spec, so every build would be refused on that GPU: such data does not load."""
    filename, key, _ = TABLES["gpus"]
    for i, row in enumerate(gpus):
        if not isinstance(row.host_platforms, tuple):  # a bare string: `in` would test its substrings
            raise MatrixError(f"{filename}:{key}[{i}]: host_platforms of {row.name} must be a list, "
                              f"e.g. ['linux-aarch64']")
        unknown = [p for p in row.host_platforms if p not in GPU_HOST_PLATFORMS]
        if unknown:
            raise MatrixError(f"{filename}:{key}[{i}]: unknown host platform(s) {', '.join(map(repr, unknown))} "
                              f"for {row.name} (host_platforms is a list of: {', '.join(GPU_HOST_PLATFORMS)})")


# A layer's name becomes part of a build stage's name in the Dockerfile: only these characters,
# and none of the names envbuild/dockerfile/layers.py gives the layers it adds after the table's.
LAYER_NAME = r"[a-z][a-z0-9]*(-[a-z0-9]+)*"
RESERVED_LAYERS = ("environment", "dependencies", "package")


def _check_image_layers(layers: tuple) -> None:
    """A layer name is a Dockerfile stage name and must not clash with the layers envbuild
    adds after the table's; its patterns are a list (a bare string would be matched per
    character)."""
    filename, key, _ = TABLES["image_layers"]
    seen = set()
    for i, row in enumerate(layers):
        if not re.fullmatch(LAYER_NAME, row.layer) or row.layer in RESERVED_LAYERS or row.layer in seen:
            raise MatrixError(f"{filename}:{key}[{i}]: layer name {row.layer!r} must be unique, lower-case letters, "
                              f"digits and dashes, and none of {', '.join(RESERVED_LAYERS)}")
        seen.add(row.layer)
        if not isinstance(row.packages, tuple) or not row.packages:
            raise MatrixError(f"{filename}:{key}[{i}]: packages of layer {row.layer} must be a list of name "
                              f"patterns, e.g. ['nvidia-*']")


def _with_distribution_python(images: tuple, pythons: tuple) -> tuple:
    """An OS-only base (no framework, no Python of its own) runs the python3 of its
    distribution: the Dockerfile installs it from the OS archive."""
    by_os = {p.os: p for p in pythons}
    out = []
    for image in images:
        found = by_os.get(image.os) if image.python is None and image.framework is None else None
        if found is not None:
            image = dataclasses.replace(image, python=found.python, python_source=found.source)
        out.append(image)
    return tuple(out)


def load_from(directory: Path) -> Matrices:
    """Read, check and type the tables of the YAML files in `directory` (with the GPU name
    index). Parsing ~10k lines of YAML takes ~0.2 s: commands read the compiled copy
    (`load()`); this is for compiling it, for tests and for `matrix refresh --data`."""
    version, files = _read_files(directory)
    return _parse(version, files)


# --- the compiled copy: envbuild/data/matrices.json -----------------------------------------
def to_json(m: Matrices) -> str:
    """The tables as the compiled file holds them: a row per line with the fields that differ
    from their defaults, so that a change to the YAML is a change to a few lines here."""
    lines = ["{", f'"version": {json.dumps(m.version)},', '"tables": {']
    for attr, (_, _, row_type) in TABLES.items():
        rows = [_json_line(_changed_fields(row)) for row in getattr(m, attr)]
        lines.append(f"{json.dumps(attr)}: [")
        lines.extend(f"{row}," for row in rows[:-1])
        lines.extend(rows[-1:])
        lines.append("],")
    lines[-1] = "]"
    lines += ["},", '"frameworks": {']
    for name, (filename, key, rows) in m.framework_rows.items():
        lines.append(f'{json.dumps(name)}: {{"file": {json.dumps(filename)}, "key": {json.dumps(key)}, "rows": [')
        lines.extend(f"{_json_line(row)}," for row in rows[:-1])
        lines.extend(_json_line(row) for row in rows[-1:])
        lines.append("]},")
    lines[-1] = lines[-1].rstrip(",")
    index = dataclasses.asdict(m.gpu_index)
    lines += ["},", '"gpu_index": {']
    lines.extend(f"{json.dumps(key)}: {_json_line(value)}," for key, value in index.items())
    lines[-1] = lines[-1].rstrip(",")
    lines += ["}", "}", ""]
    return "\n".join(lines)


def _changed_fields(row: t.Row) -> dict[str, Any]:
    out = {}
    for f in dataclasses.fields(row):
        value = getattr(row, f.name)
        if value != f.default or type(value) is not type(f.default):
            out[f.name] = value
    return out


def _json_line(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def from_json(data: dict) -> Matrices:
    """The Matrices the compiled file holds (`json.loads` of it; lists become the tables' tuples)."""
    tables = {attr: tuple(row_type(**{k: _tuples(v) if type(v) is list else v for k, v in row.items()})
                          for row in data["tables"][attr])
              for attr, (_, _, row_type) in TABLES.items()}
    framework_rows = {name: (table["file"], table["key"],
                             tuple({k: _tuples(v) if type(v) is list else v for k, v in row.items()} for row in table["rows"]))
                      for name, table in data["frameworks"].items()}
    index = data["gpu_index"]
    gpu_index = GpuIndex(**{k: {key: _tuples(rows) if type(rows) is list else rows for key, rows in v.items()}
                            if isinstance(v, dict) else v for k, v in index.items()})
    return Matrices(version=data["version"], **tables, framework_rows=framework_rows, gpu_index=gpu_index)


def _tuples(value: list) -> tuple:
    return tuple([_tuples(v) if type(v) is list else v for v in value])


def compile_matrices(directory: Path = MATRICES_DIR, target: Path = COMPILED_MATRICES) -> bool:
    """Write the compiled copy of the YAML in `directory` (by default the bundled data) to
    `target`; False when it was current already."""
    text = to_json(load_from(directory))
    if target.is_file() and target.read_text(encoding="utf-8") == text:
        return False
    target.write_text(text, encoding="utf-8")
    return True


@functools.lru_cache(maxsize=None)
def load() -> Matrices:
    """The matrices envbuild ships, as compiled from `matrices/` (see `python -m envbuild.matrix`)."""
    return from_json(compiled_matrices())
