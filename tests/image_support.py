"""Test material for the Dockerfile and image tests: a tiny conda channel with real
package archives (indexed with py-rattler), lock folders in `envbuild lock`'s formats,
and Resolution objects for each base family."""
from __future__ import annotations

import asyncio
import hashlib
import io
import json
import tarfile
import uuid
from pathlib import Path

from envbuild.core.model import (BaseImageChoice, FrameworkRequest, Resolution, ResolvedFramework, ResolvedGpu,
                            ResolvedStack, Spec)

# Repositories of this test run live under this name, so that the run removes exactly the
# images it made (conftest) even while other runs use the same engine.
RUN = uuid.uuid4().hex[:8]
TEST_NAMESPACE = f"envbuild-tests/{RUN}"

# Real references, one per family (the recipes' bases); tests map them onto the local
# registry with --registry-mirror.
FAMILY_BASES = {
    "cuda": ("nvidia/cuda:12.4.1-runtime-ubuntu22.04", "runtime", "12.4"),
    "pytorch": ("pytorch/pytorch:2.3.1-cuda12.1-cudnn8-runtime", "runtime", "12.1"),
    "rapids": ("rapidsai/base:24.04-cuda12.2-py3.11", None, "12.2"),
    "tensorflow": ("tensorflow/tensorflow:2.15.0-gpu", None, "12.2"),
    "dlc": ("763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.3.0-gpu-py311-cu121-ubuntu20.04-ec2",
            None, "12.1"),
    # a team's own base outside the catalog
    "custom": ("registry.example.com/acme/ml-base:2024.1", "runtime", "12.4"),
}


def _add(tar: tarfile.TarFile, name: str, data: bytes, mode: int = 0o644) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(data), mode, 1700000000
    tar.addfile(info, io.BytesIO(data))


def conda_package(channel: Path, name: str, version: str, build: str = "0",
                  files: dict[str, str] | None = None, depends: tuple[str, ...] = ()) -> Path:
    """A real noarch `.tar.bz2` archive; `files` maps prefix-relative paths to text
    (paths under bin/ are executable)."""
    files = files or {}
    subdir = channel / "noarch"
    subdir.mkdir(parents=True, exist_ok=True)
    index = {"name": name, "version": version, "build": build, "build_number": 0, "depends": list(depends),
             "noarch": "generic", "subdir": "noarch", "license": "MIT", "timestamp": 1700000000000}
    paths = {"paths_version": 1, "paths": [
        {"_path": p, "path_type": "hardlink", "sha256": hashlib.sha256(t.encode()).hexdigest(),
         "size_in_bytes": len(t.encode())} for p, t in sorted(files.items())]}
    target = subdir / f"{name}-{version}-{build}.tar.bz2"
    with tarfile.open(target, "w:bz2") as tar:
        _add(tar, "info/index.json", json.dumps(index).encode())
        _add(tar, "info/paths.json", json.dumps(paths).encode())
        _add(tar, "info/files", "".join(f"{p}\n" for p in sorted(files)).encode())
        for path, text in sorted(files.items()):
            _add(tar, path, text.encode(), 0o755 if path.startswith("bin/") else 0o644)
    return target


def index_channel(channel: Path) -> None:
    from rattler.index import index_fs

    (channel / "linux-64").mkdir(parents=True, exist_ok=True)
    asyncio.run(index_fs(channel, force=True))


def demo_channel(root: Path, version: str = "1.0") -> list[Path]:
    """Two packages, one depending on the other, with a script that prints their version,
    plus a `python` record (an empty stand-in: the lock solves for the spec's Python)."""
    channel = root / "channel"
    conda_package(channel, "python", "3.11.0", files={"share/python-standin/README": "stand-in record\n"})
    lib = conda_package(channel, "envbuild-demo-lib", version,
                        files={"share/envbuild-demo/VERSION": f"{version}\n"})
    tool = conda_package(channel, "envbuild-demo", version, depends=(f"envbuild-demo-lib =={version}",),
                         files={"bin/envbuild-demo": "#!/bin/sh\nprintf 'envbuild-demo %s\\n' "
                                "\"$(cat \"$(dirname \"$0\")/../share/envbuild-demo/VERSION\")\"\n"})
    index_channel(channel)
    return [lib, tool]


def write_explicit_lock(lock_dir: Path, archives: list[Path], platform: str = "linux-64") -> Path:
    lock_dir.mkdir(parents=True, exist_ok=True)
    lines = ["# platform: " + platform, "@EXPLICIT"]
    for archive in archives:
        lines.append(f"{archive.resolve().as_uri()}#{hashlib.sha256(archive.read_bytes()).hexdigest()}")
    path = lock_dir / f"conda-{platform}.lock"
    path.write_text("\n".join(lines) + "\n")
    return path


def write_pip_lock(lock_dir: Path, wheels: list[Path]) -> Path:
    """A pip lock of exact pins with the wheels' hashes (what `envbuild lock` writes for pip)."""
    lock_dir.mkdir(parents=True, exist_ok=True)
    lines = []
    for wheel in wheels:
        name, version = wheel.name.split("-")[:2]
        digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
        lines.append(f"{name}=={version} --hash=sha256:{digest}")
    path = lock_dir / "requirements.lock"
    path.write_text("\n".join(lines) + "\n")
    return path


def make_wheel(directory: Path, name: str, version: str, module_text: str, requires: tuple[str, ...] = ()) -> Path:
    """A real pure-Python wheel (PEP 427) with one module `name`, depending on `requires`."""
    import base64
    import zipfile

    directory.mkdir(parents=True, exist_ok=True)
    dist = f"{name}-{version}.dist-info"
    files = {
        f"{name}.py": module_text,
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
                            + "".join(f"Requires-Dist: {r}\n" for r in requires),
        f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: envbuild-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(text.encode())}")
    record.append(f"{dist}/RECORD,,")
    files[f"{dist}/RECORD"] = "\n".join(record) + "\n"
    target = directory / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(target, "w") as zf:
        for path, text in files.items():
            info = zipfile.ZipInfo(path, date_time=(2024, 1, 1, 0, 0, 0))
            zf.writestr(info, text)
    return target


def resolution(family: str = "cuda", *, installer: str = "conda", name: str = "demo",
               env: tuple[tuple[str, str], ...] = (), base_ref: str | None = None) -> Resolution:
    ref, flavour, cuda = FAMILY_BASES[family]
    spec = Spec(name=name, frameworks=(FrameworkRequest("cupy", ">=13"),), cuda=cuda, python="3.11",
                driver="535.104.05", gpus=("A100",), installer=installer, base=family, env=env,
                image_repository=None)
    base = BaseImageChoice(ref=base_ref or ref, family=family, flavour=flavour, cuda=cuda, cudnn=None,
                           python="3.11", os="ubuntu22.04", source="test",
                           why=f"{flavour or family} flavour: smallest {family} image with CUDA {cuda}")
    stack = ResolvedStack(
        frameworks=(ResolvedFramework("cupy", "13.3.0", installer, cuda, pip_requirements=("cupy-cuda12x==13.3.0",)),),
        cuda=cuda, cudnn=None, python="3.11", driver="535.104.05", max_driver_cuda="12.2",
        gpus=(ResolvedGpu("NVIDIA A100", "8.0", True),), platform="linux-64", installer=installer,
        channels=("conda-forge",), base_image=base)
    return Resolution(spec=spec, verdict="ok", resolved=stack, matrix_version="test")


def locked_demo(root: Path, family: str = "cuda", **changes) -> tuple[Resolution, Path]:
    """A resolution asking for `envbuild-demo` from the local channel, locked by the real
    `envbuild lock` code (py-rattler solve, conda-lock files) into root/lock."""
    import dataclasses

    from envbuild.lock.api import lock

    demo_channel(root)
    base = resolution(family, installer="conda", **changes)
    channels = ((root / "channel").as_uri(),)
    spec = dataclasses.replace(base.spec, frameworks=(), channels=channels, conda_packages=("envbuild-demo",))
    stack = dataclasses.replace(base.resolved, frameworks=(), channels=channels)
    locked = dataclasses.replace(base, spec=spec, resolved=stack)
    lock(spec, locked, None, root / "lock")
    return locked, root / "lock"


def simple_index(root: Path, wheels: list[Path]) -> Path:
    """A PEP 503 simple index in a folder (pip reads `file://` index pages as index.html),
    each link carrying the wheel's sha256 so `envbuild lock` writes a hashed lock from it."""
    from packaging.utils import canonicalize_name

    links: dict[str, list[str]] = {}
    for wheel in wheels:
        digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
        links.setdefault(canonicalize_name(wheel.name.split("-")[0]), []).append(
            f'<a href="{wheel.resolve().as_uri()}#sha256={digest}">{wheel.name}</a>')
    for name, anchors in links.items():  # one page per project, every version on it
        (root / name).mkdir(parents=True, exist_ok=True)
        (root / name / "index.html").write_text(f"<!DOCTYPE html><html><body>{''.join(anchors)}</body></html>\n")
    (root / "index.html").write_text("<!DOCTYPE html><html><body></body></html>\n")
    return root


def build_image(client, tag: str, files: dict[str, bytes], **options) -> str:
    """Build `tag` with the engine's classic builder from a context of `files` (name -> bytes;
    one of them the Dockerfile); `options` go to the SDK's build (network_mode...)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in files.items():
            _add(tar, name, data)
    buf.seek(0)
    client.images.build(fileobj=buf, custom_context=True, tag=tag, rm=True, **options)
    return tag
