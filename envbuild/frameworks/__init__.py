"""The frameworks envbuild knows, one plugin module each (`envbuild/frameworks/<name>.py`).

Everything envbuild knows about one framework (the names people write for it, where its
matrix rows live, how a row becomes installable builds and pins, which base images carry
it, how the lock tells its GPU build from its CPU build, how `envbuild matrix` shows it)
is in that module, as hooks of `envbuild.frameworks.base.Framework`. Generic code asks
the plugin instead of testing the framework's name.

A plugin is found by being there: every module of this package that defines `PLUGIN` is
one, so a new framework is its module (and its matrix file), nothing else.
"""
from __future__ import annotations

import functools
import importlib
import pkgutil

from envbuild.core.versions import LocalLabel, read_local_label
from envbuild.frameworks.base import Framework


@functools.lru_cache(maxsize=1)
def _plugins() -> dict[str, Framework]:
    """Canonical name -> plugin, in the order envbuild lists them (`Framework.order`)."""
    found = []
    for module in pkgutil.iter_modules(__path__):
        if module.name.startswith("_"):  # __main__: the schema writer, not a framework
            continue
        plugin = getattr(importlib.import_module(f"{__name__}.{module.name}"), "PLUGIN", None)
        if plugin is not None:
            found.append(plugin)
    return {p.name: p for p in sorted(found, key=lambda p: (p.order, p.name))}


def names() -> tuple[str, ...]:
    return tuple(_plugins())


def get(name: str) -> Framework:
    """The plugin of canonical framework `name` (KeyError if envbuild does not know it)."""
    return _plugins()[name]


def all() -> tuple[Framework, ...]:  # noqa: A001 - the registry's own vocabulary: frameworks.all()
    return tuple(_plugins().values())


@functools.lru_cache(maxsize=1)
def aliases() -> dict[str, str]:
    """Every name people write for a framework (lower case) -> its canonical name."""
    return {alias: p.name for p in all() for alias in (p.name, *p.spelling.aliases)}


def read_label(label: str) -> LocalLabel:
    """What a pip local label says: a framework's own convention (jaxlib's `cuda11.cudnn86`),
    else the common ones (`cu121`, `cpu`, `rocm5.6`; anything else is `unknown`)."""
    for plugin in all():
        found = plugin.spelling.read_label(label)
        if found is not None:
            return found
    return read_local_label(label)
