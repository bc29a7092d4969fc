"""envbuild.core.specifiers: every answer is packaging's, asked the first time or again."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from packaging.specifiers import InvalidSpecifier, SpecifierSet

from envbuild.core import specifiers

RELEASES = st.lists(st.integers(0, 12), min_size=1, max_size=3).map(lambda parts: ".".join(map(str, parts)))
VERSIONS = st.builds(lambda r, s: r + s, RELEASES, st.sampled_from(["", "rc1", ".post1", ".dev0", "+cu121"]))
CLAUSES = st.builds(lambda op, v, star: f"{op}{v}{star}", st.sampled_from(["==", ">=", "<", "<=", ">", "!=", "~="]),
                    RELEASES, st.sampled_from(["", "", ".*"]))
TEXTS = st.lists(CLAUSES, min_size=1, max_size=3).map(",".join)


def packaging_says(text: str, version: str, prereleases):
    return SpecifierSet(text).contains(version, prereleases=prereleases)


def packaging_normal(text: str):
    try:
        return str(SpecifierSet(text))
    except InvalidSpecifier:
        return None


@settings(max_examples=300, deadline=None)
@given(TEXTS, VERSIONS, st.sampled_from([None, True, False]))
def test_every_answer_is_packagings(text, version, prereleases):
    if packaging_normal(text) is None:
        assert specifiers.normal(text) is None
        return
    for _ in range(2):  # the second answer is the one kept
        assert specifiers.normal(text) == packaging_normal(text)
        assert specifiers.admits(text, version, prereleases) == packaging_says(text, version, prereleases)
