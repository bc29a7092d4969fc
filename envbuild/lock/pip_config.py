"""The user's pip configuration, read the way pip itself reads it, and handed to uv.

Most companies reach PyPI through a mirror, a CA bundle or a proxy set in pip.conf or in
PIP_* variables. The pip lock is resolved by uv, which does not read pip's files, so the
settings that decide where packages come from and how they are fetched are read from
`pip config list` (files and PIP_* environment, already merged by pip) and turned into
uv's flags and environment. Nothing here drops the configuration (no `--isolated`).
"""
from __future__ import annotations

import ast
import os
import subprocess
import sys
from dataclasses import dataclass

from envbuild.errors import UserError

# pip reads the [install] section over [global], and PIP_* variables (":env:") over both.
_PRECEDENCE = ("global", "install", ":env:")


@dataclass(frozen=True)
class PipSettings:
    index_url: str | None = None
    extra_index_urls: tuple[str, ...] = ()
    find_links: tuple[str, ...] = ()
    no_index: bool = False
    cert: str | None = None  # CA bundle
    client_cert: str | None = None
    proxy: str | None = None
    trusted_hosts: tuple[str, ...] = ()
    timeout: str | None = None
    keyring_provider: str | None = None


def _truthy(value: str) -> bool:
    return value.strip().lower() in ("1", "true", "yes", "on")


def parse_config_list(text: str) -> PipSettings:
    """Settings from the output of `pip config list` (lines `section.key='value'`)."""
    merged: dict[str, tuple[int, str]] = {}
    for line in text.splitlines():
        name, sep, raw = line.partition("=")
        if not sep or "." not in name:
            continue
        section, _, key = name.rpartition(".")
        if section not in _PRECEDENCE:
            continue
        try:
            value = ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            value = raw.strip("'\"")
        rank = _PRECEDENCE.index(section)
        key = key.replace("_", "-")
        if key not in merged or rank >= merged[key][0]:
            merged[key] = (rank, str(value))
    get = {k: v for k, (_, v) in merged.items()}.get
    return PipSettings(
        index_url=get("index-url") or None,
        extra_index_urls=tuple((get("extra-index-url") or "").split()),
        find_links=tuple((get("find-links") or "").split()),
        no_index=_truthy(get("no-index") or ""),
        cert=get("cert") or None,
        client_cert=get("client-cert") or None,
        proxy=get("proxy") or None,
        trusted_hosts=tuple((get("trusted-host") or "").split()),
        timeout=get("timeout") or get("default-timeout") or None,
        keyring_provider=get("keyring-provider") or None,
    )


def read_pip_settings() -> PipSettings:
    """The pip configuration in force for this user and environment."""
    try:
        done = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True,
                              timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return PipSettings()
    if done.returncode != 0:
        raise UserError(f"pip cannot read its configuration: {done.stderr.strip().splitlines()[-1:] or ['?']}",
                        where="pip configuration", hint="fix the file `pip config debug` names")
    return parse_config_list(done.stdout)


def uv_arguments(settings: PipSettings) -> list[str]:
    """uv flags for the settings that decide where packages come from (the index URLs are
    passed by the caller, which also adds the framework's variant index)."""
    args: list[str] = []
    for link in settings.find_links:
        args += ["--find-links", link]
    for host in settings.trusted_hosts:
        args += ["--allow-insecure-host", host]
    if settings.keyring_provider and settings.keyring_provider != "auto":
        args += ["--keyring-provider", settings.keyring_provider]
    return args


def uv_environment(settings: PipSettings, base: "dict[str, str] | None" = None) -> dict[str, str]:
    """The environment for uv: the caller's, plus pip's CA bundle, client certificate,
    proxy and timeout in the variables uv reads."""
    env = dict(os.environ if base is None else base)
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
