"""What the locking machine's pip configuration contributes to a pip lock: the way to reach
the indexes, never the indexes themselves.

A lock is committed on one machine and installed on many, so it names only the indexes
the spec and the command line name. pip's configuration here (pip.conf files and PIP_*
variables, read as pip reads them by `envbuild.infra.pypi.pip_config`) still decides how this
machine reaches those indexes: its CA bundle, client certificate, proxy, trusted hosts,
timeout, keyring provider, and the credentials it holds for one of them. The package
sources it adds (index-url, extra-index-url, find-links, no-index) are left out: a lock
resolved from them would name mirrors and `file://` folders that exist only here. They
are reported (`other_sources`) so that the user can name one on purpose.

Everything goes to uv through its environment, never its command line (readable by every
local user in /proc/PID/cmdline): the index URLs with their credentials included.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from urllib.parse import urlsplit

from envbuild.infra.pypi import pip_config
from envbuild.infra.urls import strip_credentials

# uv variables that would change what a lock resolves from or to; envbuild sets the
# indexes itself and drops the rest (a user's UV_TORCH_BACKEND, UV_FIND_LINKS, ...), so
# the same spec gives the same lock on every machine. Cache, TLS and timeout settings stay.
_UV_KEPT = frozenset({
    "UV_CACHE_DIR", "UV_NO_CACHE", "UV_HTTP_TIMEOUT", "UV_HTTP_RETRIES", "UV_CONCURRENT_DOWNLOADS",
    "UV_NATIVE_TLS", "UV_INSECURE_HOST", "UV_KEYRING_PROVIDER", "UV_OFFLINE", "UV_NO_PROGRESS",
})


@dataclass(frozen=True)
class PipSettings:
    # package sources the configuration names: not used as sources (see the module's doc)
    index_url: str | None = None
    extra_index_urls: tuple[str, ...] = ()
    find_links: tuple[str, ...] = ()
    # how this machine reaches an index
    cert: str | None = None  # CA bundle
    client_cert: str | None = None
    proxy: str | None = None
    trusted_hosts: tuple[str, ...] = ()
    timeout: str | None = None
    keyring_provider: str | None = None


def settings_from(config: dict[str, str]) -> PipSettings:
    """PipSettings from pip's merged settings (`envbuild.infra.pypi.pip_config`)."""
    get = config.get
    return PipSettings(
        index_url=get("index-url") or None,
        extra_index_urls=tuple((get("extra-index-url") or "").split()),
        find_links=tuple((get("find-links") or "").split()),
        cert=get("cert") or None,
        client_cert=get("client-cert") or None,
        proxy=get("proxy") or None,
        trusted_hosts=tuple((get("trusted-host") or "").split()),
        timeout=get("timeout") or get("default-timeout") or None,
        keyring_provider=get("keyring-provider") or None,
    )


def read_pip_settings() -> PipSettings:
    """The pip configuration in force for this user and environment."""
    return settings_from(pip_config())


def other_sources(settings: PipSettings, named: tuple[str, ...]) -> tuple[str, ...]:
    """The package sources pip's configuration adds that the lock does not name (credentials
    removed): what a user of this machine might expect the lock to come from."""
    wanted = {strip_credentials(u).rstrip("/") for u in named}
    configured = ((settings.index_url,) if settings.index_url else ()) + settings.extra_index_urls + settings.find_links
    return tuple(dict.fromkeys(strip_credentials(u) for u in configured if strip_credentials(u).rstrip("/") not in wanted))


_DEFAULT_PORTS = {"http": 80, "https": 443}


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    try:
        port = parts.port or _DEFAULT_PORTS.get(scheme)
    except ValueError:
        port = None
    return scheme, (parts.hostname or "").lower(), port


def with_credentials(url: str, settings: PipSettings) -> str:
    """`url` with the user and password pip's configuration holds for its host (the first
    configured index on the same scheme, host and port), when `url` has none itself."""
    if "@" in urlsplit(url).netloc:
        return url
    for configured in ((settings.index_url,) if settings.index_url else ()) + settings.extra_index_urls:
        parts = urlsplit(configured)
        if "@" in parts.netloc and _origin(configured) == _origin(url):
            userinfo = parts.netloc.rpartition("@")[0]
            target = urlsplit(url)
            return target._replace(netloc=f"{userinfo}@{target.netloc}").geturl()
    return url


def uv_arguments(settings: PipSettings) -> list[str]:
    """uv flags for the settings that name no secret (hosts allowed without TLS checks, the
    keyring provider)."""
    args: list[str] = []
    for host in settings.trusted_hosts:
        args += ["--allow-insecure-host", host]
    if settings.keyring_provider and settings.keyring_provider != "auto":
        args += ["--keyring-provider", settings.keyring_provider]
    return args


def uv_environment(settings: PipSettings, index_url: str, extra_index_urls: tuple[str, ...],
                   base: "dict[str, str] | None" = None) -> dict[str, str]:
    """The environment for uv: the caller's without the uv variables that choose sources,
    the indexes (credentials included: the environment of a process is readable only by its
    user), and pip's CA bundle, client certificate, proxy and timeout in the variables uv reads."""
    env = {k: v for k, v in (os.environ if base is None else base).items()
           if not k.startswith("UV_") or k in _UV_KEPT}
    env["UV_INDEX_URL"] = index_url
    if extra_index_urls:
        env["UV_EXTRA_INDEX_URL"] = " ".join(extra_index_urls)
    if settings.cert:
        env["SSL_CERT_FILE"] = settings.cert
    if settings.client_cert:
        env["SSL_CLIENT_CERT"] = settings.client_cert
    if settings.proxy:
        # pip's --proxy wins over the environment's proxy variables
        env["HTTPS_PROXY"] = env["HTTP_PROXY"] = settings.proxy
    if settings.timeout:
        env["UV_HTTP_TIMEOUT"] = str(int(float(settings.timeout)))
    return env
