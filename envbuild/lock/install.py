"""Create a conda environment from `conda-lock.yml` with py-rattler (no conda binary
needed): each locked package is looked up in its channel, its md5/sha256 are compared
with the lock, and the exact records are installed into the prefix."""
from __future__ import annotations

from pathlib import Path

from envbuild.infra.errors import UserError
from envbuild.lock import loop


def _channel_of(url: str) -> str:
    """https://host/chan/linux-64/pkg.tar.bz2 -> https://host/chan"""
    return url.rsplit("/", 2)[0]


async def _records(lock_path: Path, platform: str):
    import rattler
    from conda_lock.lockfile import parse_conda_lock_file

    lockfile = parse_conda_lock_file(lock_path)
    locked = [p for p in lockfile.package if p.manager == "conda" and p.platform == platform]
    if not locked:
        raise UserError(f"{lock_path} has no conda packages for {platform}", where=str(lock_path),
                        hint=f"locked platforms: {', '.join(lockfile.metadata.platforms)}")
    gateway = rattler.Gateway()
    records = []
    for package in locked:
        spec = rattler.MatchSpec(f"{package.name} =={package.version} {package.build}")
        result = await gateway.query([_channel_of(package.url)], [platform, "noarch"], [spec], recursive=False)
        candidates = [r for per_channel in result for r in per_channel if r.url == package.url]
        if not candidates:
            raise UserError(f"{package.url} is no longer in its channel", where=str(lock_path),
                            hint="re-run `envbuild lock` against the current channel")
        record = candidates[0]
        if (record.md5 and record.md5.hex() != package.hash.md5) or (
            package.hash.sha256 and record.sha256 and record.sha256.hex() != package.hash.sha256
        ):
            raise UserError(f"{package.url} changed since it was locked (hash differs)", where=str(lock_path))
        records.append(record)
    return records


def install(lock_path, prefix, platform: str = "linux-64", cache_dir=None, *, alternative_target_prefix=None,
            reporter=None) -> list[str]:
    """Install the lock's packages for `platform` into `prefix`; returns `name=version=build`.
    `alternative_target_prefix`: the path the environment will have once moved there (the
    path patched into its files). `reporter`: py-rattler's InstallerReporter callbacks."""
    import rattler

    async def run():
        records = await _records(Path(lock_path), platform)
        await rattler.install(records, target_prefix=str(prefix), cache_dir=cache_dir,
                              platform=rattler.Subdir(platform), show_progress=False, execute_link_scripts=False,
                              alternative_target_prefix=None if alternative_target_prefix is None
                              else str(alternative_target_prefix), reporter=reporter)
        return [f"{r.name.normalized}={r.version}={r.build}" for r in records]

    return loop.run(run())
