"""The frameworks envbuild knows, one plugin module each (`envbuild/frameworks/<name>.py`).

Everything envbuild knows about one framework (the names people write for it, where its
matrix rows live, how a row becomes installable builds and pins, which base images carry
it, how the lock tells its GPU build from its CPU build, how `envbuild matrix` shows it)
is in that module, as hooks of `envbuild.frameworks.base.Framework`. Generic code asks
the plugin instead of testing the framework's name.

A plugin is imported on first use, so naming the frameworks costs nothing.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

# Canonical names, in the order envbuild lists them; each is a module of this package.
from envbuild.core.model import FRAMEWORKS as _NAMES

if TYPE_CHECKING:
    from envbuild.frameworks.base import Framework

_plugins: dict[str, Framework] = {}
_aliases: dict[str, str] = {}


def names() -> tuple[str, ...]:
    return _NAMES


def get(name: str) -> Framework:
    """The plugin of canonical framework `name` (KeyError if envbuild does not know it)."""
    found = _plugins.get(name)
    if found is None:
        if name not in _NAMES:
            raise KeyError(name)
        found = _plugins[name] = importlib.import_module(f"{__name__}.{name}").PLUGIN
    return found


def all() -> tuple[Framework, ...]:  # noqa: A001 - the registry's own vocabulary: frameworks.all()
    return tuple(get(n) for n in _NAMES)


def aliases() -> dict[str, str]:
    """Every name people write for a framework (lower case) -> its canonical name."""
    if not _aliases:
        for plugin in all():
            for alias in (plugin.name, *plugin.aliases):
                _aliases[alias] = plugin.name
    return _aliases
