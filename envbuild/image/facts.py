"""What an image says about itself, for a base image outside the catalog and for what a
base already carries.

- Its config (`Env`, `Labels`): from the local engine when it holds the image, else from
  the registry (manifest -> config digest -> config blob; `envbuild.image.registry`). NVIDIA's
  CUDA images state their CUDA, cuDNN and flavour there, and images built FROM them
  inherit it.
- When the local engine holds it: its `python3` is run once, with no network, to print
  its version, its C library, its OS release and the Python distributions it can import
  (`importlib.metadata`, what a venv made over it with system site packages sees). The
  answer is plain JSON kept in the cache folder under the image's ID, which names its
  content, so it is never stale (`envbuild.infra.user_cache` says which folders and files it
  trusts).

Nothing here guesses: a fact the image does not state stays None, and `problem` says why
an image could not be read at all.
"""
from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, field

from envbuild.dockerfile.reference import parse
from envbuild.image.engine import connect, light_inspect
from envbuild.image.registry import image_config
from envbuild.infra import user_cache
from envbuild.infra.errors import EnvironmentProblem, UserError

# Run in the image with its own python3 (any 3.x: no f-strings, nothing newer than 3.5
# outside the try). Its text is a constant: nothing from a spec or flag enters it.
_READ_PYTHON = """
import json, platform, sys
found = {"python": platform.python_version(), "glibc": platform.libc_ver()[1] or None, "os": {},
         "distributions": None}
try:
    with open("/etc/os-release") as handle:
        for line in handle:
            key, _, value = line.strip().partition("=")
            if key in ("ID", "VERSION_ID"):
                found["os"][key] = value.strip().strip('"')
except OSError:
    pass
try:
    from importlib import metadata
    found["distributions"] = sorted(set((d.metadata["Name"], d.version) for d in metadata.distributions()
                                        if d.metadata["Name"]))
except Exception:
    pass
sys.stdout.write(json.dumps(found))
"""
RUN_TIMEOUT = 120  # seconds for the one python3 run (the engine may start the container cold)
REGISTRY_TIMEOUT = 5.0
KEEP_READS = 64  # cached reads of local images; the oldest go first


@dataclass(frozen=True)
class ImageRead:
    """What reading one image found; `where` says how it was read (for the facts' sources)."""

    ref: str
    where: str = ""  # "the local engine" | "the registry HOST"; "" when it could not be read
    digest: str | None = None  # the local image ID, or the registry's manifest digest
    env: tuple[tuple[str, str], ...] = ()
    python: str | None = None  # "3.11.2": python3 run in the image (local images only)
    glibc: str | None = None
    os: tuple[tuple[str, str], ...] = ()  # /etc/os-release ID and VERSION_ID
    distributions: tuple[tuple[str, str], ...] | None = None  # (name, version) python3 imports
    problem: str | None = None  # why it could not be read (or run)
    notes: tuple[str, ...] = field(default=())

    @property
    def ok(self) -> bool:
        return bool(self.where)

    def env_value(self, name: str) -> str | None:
        return dict(self.env).get(name)


def read(ref: str, platform: str = "linux-64", *, run_python: bool = True) -> ImageRead:
    """`ref` read from the local engine when it holds it (python3 run in it when
    `run_python`), else its config from the registry."""
    local = _local_record(ref)
    if local is not None:
        return _from_local(ref, local, run_python)
    return _from_registry(ref, platform)


def read_local(ref: str) -> ImageRead | None:
    """`ref` read from the local engine, python3 run in it; None when the engine does not
    hold it (nothing is pulled)."""
    local = _local_record(ref)
    return None if local is None else _from_local(ref, local, True)


def _local_record(ref: str) -> dict | None:
    try:
        return light_inspect(ref)
    except (EnvironmentProblem, UserError):
        return None  # no engine here: the registry may still answer
    except Exception:  # noqa: BLE001 - a broken engine SDK setup means "not local" too
        return None


def _env_pairs(env: object) -> tuple[tuple[str, str], ...]:
    pairs = []
    for item in env if isinstance(env, list) else ():
        if isinstance(item, str) and "=" in item:
            key, _, value = item.partition("=")
            pairs.append((key, value))
    return tuple(pairs)


def _from_local(ref: str, record: dict, run_python: bool) -> ImageRead:
    image_id = str(record.get("Id") or "")
    env = _env_pairs((record.get("Config") or {}).get("Env"))
    base = ImageRead(ref, where="the local engine", digest=image_id or None, env=env)
    if not run_python or not image_id.startswith("sha256:"):
        return base
    found = _cached(image_id)
    if found is None:
        try:
            found = _run_python(image_id)
        except EnvironmentProblem as exc:
            return ImageRead(ref, where=base.where, digest=base.digest, env=env,
                             problem=f"python3 could not be run in it: {exc.message}")
        _store(image_id, found)
    return _with_run(base, found)


def _with_run(base: ImageRead, found: dict) -> ImageRead:
    if found.get("missing"):
        return ImageRead(base.ref, where=base.where, digest=base.digest, env=base.env,
                         problem=f"it has no python3 on PATH ({found['missing']})")
    dists = found.get("distributions")
    os_release = found.get("os") if isinstance(found.get("os"), dict) else {}
    return ImageRead(
        base.ref, where=base.where, digest=base.digest, env=base.env,
        python=_text(found.get("python")), glibc=_text(found.get("glibc")),
        os=tuple(sorted((str(k), str(v)) for k, v in os_release.items())),
        distributions=None if not isinstance(dists, list) else tuple(
            (str(d[0]), str(d[1])) for d in dists if isinstance(d, list) and len(d) == 2))


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _run_python(image_id: str) -> dict:
    """python3 run once in the image (no network, removed afterwards): its JSON answer, or
    {"missing": why} when the image has no python3 to run. The container is created,
    started and waited for, and only then are its logs read: the SDK's one-call run()
    follows the logs while the container starts and can miss a short run's output."""
    import docker.errors
    import requests

    container = None
    try:
        container = connect().containers.create(image_id, ["python3", "-c", _READ_PYTHON], entrypoint="",
                                                network_disabled=True)
        container.start()
        status = container.wait(timeout=RUN_TIMEOUT).get("StatusCode")
        out = container.logs(stdout=True, stderr=False)
        err = container.logs(stdout=False, stderr=True)[-2000:].decode("utf-8", "replace")
    except docker.errors.APIError as exc:
        why = str(exc.explanation or exc)
        if "executable file not found" in why or "no such file" in why.lower():
            return {"missing": "python3: executable file not found"}
        raise EnvironmentProblem(f"the engine could not run python3 in {image_id[:19]}: {why[:200]}") from None
    except requests.exceptions.RequestException:
        raise EnvironmentProblem(f"python3 in {image_id[:19]} did not answer within {RUN_TIMEOUT} s") from None
    finally:
        if container is not None:
            with contextlib.suppress(docker.errors.APIError):
                container.remove(force=True)
    if status == 127:
        return {"missing": "python3: not found"}
    try:
        found = json.loads(out)
    except ValueError:
        found = None
    if status != 0 or not isinstance(found, dict):
        last = (err.strip().splitlines() or ["no output"])[-1][:200]
        raise EnvironmentProblem(f"python3 in {image_id[:19]} exited with {status}: {last}")
    return found


def _cache_name(image_id: str) -> str:
    return f"{image_id.removeprefix('sha256:')[:64]}.json"


def _cached(image_id: str) -> dict | None:
    return user_cache.read_json("images", _cache_name(image_id))


def _store(image_id: str, found: dict) -> None:
    user_cache.write_json(found, "images", _cache_name(image_id), keep=KEEP_READS)


def _from_registry(ref: str, platform: str) -> ImageRead:
    try:
        reference = parse(ref)
        found = image_config(reference, platform, timeout=REGISTRY_TIMEOUT)
    except (EnvironmentProblem, UserError) as exc:
        return ImageRead(ref, problem=exc.message)
    if found is None:
        return ImageRead(ref, problem=f"registry {reference.registry} has no image {reference}")
    digest, config = found
    env = _env_pairs((config.get("config") or {}).get("Env"))
    return ImageRead(ref, where=f"the registry {reference.registry}", digest=digest, env=env,
                     notes=("python3 is run only in a local image: `docker pull` it to let envbuild read its "
                            "Python and packages",))
