"""URLs in messages and files: credentials never leave memory.

A user may write `https://user:token@host/simple` as an index URL. Every message,
JSON answer and file envbuild writes shows it as `https://user:***@host/simple`;
the real URL is only handed to the installer process that needs it.
"""
from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit

# scheme://[user[:password]@]host... inside free text (an error message, a solver log)
_IN_TEXT = re.compile(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*://)(?P<user>[^/\s:@]*)(?::(?P<pw>[^/\s@]*))?@")


def _userinfo_replaced(url: str, shown) -> str:
    """`url` with its `user[:password]@` part replaced by `shown(user, has_password)`."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return mask_text(url)
    if "@" not in parts.netloc:
        return url
    userinfo, _, hostport = parts.netloc.rpartition("@")
    user, sep, _password = userinfo.partition(":")
    return urlunsplit(parts._replace(netloc=shown(user, bool(sep)) + hostport))


def mask(url: str) -> str:
    """`url` with its password (or a lone token in the user part) replaced by `***`."""
    return _userinfo_replaced(url, lambda user, has_password: f"{user}:***@" if has_password else "***@")


def strip_credentials(url: str) -> str:
    """`url` without any user or password: what a committed lockfile records."""
    return _userinfo_replaced(url, lambda _user, _has_password: "")


def has_credentials(url: str) -> bool:
    try:
        return "@" in urlsplit(url).netloc
    except ValueError:
        return False


def strip_text(text: str) -> str:
    """Every URL inside `text` without its credentials (for files that are copied on)."""
    return _IN_TEXT.sub(lambda m: m.group("scheme"), text)


def mask_text(text: str) -> str:
    """Every URL with credentials inside `text`, masked (for installer and solver logs)."""

    def repl(m: re.Match) -> str:
        if m.group("pw") is not None:
            return f"{m.group('scheme')}{m.group('user')}:***@"
        return f"{m.group('scheme')}***@"

    return _IN_TEXT.sub(repl, text)
