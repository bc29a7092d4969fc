"""The builds kept between runs (envbuild/resolver/build_cache.py): read back, they are the
builds the plugins make, pointing at the very rows of the loaded matrices; a damaged file
or matrices changed in memory never reach the resolver through the cache."""
from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from envbuild import matrix
from envbuild.model import FRAMEWORKS
from envbuild.resolver import build_cache, context

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    context._INDEXES.clear()
    yield tmp_path / "envbuild"
    context._INDEXES.clear()


def _same(cached, made) -> None:
    assert len(cached) == len(made)
    for a, b in zip(cached, made):
        for f in dataclasses.fields(a):
            x, y = getattr(a, f.name), getattr(b, f.name)
            if f.name == "row":
                assert x is y  # the loaded matrices' own row, not a copy
            elif f.name == "wheels" and x is not None:
                assert (x.label, x.by_platform, x.inferred) == (y.label, y.by_platform, y.inferred)
                assert all(r is s for r, s in zip(x.rows, y.rows, strict=True))
            else:
                assert x == y, (a.label, f.name)


@pytest.mark.parametrize("name", FRAMEWORKS)
def test_cached_builds_are_the_builds_the_plugin_makes(cache, name):
    m = matrix.load()
    made = context.Index(m).builds[name]  # makes them and keeps them
    (stored,) = cache.glob(f"builds-{name}-{m.version}-code*.pickle")
    cached = build_cache.load(m, name)
    assert cached is not None and cached is not made
    _same(cached, made)
    # and a second index of the same matrices takes them from the file
    _same(context.Index(m).builds[name], made)
    assert stored.stat().st_size > 0


def test_a_damaged_file_is_ignored_and_written_again(cache):
    m = matrix.load()
    made = context.Index(m).builds["pytorch"]
    (stored,) = cache.glob("builds-pytorch-*.pickle")
    stored.write_bytes(stored.read_bytes()[:100])
    assert build_cache.load(m, "pytorch") is None
    _same(context.Index(m).builds["pytorch"], made)  # made anew, and stored again
    _same(build_cache.load(m, "pytorch"), made)


def test_matrices_changed_in_memory_neither_read_nor_write_the_cache(cache):
    m = matrix.load()
    context.Index(m).builds["pytorch"]
    (row,) = [r for r in m.pytorch if r.version == "2.1.2" and r.installer == "pip" and r.cuda == "12.1"]
    changed = dataclasses.replace(m, pytorch=(dataclasses.replace(row, archs=("sm_70",)),))  # same version text
    assert not matrix.from_files(changed)
    assert build_cache.load(changed, "pytorch") is None
    (build,) = context.Index(changed).builds["pytorch"]
    assert build.archs == ("sm_70",)
    assert len(list(cache.glob("builds-pytorch-*.pickle"))) == 1


def test_the_cli_answers_the_same_from_the_cache(tmp_path):
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path)}
    argv = [sys.executable, "-m", "envbuild", "resolve", str(ROOT / "recipes" / "pytorch-official.yaml"), "--json"]
    first = subprocess.run(argv, env=env, capture_output=True, text=True, check=True).stdout
    assert list((tmp_path / "envbuild").glob("builds-pytorch-*.pickle"))
    again = subprocess.run(argv, env=env, capture_output=True, text=True, check=True).stdout
    assert json.loads(again) == json.loads(first)


def test_files_of_older_versions_are_forgotten_oldest_first(cache, monkeypatch):
    # each data or code version writes its own file: without a bound the folder grows with every upgrade
    monkeypatch.setattr(build_cache, "KEEP", 2)
    cache.mkdir(parents=True)
    for i in range(3):
        old = cache / f"builds-pytorch-old{i}-code00000000.pickle"
        old.write_bytes(b"stale")
        os.utime(old, (1_700_000_000 + i, 1_700_000_000 + i))
    other = cache / "builds-jax-old-code00000000.pickle"  # another framework's files are its own
    other.write_bytes(b"stale")
    os.utime(other, (1_600_000_000, 1_600_000_000))
    m = matrix.load()
    context.Index(m).builds["pytorch"]
    kept = sorted(p.name for p in cache.glob("builds-*.pickle"))
    assert kept == sorted([other.name, "builds-pytorch-old2-code00000000.pickle",
                           next(cache.glob(f"builds-pytorch-{m.version}-*.pickle")).name])
