"""pylock.toml (PEP 751, the packaging specification "pylock.toml"): the pip lock in the
standard format that uv (`uv pip sync pylock.toml`) and other installers read.

It holds what requirements.lock holds, from the same resolution: every pinned package with
each of its files the target can install (URL, size, upload time, sha256). The target is
stated as data an installer checks, not as a comment: `requires-python` is the target's
CPython (`==3.10.*`) and `environments` the marker of its platform (Linux on x86_64 or on
aarch64), so an installer refuses the file on another Python or machine. What the lock
was made from (the stamp `lock --check` compares) is kept under `[tool.envbuild]`.

One file per platform, named like the pip locks (`envbuild.lock.folder.pylock_name`):
`pylock.toml` for the first platform, `pylock.<platform>.toml` for each further one.
"""
from __future__ import annotations

import tomllib

import tomlkit

from envbuild.infra.urls import strip_credentials
from envbuild.lock.metadata import Stamp
from envbuild.lock.pip_lock import SOURCES_NOTE, PinFile, PipLock, PipPin
from envbuild.lock.pip_tags import machine_for

LOCK_VERSION = "1.0"


def environment_marker(platform: str) -> str:
    """The PEP 508 marker of a Linux machine of `platform` running CPython."""
    return (f"sys_platform == 'linux' and platform_machine == '{machine_for(platform)}' "
            "and platform_python_implementation == 'CPython'")


def _file_table(file: PinFile):
    table = tomlkit.inline_table()
    table["url"] = strip_credentials(file.url)
    if file.upload_time is not None:
        table["upload-time"] = file.upload_time
    if file.size is not None:
        table["size"] = file.size
    table["hashes"] = {"sha256": file.sha256}
    return table


def _package(pin: PipPin):
    package = tomlkit.table()
    package["name"] = pin.name
    if pin.version:
        package["version"] = pin.version
    wheels = [f for f in pin.files if f.kind == "wheel"]
    if wheels:
        array = tomlkit.array()
        array.extend(_file_table(f) for f in wheels)
        package["wheels"] = array.multiline(True)
    for kind in ("sdist", "archive"):
        for file in (f for f in pin.files if f.kind == kind):
            package[kind] = _file_table(file)
    return package


def render(lock: PipLock, stamp: Stamp, name: str) -> str:
    """The pylock.toml of a hashed pip lock (PEP 751 wants a hash of every file)."""
    request = lock.request
    document = tomlkit.document()
    document.add(tomlkit.comment(f"PEP 751 lock written by `envbuild lock`; do not edit. Install: uv pip sync {name}"))
    document.add(tomlkit.comment(f"Target: {request.platform}, CPython {request.python}."))
    for line in SOURCES_NOTE:
        document.add(tomlkit.comment(line))
    document["lock-version"] = LOCK_VERSION
    document["environments"] = [environment_marker(request.platform)]
    document["requires-python"] = f"=={request.python}.*"
    document["created-by"] = "envbuild"
    packages = tomlkit.aot()
    for pin in lock.pins:
        packages.append(_package(pin))
    document["packages"] = packages
    tool = tomlkit.table()
    tool.update(stamp.fields())
    tool["indexes"] = [strip_credentials(u) for u in request.indexes]
    tool["glibc"] = request.glibc
    document["tool"] = {"envbuild": tool}
    return tomlkit.dumps(document)


def read_stamp(text: str) -> dict[str, str]:
    """The `[tool.envbuild]` stamp of a pylock.toml written by `render` ({} when unreadable)."""
    try:
        tool = tomllib.loads(text).get("tool", {}).get("envbuild", {})
    except tomllib.TOMLDecodeError:
        return {}
    return {key: value for key, value in tool.items() if isinstance(value, str)} if isinstance(tool, dict) else {}
