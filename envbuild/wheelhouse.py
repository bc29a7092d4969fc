"""Fill a folder with every file a lock pins, for builds without network access.

Wheels: `pip download` of the exact pins for the target's platform tags (CPython
version, manylinux glibc of the base image, machine), with `--require-hashes`, so pip
checks every file against the lock. Direct-URL pins (`name @ URL`) and conda archives
are fetched by URL and checked against the lock's sha256 (md5 when that is all the lock
has). Conda archives land in `DIR/conda-channel/<subdir>/`, indexed as a channel: an
offline `image`/`dockerfile --wheelhouse DIR` bundles them from there, and the folder
serves `lock` as a `file://` channel. Files already there with the right hash are kept.
"""
from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import tempfile
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from envbuild.dockerfile.context import LOCAL_CHANNEL
from envbuild.dockerfile.locked import LockedFile, locked_files, wheel_matches
from envbuild.dockerfile.lockfiles import LockInput
from envbuild import say
from envbuild.errors import EnvironmentProblem
from envbuild.lock.folder import CONDA_LOCKFILE, sha256_file


@dataclass(frozen=True)
class Fetched:
    manager: str
    name: str
    version: str
    path: Path
    sha256: str | None
    downloaded: bool  # False: the file was there already, with the right hash


def _fetch_url(url: str, target: Path, sha256: str | None, md5: str | None, progress) -> bool:
    """Download `url` to `target` unless a file with the right hash is there; check the hash."""
    if target.is_file() and sha256 and sha256_file(target) == sha256:
        return False
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.part")
    parsed = urllib.parse.urlparse(url)
    task = progress.task(f"downloading {target.name}") if progress else None
    try:
        if parsed.scheme == "file":
            shutil.copyfile(urllib.request.url2pathname(parsed.path), partial)
        else:
            import requests

            with requests.get(url, stream=True, timeout=60) as answer:
                answer.raise_for_status()
                total = int(answer.headers.get("Content-Length") or 0) or None
                with open(partial, "wb") as out:
                    for block in answer.iter_content(1 << 20):
                        out.write(block)
                        if task:
                            task.update(advance=len(block), total=total)
    except Exception as exc:  # noqa: BLE001 - any failed download is the same problem for the user
        partial.unlink(missing_ok=True)
        raise EnvironmentProblem(f"cannot download {url} ({type(exc).__name__})",
                                 hint="check the network or the channel/index the lock names") from None
    finally:
        if task:
            task.done()
    if sha256 and sha256_file(partial) != sha256:
        partial.unlink()
        raise EnvironmentProblem(f"{url} does not match the lock's sha256 {sha256[:12]}...",
                                 hint="the index or channel serves another file under this name; re-lock or check the mirror")
    if not sha256 and md5 and hashlib.md5(partial.read_bytes()).hexdigest() != md5:  # noqa: S324 - the lock's own md5
        partial.unlink()
        raise EnvironmentProblem(f"{url} does not match the lock's md5", hint="re-lock or check the mirror")
    partial.replace(target)
    return True


def _platform_args(platform: str, glibc: str) -> list[str]:
    """`--platform TAG` for every tag the target accepts: pip (23.2 in a new venv) does not
    widen `manylinux_2_35` to the `manylinux2014` / `manylinux_2_17` tags most wheels carry.
    No `--isolated`: the user's pip configuration (mirror, CA bundle, proxy) applies."""
    from envbuild.lock.pip_tags import platform_tags

    return [arg for tag in platform_tags(platform, glibc) for arg in ("--platform", tag)]


def _pip_download(pins: list[LockedFile], out: Path, *, platform: str, python: str, glibc: str,
                  index_urls: list[str]) -> None:
    tags = _platform_args(platform, glibc)
    with tempfile.TemporaryDirectory(prefix="envbuild-wheelhouse-") as tmp:
        requirements = Path(tmp) / "requirements.txt"
        lines = [f"{p.name}=={p.version}" + "".join(f" --hash=sha256:{h}" for h in p.sha256) for p in pins]
        requirements.write_text("\n".join(lines) + "\n")
        command = [sys.executable, "-m", "pip", "download", "--disable-pip-version-check", "--quiet",
                   "--no-deps", "--only-binary=:all:", "--implementation", "cp", "--python-version", python,
                   *tags, "-d", str(out), "-r", str(requirements)]
        if all(p.sha256 for p in pins):
            command.append("--require-hashes")
        if index_urls:
            command += ["--index-url", index_urls[0]] + [a for u in index_urls[1:] for a in ("--extra-index-url", u)]
        say.command(command)
        done = subprocess.run(command, capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:
        last = next((x for x in reversed(done.stderr.strip().splitlines()) if x.strip()), "no output")
        raise EnvironmentProblem(f"pip could not download the locked wheels: {last.strip()}",
                                 hint="check the network or the index named in the lock")


def index_urls_of(lock: LockInput) -> list[str]:
    """--index-url / --extra-index-url lines of the pip lock, in order."""
    if lock.pip_lock is None:
        return []
    urls = []
    for line in lock.pip_lock.read_text(encoding="utf-8").splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] in ("--index-url", "--extra-index-url"):
            urls.append(parts[1])
    return urls


def installer_tools(lock: LockInput) -> list[str]:
    """What the in-image installer needs besides the lock: pip (bases without one) and,
    for conda environments, the py-rattler this envbuild runs. Not locked, so not hashed."""
    from envbuild.dockerfile.context import rattler_requirement

    return ["pip"] + ([rattler_requirement()] if lock.conda else [])


def _fetch_tools(lock: LockInput, out: Path, *, platform: str, python: str, glibc: str) -> None:
    wanted = [t for t in installer_tools(lock)
              if not any(w.name.lower().startswith(t.split("==")[0].replace("-", "_") + "-") for w in out.iterdir())]
    if not wanted:
        return
    command = [sys.executable, "-m", "pip", "download", "--disable-pip-version-check", "--quiet",
               "--no-deps", "--only-binary=:all:", "--implementation", "cp", "--python-version", python,
               *_platform_args(platform, glibc), "-d", str(out), *wanted]
    say.command(command)
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        last = next((x for x in reversed(done.stderr.strip().splitlines()) if x.strip()), "no output")
        raise EnvironmentProblem(f"pip could not download the installer's own wheels ({', '.join(wanted)}): "
                                 f"{last.strip()}", hint="check the network or PyPI mirror")


def _conda_lock_sha256(lock: LockInput, platform: str) -> dict[str, str]:
    """url -> sha256 from the conda-lock.yml beside an explicit lock, when there is one."""
    from envbuild.dockerfile.lockfiles import parse_conda_lock_yml

    unified = next((f for f in lock.files if f.name == CONDA_LOCKFILE), None)
    if unified is None:
        return {}
    packages, _ = parse_conda_lock_yml(unified, platform)
    return {p.url: p.sha256 for p in packages if p.sha256}


def fill(lock: LockInput, out: Path, *, platform: str, python: str, glibc: str, progress=None) -> list[Fetched]:
    out.mkdir(parents=True, exist_ok=True)
    _fetch_tools(lock, out, platform=platform, python=python, glibc=glibc)
    entries = locked_files(lock)
    fetched: list[Fetched] = []
    conda = [(e, p) for e, p in zip((e for e in entries if e.manager == "conda"), lock.conda)]
    sha256_of = _conda_lock_sha256(lock, platform)  # an explicit lock may carry only md5
    for entry, package in conda:
        target = out / LOCAL_CHANNEL / package.subdir / package.filename
        sha256 = package.sha256 or sha256_of.get(package.url)
        new = _fetch_url(package.url, target, sha256, package.md5, progress)
        fetched.append(Fetched("conda", entry.name, entry.version, target, sha256 or sha256_file(target), new))
    if conda:
        import asyncio

        from rattler.index import index_fs

        for subdir in ("noarch", platform):  # a channel needs both subdirs' repodata
            (out / LOCAL_CHANNEL / subdir).mkdir(parents=True, exist_ok=True)
        asyncio.run(index_fs(out / LOCAL_CHANNEL, force=True))

    pins = [e for e in entries if e.manager == "pip"]
    direct = [e for e in pins if e.url]
    to_download = []
    for entry in pins:
        present = [w for w in out.iterdir() if w.is_file() and wheel_matches(entry, w)]
        if entry in direct:
            target = out / (entry.filename or f"{entry.name}-{entry.version}.whl")
            new = _fetch_url(entry.url, target, entry.sha256[0] if entry.sha256 else None, None, progress)
            fetched.append(Fetched("pip", entry.name, entry.version, target, entry.sha256[0] if entry.sha256 else None, new))
        elif present and (not entry.sha256 or sha256_file(present[0]) in entry.sha256):
            fetched.append(Fetched("pip", entry.name, entry.version, present[0], sha256_file(present[0]), False))
        else:
            to_download.append(entry)
    if to_download:
        task = progress.task(f"downloading {len(to_download)} wheel(s) with pip", unit="files") if progress else None
        _pip_download(to_download, out, platform=platform, python=python, glibc=glibc, index_urls=index_urls_of(lock))
        if task:
            task.update(len(to_download))
            task.done()
        for entry in to_download:
            found = [w for w in out.iterdir() if w.is_file() and wheel_matches(entry, w)]
            if not found:
                raise EnvironmentProblem(f"pip reported success but left no file for {entry.name}=={entry.version}")
            digest = sha256_file(found[0])
            if entry.sha256 and digest not in entry.sha256:
                raise EnvironmentProblem(f"{found[0].name} does not match the lock's sha256",
                                         hint="the index serves another file under this name; re-lock")
            fetched.append(Fetched("pip", entry.name, entry.version, found[0], digest, True))
    return fetched
