"""Fill a folder with every file a lock pins, for builds without network access.

Wheels: the lock's pylock.toml names every file of each pin the target can install (URL,
size, sha256); the one the target's installer would pick (packaging's tag order for the
target's CPython, manylinux glibc and machine) is fetched by URL and checked against its
sha256. A lock without a pylock.toml (one written with --allow-unhashed) falls back to
`pip download` of the exact pins for the target's platform tags. Direct-URL pins
(`name @ URL`) and conda archives are fetched by URL and checked against the lock's sha256
(md5 when that is all the lock has). Conda archives land in `DIR/conda-channel/<subdir>/`,
indexed as a channel: an offline `image`/`dockerfile --wheelhouse DIR` bundles them from
there, and the folder serves `lock` as a `file://` channel. Files already there with the
right hash are kept.

Progress: one task for all the files fetched, with bytes, rate and (when every size is
known, as pylock.toml states them) the total; at most a line every 10 s when piped.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import tomllib
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from packaging.tags import compatible_tags, cpython_tags
from packaging.utils import InvalidWheelFilename, parse_wheel_filename

from envbuild.dockerfile.context import LOCAL_CHANNEL, rattler_requirement
from envbuild.dockerfile.locked import LockedFile, locked_files, wheel_matches
from envbuild.dockerfile.lockfiles import LockInput, parse_conda_lock_yml
from envbuild.infra.atomic import move_aside
from envbuild.infra.errors import EnvironmentProblem, UserError
from envbuild.infra.urls import mask
from envbuild.lock.folder import CONDA_LOCKFILE, PIP_LOCKFILE, pylock_name, sha256_file
from envbuild.lock.pip_config import read_pip_settings, with_credentials
from envbuild.lock.pip_lock import parse_pylock
from envbuild.lock.pip_tags import platform_tags
from envbuild.output import say


@dataclass(frozen=True)
class Fetched:
    manager: str
    name: str
    version: str
    path: Path
    sha256: str | None
    downloaded: bool  # False: the file was there already, with the right hash


def set_aside(path: Path, why: str) -> None:
    """A file in the way of a download is never replaced or deleted: moved to a free name."""
    aside = move_aside(path)
    say.warning(f"moved {path} ({why}) aside to {aside}")


def _is_file(path: Path) -> bool:
    """A regular file, not a link (a link to /dev/zero named like a wheel is never read)."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


@dataclass(frozen=True)
class _Wanted:
    """A file to fetch by URL into `target`, checked against the lock's hash."""

    manager: str
    name: str
    version: str
    url: str
    target: Path
    sha256: str | None
    md5: str | None = None
    size: int | None = None  # as the lock states it (pylock.toml), else unknown


def _fetch_all(wanted: list[_Wanted], progress) -> list[Fetched]:
    """Fetch every file not already there with its hash, under one progress task: bytes and
    rate, and the total when every size is known."""
    missing = [w for w in wanted if not (_is_file(w.target) and w.sha256 and sha256_file(w.target) == w.sha256)]
    task = None
    if missing and progress:
        sizes = [w.size for w in missing]
        total = sum(sizes) if all(sizes) else None
        task = progress.task(f"downloading {len(missing)} file(s)", total=total)
    fetched = []
    try:
        for item in wanted:
            new = item in missing and _fetch_url(item.url, item.target, item.sha256, item.md5, task)
            fetched.append(Fetched(item.manager, item.name, item.version, item.target,
                                   item.sha256 or sha256_file(item.target), new))
    finally:
        if task:
            task.done()
    return fetched


def _session():
    """HTTP as pip is configured here: its CA bundle, client certificate and proxy, and the
    credentials it holds for an index's host (~/.netrc is read by requests itself)."""
    import requests

    settings = read_pip_settings()
    session = requests.Session()
    if settings.cert:
        session.verify = settings.cert
    if settings.client_cert:
        session.cert = settings.client_cert
    if settings.proxy:
        session.proxies = {"http": settings.proxy, "https": settings.proxy}
    return session, settings


def _fetch_url(url: str, target: Path, sha256: str | None, md5: str | None, task=None) -> bool:
    """Download `url` to `target` unless a file with the right hash is there; check the hash.
    `task`: the progress task its bytes advance."""
    if _is_file(target) and sha256 and sha256_file(target) == sha256:
        return False
    if os.path.lexists(target):
        set_aside(target, "not the locked file")
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.part")
    partial.unlink(missing_ok=True)  # a link left there is removed, never written through
    parsed = urllib.parse.urlparse(url)
    try:
        if parsed.scheme == "file":
            shutil.copyfile(urllib.request.url2pathname(parsed.path), partial)
            if task:
                task.update(advance=partial.stat().st_size)
        else:
            session, settings = _session()
            with session, session.get(with_credentials(url, settings), stream=True, timeout=60) as answer:
                answer.raise_for_status()
                with open(partial, "wb") as out:
                    for block in answer.iter_content(64 * 1024):  # small blocks: the count moves smoothly
                        out.write(block)
                        if task:
                            task.update(advance=len(block))
    except Exception as exc:  # noqa: BLE001 - any failed download is the same problem for the user
        partial.unlink(missing_ok=True)

        raise EnvironmentProblem(f"cannot download {mask(url)} ({type(exc).__name__})",
                                 hint="check the network or the channel/index the lock names") from None
    if sha256 and sha256_file(partial) != sha256:
        partial.unlink()
        raise EnvironmentProblem(f"{url} does not match the lock's sha256 {sha256[:12]}...",
                                 hint="the index or channel serves another file under this name; re-lock or check the mirror")
    if not sha256 and md5 and hashlib.md5(partial.read_bytes()).hexdigest() != md5:  # noqa: S324 - the lock's own md5
        partial.unlink()
        raise EnvironmentProblem(f"{url} does not match the lock's md5", hint="re-lock or check the mirror")
    partial.replace(target)
    return True


def _move_in(downloaded: Path, target: Path) -> None:
    """Put a downloaded file at `target`; an other file there is moved aside, not replaced."""
    if os.path.lexists(target):
        if _is_file(target) and sha256_file(target) == sha256_file(downloaded):
            return
        set_aside(target, "not the downloaded file")
    os.replace(downloaded, target)


def _platform_args(platform: str, glibc: str) -> list[str]:
    """`--platform TAG` for every tag the target accepts: pip (23.2 in a new venv) does not
    widen `manylinux_2_35` to the `manylinux2014` / `manylinux_2_17` tags most wheels carry.
    No `--isolated`: the user's pip configuration (mirror, CA bundle, proxy) applies."""
    return [arg for tag in platform_tags(platform, glibc) for arg in ("--platform", tag)]


def _pip_download(pins: list[LockedFile], out: Path, *, platform: str, python: str, glibc: str,
                  index_urls: list[str], progress=None) -> None:
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
        with subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) as proc:
            lines = proc.stderr if progress is None else progress.follow(proc.stderr, f"pip download of {len(pins)} wheel(s)")
            stderr = "".join(lines)
            code = proc.wait()
    if code != 0:
        last = next((x for x in reversed(stderr.strip().splitlines()) if x.strip()), "no output")
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
    unified = next((f for f in lock.files if f.name == CONDA_LOCKFILE), None)
    if unified is None:
        return {}
    packages, _ = parse_conda_lock_yml(unified, platform)
    return {p.url: p.sha256 for p in packages if p.sha256}


def _pylock_path(lock: LockInput, platform: str) -> Path | None:
    """The pylock.toml beside the lock's pip lock for `platform`, when the lock has one."""
    if lock.pip_lock is None:
        return None
    path = lock.pip_lock.with_name(pylock_name(platform, lock.pip_lock.name == PIP_LOCKFILE))
    return path if path.is_file() else None


def chosen_wheels(pylock: Path, out: Path, *, platform: str, python: str, glibc: str) -> list[_Wanted]:
    """For each pin of `pylock`, the file the target's installer picks: the wheel whose
    best tag comes first in packaging's order for the target's CPython and platform, or
    the archive of a `name @ URL` pin."""
    version = tuple(int(part) for part in python.split(".")[:2])
    platforms = platform_tags(platform, glibc)
    order = {tag: i for i, tag in enumerate([*cpython_tags(version, platforms=platforms),
                                              *compatible_tags(version, f"cp{version[0]}{version[1]}", platforms)])}
    with open(pylock, "rb") as handle:
        pins = parse_pylock(tomllib.load(handle))
    wanted = []
    for pin in pins:
        ranked = []
        for file in pin.files:
            name = file.url.rsplit("/", 1)[-1].split("#", 1)[0]
            if file.kind == "archive":
                ranked.append((-1, name, file))
                continue
            if file.kind != "wheel":
                continue
            try:
                tags = parse_wheel_filename(name)[3]
            except InvalidWheelFilename:
                continue
            ranks = [order[tag] for tag in tags if tag in order]
            if ranks:
                ranked.append((min(ranks), name, file))
        if not ranked:
            raise EnvironmentProblem(f"the lock has no wheel of {pin.name} {pin.version} for CPython {python} on "
                                     f"{platform} (glibc {glibc})", where=str(pylock), hint="lock again for this target")
        _rank, name, file = min(ranked, key=lambda found: found[0])
        wanted.append(_Wanted("pip", pin.name, pin.version, file.url, out / name, file.sha256, size=file.size))
    return wanted


def guard(out: Path) -> None:
    """Refuse a wheelhouse folder that cannot be one, before the lock and the downloads."""
    where = f"-o {out}"
    if Path(os.path.abspath(out)).resolve() == Path("/"):
        raise UserError("the wheelhouse cannot be the filesystem root", where=where, hint="name a folder of its own")
    if out.exists() and not out.is_dir():
        raise UserError("exists and is not a folder", where=where, hint="name a folder for the wheels")


def fill(lock: LockInput, out: Path, *, platform: str, python: str, glibc: str, progress=None) -> list[Fetched]:
    guard(out)
    out.mkdir(parents=True, exist_ok=True)
    _fetch_tools(lock, out, platform=platform, python=python, glibc=glibc)
    entries = locked_files(lock)
    wanted: list[_Wanted] = []
    conda = [(e, p) for e, p in zip((e for e in entries if e.manager == "conda"), lock.conda)]
    sha256_of = _conda_lock_sha256(lock, platform)  # an explicit lock may carry only md5
    for entry, package in conda:
        wanted.append(_Wanted("conda", entry.name, entry.version, package.url,
                              out / LOCAL_CHANNEL / package.subdir / package.filename,
                              package.sha256 or sha256_of.get(package.url), package.md5))
    pylock = _pylock_path(lock, platform)
    pins = [e for e in entries if e.manager == "pip"]
    to_download = []
    if pylock is not None:
        wanted += chosen_wheels(pylock, out, platform=platform, python=python, glibc=glibc)
    else:  # a lock without hashes has no pylock.toml: pip picks and fetches the files
        for entry in pins:
            present = [w for w in out.iterdir() if _is_file(w) and wheel_matches(entry, w)]
            if entry.url:
                wanted.append(_Wanted("pip", entry.name, entry.version, entry.url,
                                      out / (entry.filename or f"{entry.name}-{entry.version}.whl"),
                                      entry.sha256[0] if entry.sha256 else None))
            elif not present or (entry.sha256 and sha256_file(present[0]) not in entry.sha256):
                to_download.append(entry)
    fetched = _fetch_all(wanted, progress)
    if conda:
        import asyncio

        from rattler.index import index_fs

        for subdir in ("noarch", platform):  # a channel needs both subdirs' repodata
            (out / LOCAL_CHANNEL / subdir).mkdir(parents=True, exist_ok=True)
        asyncio.run(index_fs(out / LOCAL_CHANNEL, force=True))
    if pylock is None:
        fetched += _pip_fetched(pins, to_download, out, lock, platform=platform, python=python, glibc=glibc,
                                progress=progress)
    return fetched


def _pip_fetched(pins: list[LockedFile], to_download: list[LockedFile], out: Path, lock: LockInput, *,
                 platform: str, python: str, glibc: str, progress) -> list[Fetched]:
    """The pins of a lock without pylock.toml: those already there, then `pip download` of
    the rest, each file checked against the lock's sha256 where it has one."""
    if to_download:
        # Into a folder of its own first: pip deletes a file of the same name whose hash it
        # does not expect, and that file may be the user's.
        with tempfile.TemporaryDirectory(prefix=".envbuild-download-", dir=out) as staging:
            _pip_download(to_download, Path(staging), platform=platform, python=python, glibc=glibc,
                          index_urls=index_urls_of(lock), progress=progress)
            for wheel in sorted(Path(staging).iterdir()):
                _move_in(wheel, out / wheel.name)
    fetched = []
    for entry in (e for e in pins if not e.url):
        found = [w for w in out.iterdir() if _is_file(w) and wheel_matches(entry, w)
                 and (not entry.sha256 or sha256_file(w) in entry.sha256)]
        if not found:
            raise EnvironmentProblem(f"pip reported success but left no file for {entry.name}=={entry.version}")
        digest = sha256_file(found[0])
        if entry.sha256 and digest not in entry.sha256:
            raise EnvironmentProblem(f"{found[0].name} does not match the lock's sha256",
                                     hint="the index serves another file under this name; re-lock")
        fetched.append(Fetched("pip", entry.name, entry.version, found[0], digest, entry in to_download))
    return fetched
