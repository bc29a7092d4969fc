"""URLs in messages and files: credentials never leave memory.

A user may write `https://user:token@host/simple` as an index URL. Every message,
JSON answer and file envbuild writes shows it as `https://user:***@host/simple`;
the real URL is only handed to the installer process that needs it.
"""
from __future__ import annotations

import re
import string
from urllib.parse import urlsplit, urlunsplit

# scheme://[user[:password]@]host... inside free text (an error message, a solver log).
# Found by looking for "://" and reading outwards from it: one pattern that starts with the
# scheme would be tried at every letter of the text, and each try reads on to the next
# "://", so a long run of letters took quadratic time (30,000 characters: 10 s).
_SCHEME_CHARS = string.ascii_letters + string.digits + "+.-"
_NOT_FIRST_IN_SCHEME = string.digits + "+.-"  # a scheme starts with a letter
# right after "://": user[:password]@; neither part holds "/", whitespace or "@"
_USERINFO = re.compile(r"(?P<user>[^/\s:@]*)(?::(?P<pw>[^/\s@]*))?@")


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


def _with_userinfo(text: str, shown) -> str:
    """`text` with each `scheme://user[:password]@` replaced by `scheme://` + `shown(user, pw)`
    (pw None when there is none). Each character is read a bounded number of times: between
    two "://" the text is split by `rstrip` and one anchored match that stops at the next "/"."""
    pieces, done, pos = [], 0, 0
    while (sep := text.find("://", pos)) >= 0:
        head = text[pos:sep]
        scheme = head[len(head.rstrip(_SCHEME_CHARS)):].lstrip(_NOT_FIRST_IN_SCHEME)
        found = _USERINFO.match(text, sep + 3) if scheme else None
        if found is None:
            pos = sep + 1
            continue
        pieces += [text[done:sep + 3], shown(found.group("user"), found.group("pw"))]
        done = pos = found.end()
    return "".join(pieces) + text[done:] if pieces else text


def strip_text(text: str) -> str:
    """Every URL inside `text` without its credentials (for files that are copied on)."""
    return _with_userinfo(text, lambda _user, _pw: "")


def mask_text(text: str) -> str:
    """Every URL with credentials inside `text`, masked (for installer and solver logs)."""
    return _with_userinfo(text, lambda user, pw: "***@" if pw is None else f"{user}:***@")
