"""envbuild.infra.user_cache: what the cache folder holds is JSON data, read only from folders and
files of this user that no one else may write, and anything odd in its place is a miss,
at once (a FIFO or an endless file never hangs a command)."""
from __future__ import annotations

import json
import os
import stat

import pytest

from envbuild.infra import user_cache


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    return tmp_path / "xdg" / "envbuild"


def test_a_kept_object_comes_back_and_only_its_owner_may_touch_it(cache):
    user_cache.write_json({"python": "3.11.9", "distributions": [["numpy", "1.26.4"]]}, "images", "a.json", keep=4)
    assert user_cache.read_json("images", "a.json") == {"python": "3.11.9", "distributions": [["numpy", "1.26.4"]]}
    assert stat.S_IMODE((cache / "images" / "a.json").stat().st_mode) == 0o600
    assert stat.S_IMODE(cache.stat().st_mode) == stat.S_IMODE((cache / "images").stat().st_mode) == 0o700
    assert user_cache.read_json("images", "absent.json") is None


def test_only_the_newest_files_are_kept(cache):
    for i in range(5):
        user_cache.write_json({"i": i}, "images", f"{i}.json", keep=3)
        os.utime(cache / "images" / f"{i}.json", ns=(1_700_000_000_000_000_000 + i, 1_700_000_000_000_000_000 + i))
    assert sorted(p.name for p in (cache / "images").iterdir()) == ["2.json", "3.json", "4.json"]


def _fifo(path):
    os.mkfifo(path, 0o600)


def _endless(path):
    os.symlink("/dev/zero", path)


def _folder(path):
    path.mkdir(mode=0o700)


def _too_large(path):
    with open(path, "wb") as handle:
        handle.truncate(user_cache.MAX_BYTES + 1)


def _text(content: bytes):
    def make(path):
        path.write_bytes(content)
        path.chmod(0o600)
    return make


def _link_to_a_good_file(path):
    good = path.parent.parent / "elsewhere.json"
    good.write_text('{"python": "3.12"}')
    good.chmod(0o600)
    os.symlink(good, path)


@pytest.mark.parametrize("make", [_fifo, _endless, _folder, _too_large, _link_to_a_good_file, _text(b"not json"),
                                  _text(b"\xff\xfe"), _text(b"[1, 2]"), _text(b"")],
                         ids=["fifo", "dev-zero", "folder", "too-large", "link", "not-json", "not-utf8", "a-list", "empty"])
def test_anything_but_a_json_object_is_a_miss(cache, make):
    (cache / "images").mkdir(mode=0o700, parents=True)
    cache.chmod(0o700)
    make(cache / "images" / "x.json")
    assert user_cache.read_json("images", "x.json") is None


@pytest.mark.parametrize("where", ["folder", "subfolder", "file"])
def test_what_others_may_write_is_ignored(cache, where):
    user_cache.write_json({"python": "3.11"}, "images", "x.json", keep=4)
    target = {"folder": cache, "subfolder": cache / "images", "file": cache / "images" / "x.json"}[where]
    target.chmod(stat.S_IMODE(target.stat().st_mode) | stat.S_IWOTH)
    assert user_cache.read_json("images", "x.json") is None
    if where != "file":  # nothing is written into a folder others may write either
        user_cache.write_json({"python": "3.12"}, "images", "y.json", keep=4)
        assert not (cache / "images" / "y.json").exists()


@pytest.mark.skipif(os.getuid() != 0, reason="giving a folder to another user needs root")
def test_a_folder_of_another_user_is_ignored(cache):
    user_cache.write_json({"python": "3.11"}, "images", "x.json", keep=4)
    os.chown(cache, 65534, 65534)  # nobody
    assert user_cache.read_json("images", "x.json") is None
    user_cache.write_json({"python": "3.12"}, "images", "y.json", keep=4)
    assert not (cache / "images" / "y.json").exists()


def test_a_folder_that_is_a_link_is_not_followed(cache, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    (elsewhere / "images").mkdir(mode=0o700)
    (elsewhere / "images" / "x.json").write_text(json.dumps({"python": "3.11"}))
    (elsewhere / "images" / "x.json").chmod(0o600)
    cache.parent.mkdir()
    os.symlink(elsewhere, cache)
    assert user_cache.read_json("images", "x.json") is None


def test_a_cache_folder_that_cannot_be_made_only_costs_the_work(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("a file where the cache folder would go")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    user_cache.write_json({"python": "3.11"}, "images", "x.json", keep=4)
    assert user_cache.read_json("images", "x.json") is None
