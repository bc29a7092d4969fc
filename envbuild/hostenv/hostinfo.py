"""What this host can run: NVIDIA driver, the newest CUDA it supports, its GPUs, Docker.

`detect()` reads the driver and GPUs with the probe's own nvidia-smi/NVML code (so host
and image are judged the same way); compute capabilities that an old nvidia-smi cannot
report come from NVML or, failing that, from the GPU table in `matrices/gpus.yaml`.
"""
from __future__ import annotations

import glob
import os
import platform
import sys
from dataclasses import dataclass, field

from envbuild import matrix
from envbuild.infra.errors import EnvironmentProblem
from envbuild.matrix.lookup import find_gpu
from envbuild.verify.probe_api import query_gpus

CDI_DIRS = ("/etc/cdi", "/var/run/cdi")


@dataclass(frozen=True)
class HostInfo:
    driver: str | None
    max_cuda: str | None
    gpus: tuple[tuple[str, str | None], ...]  # (name as nvidia-smi prints it, compute capability "9.0")
    docker_ok: bool = False
    nvidia_runtime_ok: bool = False  # Docker lists the "nvidia" runtime
    cdi: tuple[str, ...] = ()  # CDI spec files naming nvidia.com/gpu devices
    docker_error: str | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def gpu_containers_ok(self) -> bool:
        return self.docker_ok and (self.nvidia_runtime_ok or bool(self.cdi))


def detect(require_driver: bool = True, check_docker: bool = True) -> HostInfo:
    """Raise EnvironmentProblem when there is no NVIDIA driver (unless require_driver=False)."""
    info = query_gpus()
    notes = []
    if not info["ok"] and require_driver:
        raise EnvironmentProblem(
            f"no NVIDIA driver found on this host ({info['error']}; NVML: {info.get('nvml_error') or 'no GPU'})",
            hint="install the NVIDIA driver, or give the target explicitly with --driver and --gpu")
    gpus = []
    for gpu in info["gpus"]:
        cc = gpu["compute_capability"] or _cc_from_matrix(gpu["name"])
        if not gpu["compute_capability"] and cc:
            notes.append(f"{gpu['name']}: compute capability {cc} from matrices/gpus.yaml (this driver does not report it)")
        gpus.append((gpu["name"], cc))
    docker_ok, runtime_ok, error = (False, False, None)
    if check_docker:
        docker_ok, runtime_ok, error = _docker_state()
    return HostInfo(driver=info["driver"], max_cuda=info["max_cuda"], gpus=tuple(gpus), docker_ok=docker_ok,
                    nvidia_runtime_ok=runtime_ok, cdi=tuple(_cdi_specs()), docker_error=error, notes=tuple(notes))


# `uname -m` -> the conda platform an environment for this machine is built for
_MACHINES = {"x86_64": "linux-64", "amd64": "linux-64", "aarch64": "linux-aarch64", "arm64": "linux-aarch64"}


def platform_name() -> str:
    """This machine as a conda platform name (`linux-64`, `linux-aarch64`, `osx-arm64`, ...)."""
    machine = platform.machine().lower()
    if sys.platform.startswith("linux"):
        return _MACHINES.get(machine, f"linux-{machine}")
    if sys.platform == "darwin":
        return "osx-arm64" if machine == "arm64" else "osx-64"
    return f"{sys.platform}-{machine}"


def glibc() -> str | None:
    """The C library's version here ("2.36"), as conda's `__glibc` reads it; None without glibc."""
    try:
        text = os.confstr("CS_GNU_LIBC_VERSION") or ""
    except (ValueError, OSError, AttributeError):
        return None
    name, _, version = text.partition(" ")
    return version if name == "glibc" and version else None


def _cc_from_matrix(name: str) -> str | None:
    gpu = find_gpu(matrix.load(), name)
    return gpu.compute_capability if gpu else None


def _docker_state() -> tuple[bool, bool, str | None]:
    try:
        import docker
    except ImportError:
        return False, False, "the docker Python SDK is not installed (pip install docker)"
    try:
        client = docker.from_env(timeout=10)
        info = client.info()
    except Exception as exc:  # noqa: BLE001 - unreachable engine, missing socket, permission
        return False, False, f"{type(exc).__name__}: {exc}"
    runtimes = info.get("Runtimes") or {}
    return True, "nvidia" in runtimes, None


def _cdi_specs() -> list[str]:
    found = []
    for folder in CDI_DIRS:
        for path in sorted(glob.glob(f"{folder}/*.yaml") + glob.glob(f"{folder}/*.json")):
            try:
                with open(path, encoding="utf-8", errors="replace") as fh:
                    if "nvidia.com/gpu" in fh.read():
                        found.append(path)
            except OSError:
                continue
    return found
