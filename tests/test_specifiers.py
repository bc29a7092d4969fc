"""envbuild.specifiers: every answer is packaging's, whether asked now or read back from
the cache folder, and a file envbuild cannot trust is never read."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import packaging
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from packaging.specifiers import InvalidSpecifier, SpecifierSet

from envbuild import specifiers

RELEASES = st.lists(st.integers(0, 12), min_size=1, max_size=3).map(lambda parts: ".".join(map(str, parts)))
VERSIONS = st.builds(lambda r, s: r + s, RELEASES, st.sampled_from(["", "rc1", ".post1", ".dev0", "+cu121"]))
CLAUSES = st.builds(lambda op, v, star: f"{op}{v}{star}", st.sampled_from(["==", ">=", "<", "<=", ">", "!=", "~="]),
                    RELEASES, st.sampled_from(["", "", ".*"]))
TEXTS = st.lists(CLAUSES, min_size=1, max_size=3).map(",".join)

# a child that asks the questions given on its command line and prints the answers and
# whether it had to import packaging's specifiers to give them
CHILD = """
import json, sys
from envbuild import specifiers
questions = json.loads(sys.argv[1])
answers = [specifiers.admits(*q) if len(q) == 3 else specifiers.normal(q[0]) for q in questions]
print(json.dumps({"answers": answers, "imported": "packaging.specifiers" in sys.modules}))
"""


def packaging_says(text: str, version: str, prereleases):
    return SpecifierSet(text).contains(version, prereleases=prereleases)


def packaging_normal(text: str):
    try:
        return str(SpecifierSet(text))
    except InvalidSpecifier:
        return None


@pytest.fixture
def fresh(tmp_path, monkeypatch):
    """The module with no answers in memory and its cache folder under tmp_path."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(specifiers, "_answers", None)
    monkeypatch.setattr(specifiers, "_added", 0)
    return tmp_path


def ask(cache, questions):
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    done = subprocess.run([sys.executable, "-c", CHILD, json.dumps(questions)], env=env, capture_output=True,
                          text=True, check=True)
    return json.loads(done.stdout)


@settings(max_examples=300, deadline=None)
@given(TEXTS, VERSIONS, st.sampled_from([None, True, False]))
def test_every_answer_is_packagings(text, version, prereleases):
    if packaging_normal(text) is None:
        assert specifiers.normal(text) is None
        return
    assert specifiers.normal(text) == packaging_normal(text)
    assert specifiers.admits(text, version, prereleases) == packaging_says(text, version, prereleases)


def test_answers_come_back_from_the_cache_folder_without_packagings_specifiers(tmp_path):
    questions = [["==2.1.*", "2.1.2", False], ["==2.1.*", "2.2.0", False], [">=3.8,<3.12", "3.12.0", True],
                 ["<2.2", "2.2.0rc1", None], ["~=1", None], [">=3.8,<3.12"]]
    expected = [packaging_says(*q) if len(q) == 3 else packaging_normal(q[0]) for q in questions]
    first = ask(tmp_path, questions)
    assert first == {"answers": expected, "imported": True}
    assert (tmp_path / "envbuild" / f"specifiers-packaging-{packaging.__version__}.marshal").is_file()
    assert ask(tmp_path, questions) == {"answers": expected, "imported": False}
    # a question never asked before is put to packaging, and remembered with the rest
    assert ask(tmp_path, questions + [["!=2.1.*", "2.1.2", False]])["imported"] is True
    assert ask(tmp_path, questions + [["!=2.1.*", "2.1.2", False]]) == {"answers": expected + [False], "imported": False}


def test_answers_of_another_packaging_version_are_not_read(fresh):
    (fresh / "envbuild").mkdir()
    # the same question answered wrongly, in a file named for some other packaging release
    import marshal

    (fresh / "envbuild" / "specifiers-packaging-0.0.marshal").write_bytes(marshal.dumps({("==2.1.*", "2.1.2", False): False}))
    assert specifiers.admits("==2.1.*", "2.1.2", False) is True


@pytest.mark.parametrize("content", [b"", b"\x00garbage", b"not marshal at all"])
def test_an_unreadable_file_starts_afresh(fresh, content):
    (fresh / "envbuild").mkdir()
    (fresh / "envbuild" / f"specifiers-packaging-{packaging.__version__}.marshal").write_bytes(content)
    assert specifiers.admits(">=3.8", "3.11.0", True) is True
    assert specifiers.normal("==1.0,>=0.9") == packaging_normal("==1.0,>=0.9")


def test_a_cache_folder_that_cannot_be_made_only_costs_speed(tmp_path):
    blocker = tmp_path / "cache"
    blocker.write_text("a file where the cache folder would go")
    for _ in range(2):
        assert ask(blocker, [["<2", "1.9", None]]) == {"answers": [True], "imported": True}
