"""The layers of a pip environment's image, split by how often they change.

The Docker layer cache keys a step on its instruction and the files it copies in, and a
registry keeps a layer by its digest. So each layer of the environment is installed in a
build stage of its own, from its own part of the lock (the lock's options and its pins with
their hashes) and only the wheels those pins name: changing or adding a small package
changes the inputs of one small layer, and the gigabytes of CUDA and framework wheels are
neither installed, pushed nor pulled again.

The order, first to last:
1. the layers of the `layers` table of matrices/packages.yaml (CUDA wheels, frameworks),
   handed in by the caller as (name, patterns) pairs;
2. `dependencies`: every other pin the spec does not ask for by name;
3. `package-1`, `package-2`, ...: each package the spec asks for by name, one per layer
   (at most MAX_PACKAGE_LAYERS; past that they join the dependencies).
Each layer lies on the venv alone (`--root` install in its own stage, see install.py), so
a change to one layer leaves the others byte-identical, wherever they are in the order.
"""
from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass

from envbuild.dockerfile.locked import lock_entries, normalize

# Every layer costs the build a stage (a container start) and a pull a blob to fetch; Docker
# refuses an image of more than 127 layers. Ten covers the packages a spec usually names.
MAX_PACKAGE_LAYERS = 10
DEPENDENCIES = "dependencies"
PACKAGE = "package"  # package-1, package-2, ...
_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


@dataclass(frozen=True)
class Layer:
    name: str  # the build stage is `layer-<name>`; its files are envbuild/layers/<name>/
    pins: tuple[tuple[str, str | None], ...]  # (PEP 503 name, version; None for `name @ URL`)
    text: str  # its requirements file: the lock's options, then its pins with their hashes


def requested(pip_packages: tuple[str, ...]) -> tuple[str, ...]:
    """The PEP 503 names of the packages a spec asks for (`einops==0.8.0` -> einops)."""
    names = []
    for text in pip_packages:
        found = _NAME.match(text)
        if found and normalize(found[1]) not in names:
            names.append(normalize(found[1]))
    return tuple(names)


def split(text: str, table: tuple[tuple[str, tuple[str, ...]], ...], asked: tuple[str, ...]) -> list[Layer]:
    """The layers of the pip lock `text` (the pins the image installs), in image order,
    empty ones left out. `table`: (layer, name patterns) from matrices/packages.yaml;
    `asked`: the names the spec asks for, in its order."""
    own = {name: f"{PACKAGE}-{i}" for i, name in enumerate(asked[:MAX_PACKAGE_LAYERS], 1)}
    options, groups = [], {}
    for name, version, lines in lock_entries(text):
        if name is None:  # options (index URLs) go to every layer; comments to none
            if lines[0].lstrip().startswith("-"):
                options.extend(lines)
            continue
        layer = next((layer for layer, patterns in table if any(fnmatch.fnmatchcase(name, p) for p in patterns)),
                     None) or own.get(name, DEPENDENCIES)
        groups.setdefault(layer, []).append((name, version, lines))
    order = [layer for layer, _ in table] + [DEPENDENCIES] + sorted(set(own.values()), key=_package_number)
    return [Layer(layer, tuple((n, v) for n, v, _ in groups[layer]),
                  "\n".join(options + [line for *_, lines in groups[layer] for line in lines]) + "\n")
            for layer in order if layer in groups]


def _package_number(layer: str) -> int:
    return int(layer.rsplit("-", 1)[1])


def describe(layer: Layer, shown: int = 4) -> str:
    """`einops 0.8.0`, or `14 pins: nvidia-cublas-cu12 12.8.4.1, ...` for the Dockerfile's comment."""
    names = [f"{name} {version}" if version else name for name, version in layer.pins]
    listed = ", ".join(names[:shown]) + (", ..." if len(names) > shown else "")
    return listed if len(names) == 1 else f"{len(names)} pins: {listed}"
