"""Read a Python package index through its simple API: every file of a project (PEP 691
JSON, with a PEP 503 HTML fallback for mirrors that serve only HTML) and a wheel's core
metadata (PEP 658: `<file url>.metadata`), without downloading any wheel.

The index URL, CA bundle and proxies come from the user's environment the way pip and
requests read them (`--index-url`, PIP_INDEX_URL or pip's config file; REQUESTS_CA_BUNDLE,
CURL_CA_BUNDLE or pip's `cert`; HTTPS_PROXY / NO_PROXY). With a cache folder every raw
answer is kept there, so a later run with `offline=True` reads the same answers again.
"""
from __future__ import annotations

import configparser
import io
import json
import os
import re
import sys
import threading
import zipfile
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urljoin

from envbuild.infra import atomic
from envbuild.infra.errors import EnvironmentProblem, UserError
from envbuild.infra.urls import mask, strip_credentials

PYPI = "https://pypi.org/simple"
JSON_TYPE = "application/vnd.pypi.simple.v1+json"
_ACCEPT = f"{JSON_TYPE}, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.01"


def pip_config_files() -> list[Path]:
    """pip's configuration files in the order pip reads them, later ones winning: site-wide
    (each of XDG_CONFIG_DIRS, then /etc), the user's (skipped when PIP_CONFIG_FILE names a
    file that exists), the environment's (sys.prefix), then PIP_CONFIG_FILE.
    PIP_CONFIG_FILE=/dev/null turns every file off, as in pip."""
    named = os.environ.get("PIP_CONFIG_FILE")
    if named == os.devnull:
        return []
    site_dirs = [d for d in (os.environ.get("XDG_CONFIG_DIRS") or "/etc/xdg").split(os.pathsep) if d]
    files = [Path(d) / "pip" / "pip.conf" for d in site_dirs] + [Path("/etc/pip.conf")]
    if not (named and os.path.exists(named)):
        home = Path.home()
        user_dir = (os.environ.get("XDG_CONFIG_HOME") or "").strip() or str(home / ".config")
        files += [home / ".pip" / "pip.conf", Path(user_dir) / "pip" / "pip.conf"]
    files.append(Path(sys.prefix) / "pip.conf")
    if named:
        files.append(Path(named))
    return files


def pip_config(command: str = "install") -> dict[str, str]:
    """The settings `pip COMMAND` works with: the [global] and then the [COMMAND] section of
    every configuration file, then the PIP_* environment variables over both (pip's
    precedence). Keys are spelled like pip's options (`index-url`). Read directly: pip's own
    configuration module takes about a quarter of a second to import."""
    settings: dict[str, str] = {}
    sections: dict[str, dict[str, str]] = {"global": {}, command: {}}
    for path in pip_config_files():
        parser = configparser.RawConfigParser()
        try:
            parser.read(path, encoding="utf-8")
        except (configparser.Error, UnicodeDecodeError) as exc:
            raise UserError(f"pip cannot read its configuration file: {type(exc).__name__}", where=str(path),
                            hint="fix the file (pip itself refuses it), or set PIP_CONFIG_FILE=/dev/null") from None
        for section, values in sections.items():
            if parser.has_section(section):
                values.update({key.replace("_", "-"): value.strip() for key, value in parser.items(section)})
    for values in sections.values():
        settings.update(values)
    for name, value in os.environ.items():
        if name.startswith("PIP_") and name not in ("PIP_CONFIG_FILE", "PIP_VERSION", "PIP_HELP"):
            settings[name[4:].lower().replace("_", "-")] = value
    return settings


def default_index_url() -> str:
    return pip_config().get("index-url") or PYPI


def _ca_bundle() -> str | bool:
    """requests reads REQUESTS_CA_BUNDLE / CURL_CA_BUNDLE itself; pip's cert is the fallback."""
    for name in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"):
        if os.environ.get(name):
            return os.environ[name]
    return pip_config().get("cert") or True


class SimpleIndex:
    """One index, read over HTTP (or from `cache` when `offline`)."""

    def __init__(self, url: str | None = None, *, cache: str | os.PathLike | None = None, offline: bool = False,
                 timeout: float = 30.0):
        self.url = (url or default_index_url()).rstrip("/")
        self.cache = Path(cache) if cache else None
        self.offline = offline
        self.timeout = timeout
        self._local = threading.local()  # one HTTP session per thread: refresh reads in parallel
        if offline and self.cache is None:
            raise EnvironmentProblem("offline needs a cache of index answers", where="index",
                                     hint="pass --cache DIR filled by an earlier online run")

    @property
    def public_url(self) -> str:
        """The index URL as data files and messages show it (never with credentials)."""
        return strip_credentials(self.url)

    def project_url(self, name: str) -> str:
        return f"{self.url}/{_normalise(name)}/"

    # --- reading ------------------------------------------------------------------------------
    def files(self, name: str) -> list[dict]:
        """Every file the index lists for project `name`: dicts with at least `filename`,
        `url` and `requires-python` (PEP 691 keys). [] when the index has no such project."""
        url = self.project_url(name)
        cached = self._cache_path("simple", f"{_normalise(name)}.json")
        body = self._get(url, cached, accept=_ACCEPT, parse=True)
        return [] if body is None else body["files"]

    def metadata(self, file: dict) -> str | None:
        """The core metadata of one wheel: PEP 658's `<url>.metadata`, else the wheel's own
        `*.dist-info/METADATA` read with HTTP range requests (a few small reads, never the
        whole wheel). None when neither can be had."""
        cached = self._cache_path("metadata", file["filename"] + ".metadata")
        text = self._get(file["url"] + ".metadata", cached, accept="*/*", parse=False)
        if text is not None or self.offline or not file["filename"].endswith(".whl"):
            return text
        text = self._metadata_in_wheel(file["url"])
        if text is not None and cached is not None:
            cached.with_name(cached.name + ".missing").unlink(missing_ok=True)
            atomic.write_text(cached, text)
        return text

    def _metadata_in_wheel(self, url: str) -> str | None:
        try:
            with zipfile.ZipFile(_RangeFile(self._open(), url, self.timeout)) as wheel:
                name = next((n for n in wheel.namelist() if n.count("/") == 1 and n.endswith(".dist-info/METADATA")), None)
                return wheel.read(name).decode("utf-8", "replace") if name else None
        except (OSError, zipfile.BadZipFile, ValueError):
            return None  # no range support, or not a zip: the metadata stays unread

    # --- transport ----------------------------------------------------------------------------
    def _cache_path(self, kind: str, name: str) -> Path | None:
        return self.cache / kind / name if self.cache else None

    def _get(self, url: str, cached: Path | None, *, accept: str, parse: bool):
        if self.offline:
            return self._from_cache(url, cached, parse)
        session = self._open()
        import requests

        try:
            response = session.get(url, headers={"Accept": accept}, timeout=self.timeout)
        except requests.exceptions.SSLError as exc:
            raise self._problem(url, f"TLS failure ({_tls_cause(exc)})",
                                "point REQUESTS_CA_BUNDLE or pip's `cert` at your CA bundle") from None
        except requests.exceptions.RequestException as exc:
            raise self._problem(url, f"cannot connect ({_first_line(exc)})",
                                "check the network and HTTPS_PROXY, or use --offline with --cache") from None
        except OSError as exc:  # requests' own check of the CA bundle path
            raise self._problem(url, f"TLS setup failed ({exc})",
                                "point REQUESTS_CA_BUNDLE or pip's `cert` at an existing CA bundle") from None
        if response.status_code == 404:
            self._store(cached, None)
            return None
        if response.status_code in (401, 403):
            raise self._problem(url, f"HTTP {response.status_code}",
                                "give the index credentials in the URL, ~/.netrc or pip's config")
        if response.status_code >= 400:
            raise self._problem(url, f"HTTP {response.status_code}", "try again later or use --offline with --cache")
        if not parse:
            text = response.text
            self._store(cached, text)
            return text
        kind = response.headers.get("Content-Type", "").split(";")[0].strip()
        body = _parse_project(response.text, kind, response.url or url)
        self._store(cached, json.dumps(body, sort_keys=True))
        return body

    def _open(self):
        session = getattr(self._local, "session", None)
        if session is None:
            import requests  # only commands that read an index pay for it

            session = self._local.session = requests.Session()
            session.verify = _ca_bundle()
            session.headers["User-Agent"] = "envbuild"
        return session

    def _problem(self, url: str, cause: str, hint: str) -> EnvironmentProblem:
        return EnvironmentProblem(f"{mask(url)}: {cause}", where="index", hint=hint)

    def _store(self, path: Path | None, text: str | None) -> None:
        if path is None:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        if text is None:  # remember "the index has none", so offline runs answer the same
            atomic.write_text(path.with_name(path.name + ".missing"), "")
        else:
            atomic.write_text(path, text)

    def _from_cache(self, url: str, path: Path | None, parse: bool):
        assert path is not None
        if path.with_name(path.name + ".missing").exists():
            return None
        try:
            text = path.read_text()
        except OSError:
            raise EnvironmentProblem(f"no cached answer for {mask(url)} in {self.cache}", where="index",
                                     hint="run once online with the same --cache to fill it") from None
        return json.loads(text) if parse else text


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _tls_cause(exc: Exception) -> str:
    found = re.search(r"\[SSL: [A-Z_]+\] ([^'\"()]+)", str(exc))
    return found.group(1).strip() if found else _first_line(exc)


def _first_line(exc: Exception) -> str:
    """The cause in a few words: requests nests it deep ("[Errno 111] Connection refused")."""
    text = str(exc)
    errno = re.search(r"\[Errno -?\d+\] ([^'\")\]]+)", text)
    if errno:
        return errno.group(1).strip()
    if "timed out" in text.lower():
        return "timed out"
    lines = text.strip().splitlines()
    return (lines[0] if lines else type(exc).__name__)[:160]


def _parse_project(text: str, kind: str, base_url: str) -> dict:
    """A project page as PEP 691 JSON (`files` with absolute URLs), whatever the index sent."""
    if kind == JSON_TYPE or kind.endswith("+json"):
        body = json.loads(text)
        files = [{"filename": f["filename"], "url": urljoin(base_url, f["url"]),
                  "requires-python": f.get("requires-python"), "yanked": bool(f.get("yanked"))}
                 for f in body.get("files", [])]
        return {"files": files}
    links = _Links()
    links.feed(text)
    files = []
    for href, attrs in links.found:
        url = urljoin(base_url, href)
        filename = url.split("#", 1)[0].rsplit("/", 1)[-1]
        files.append({"filename": unquote(filename), "url": url.split("#", 1)[0],
                      "requires-python": attrs.get("data-requires-python"), "yanked": "data-yanked" in attrs})
    return {"files": files}


class _RangeFile(io.RawIOBase):
    """A remote file read with HTTP Range requests in blocks of at least 256 KiB, enough
    for `zipfile` to find one member without fetching the archive."""

    BLOCK = 256 * 1024

    def __init__(self, session, url: str, timeout: float):
        self.session, self.url, self.timeout = session, url, timeout
        self.pos = 0
        self.blocks: dict[int, bytes] = {}  # start offset -> bytes
        response = session.head(url, allow_redirects=True, timeout=timeout)
        if response.status_code != 200 or "bytes" not in response.headers.get("Accept-Ranges", ""):
            raise OSError(f"{mask(url)}: no range requests")
        self.size = int(response.headers["Content-Length"])

    def seekable(self):
        return True

    def readable(self):
        return True

    def tell(self):
        return self.pos

    def seek(self, offset, whence=0):
        self.pos = {0: offset, 1: self.pos + offset, 2: self.size + offset}[whence]
        return self.pos

    def read(self, n=-1):
        end = self.size if n is None or n < 0 else min(self.size, self.pos + n)
        out = bytearray()
        while self.pos < end:
            chunk = self._block_at(self.pos)
            out += chunk[: end - self.pos]
            self.pos += len(chunk[: end - self.pos])
        return bytes(out)

    def readinto(self, buffer):
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def _block_at(self, pos: int) -> bytes:
        for start, data in self.blocks.items():
            if start <= pos < start + len(data):
                return data[pos - start:]
        start = max(0, min(pos, self.size - self.BLOCK))
        stop = min(self.size, max(pos + self.BLOCK, start + self.BLOCK))
        response = self.session.get(self.url, headers={"Range": f"bytes={start}-{stop - 1}"}, timeout=self.timeout)
        if response.status_code != 206:
            raise OSError(f"{mask(self.url)}: HTTP {response.status_code} to a range request")
        self.blocks[start] = response.content
        return response.content[pos - start:]


class _Links(HTMLParser):
    def __init__(self):
        super().__init__()
        self.found: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs):
        if tag == "a":
            found = dict(attrs)
            if found.get("href"):
                self.found.append((found["href"], found))
