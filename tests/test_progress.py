"""Progress of the long steps, piped (as CI sees it): a silent step says how long it has run
(`Progress.follow`: a build's `COPY --from`, an installer downloading), and `wheelhouse`
downloads show bytes, rate and their total, never more bytes than the total, at most a
line every PLAIN_EVERY seconds (10 s in use; shortened here)."""
from __future__ import annotations

import functools
import hashlib
import http.server
import io
import re
import threading
import time
from pathlib import Path

import pytest

from envbuild.image.wheelhouse import _fetch_all, _Wanted
from envbuild.infra.errors import EnvironmentProblem
from envbuild.output import progress


def slow(items, pause: float):
    for item in items:
        time.sleep(pause)
        yield item


def test_a_silent_step_says_how_long_it_has_run(monkeypatch):
    monkeypatch.setattr(progress, "PLAIN_EVERY", 0.3)
    monkeypatch.setattr(progress, "TICK", 0.05)
    out = io.StringIO()
    bar = progress.Progress(out, terminal=False)
    got = list(bar.follow(slow(["first", "second"], 1.0), "[7/9] COPY --from=install /opt/env /opt/env"))
    assert got == ["first", "second"]
    lines = out.getvalue().splitlines()
    assert all(re.fullmatch(r"\s+\d+\.\ds  \[7/9\] COPY --from=install /opt/env /opt/env: running, \d+ s without "
                            r"output", line) for line in lines), lines
    assert 4 <= len(lines) <= 7, lines  # 2 s of silence, a line every 0.3 s at most (none in the first 0.3 s)


def test_a_stream_that_fails_raises_in_the_reader(monkeypatch):
    def broken():
        yield "one"
        raise OSError("engine went away")

    bar = progress.Progress(io.StringIO(), terminal=False)
    seen = []
    with pytest.raises(OSError, match="engine went away"):
        for item in bar.follow(broken(), "step"):
            seen.append(item)
    assert seen == ["one"]


class _Throttled(http.server.SimpleHTTPRequestHandler):
    """Serves files 64 kB at a time with a pause: a slow mirror."""

    def copyfile(self, source, outputfile):
        while block := source.read(64 * 1024):
            outputfile.write(block)
            time.sleep(0.05)

    def log_message(self, *args):
        pass


@pytest.fixture
def mirror(tmp_path):
    served = tmp_path / "served"
    served.mkdir()
    files = {}
    for i, size in enumerate((1_400_000, 600_000, 1_000_000)):
        data = bytes([i]) * size
        (served / f"pkg{i}-1.0-py3-none-any.whl").write_bytes(data)
        files[f"pkg{i}-1.0-py3-none-any.whl"] = (hashlib.sha256(data).hexdigest(), size)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Throttled, directory=str(served)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}", files
    server.shutdown()
    server.server_close()


def _wanted(url: str, files: dict, out: Path, **change) -> list[_Wanted]:
    return [_Wanted("pip", name.split("-")[0], "1.0", f"{url}/{name}", out / name, change.get(name, sha), size=size)
            for name, (sha, size) in files.items()]


def test_wheelhouse_downloads_show_bytes_rate_and_total(mirror, tmp_path, monkeypatch):
    monkeypatch.setattr(progress, "PLAIN_EVERY", 0.5)
    url, files = mirror
    out = io.StringIO()
    fetched = _fetch_all(_wanted(url, files, tmp_path / "wh"), progress.Progress(out, terminal=False))
    assert [f.downloaded for f in fetched] == [True, True, True]
    assert all(f.sha256 == files[f.path.name][0] for f in fetched)
    lines = out.getvalue().splitlines()
    amounts = [re.search(r"downloading 3 file\(s\): (?:done \()?([\d.]+) (k?B|MB) of ([\d.]+) MB, [\d.]+ (?:k?B|MB)/s",
                         line) for line in lines]
    assert all(amounts) and len(lines) >= 3, lines  # about 2.5 s of downloads: several lines, each with a rate
    for found in amounts:
        done = float(found[1]) / (1000 if found[2] == "kB" else 1)
        assert done <= float(found[3]) == 3.0  # never more than the total the lock states
    assert "done (3.0 MB of 3.0 MB" in lines[-1]
    took = float(lines[-1].split()[0].rstrip("s"))
    assert len(lines) <= took / 0.5 + 2  # at most a line per PLAIN_EVERY, and the last

    again = io.StringIO()  # the files are there with their hashes: nothing is fetched, nothing said
    assert not any(f.downloaded for f in _fetch_all(_wanted(url, files, tmp_path / "wh"),
                                                    progress.Progress(again, terminal=False)))
    assert again.getvalue() == ""


def test_a_download_that_does_not_match_the_lock_is_refused(mirror, tmp_path):
    url, files = mirror
    name = next(iter(files))
    with pytest.raises(EnvironmentProblem, match=f"{name} does not match the lock's sha256"):
        _fetch_all(_wanted(url, files, tmp_path / "wh", **{name: "0" * 64}), None)
    assert not (tmp_path / "wh" / name).exists() and not list((tmp_path / "wh").glob(".*.part"))
