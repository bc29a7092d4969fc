"""envbuild.core.versions: `parse_constraint` reads conda and PEP 440 constraints into one
SpecifierSet, so a version satisfies a parsed constraint exactly when packaging's
SpecifierSet of the PEP 440 meaning says so; malformed text is a ValueError (a one-line
UserError once it comes from a spec), never another exception."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from envbuild import frameworks
from envbuild.core.values import CudaVersion
from envbuild.core.versions import cuda_from_local, cuda_to_local, parse_constraint, parse_version, read_local_label
from envbuild.infra.errors import UserError
from envbuild.spec import spec_from_mapping

SETTINGS = settings(max_examples=200, deadline=None)

RELEASES = st.lists(st.integers(0, 12), min_size=1, max_size=3).map(lambda parts: ".".join(map(str, parts)))
SUFFIXES = st.sampled_from(["", "", "", "rc1", "a2", ".post1", ".dev0"])
VERSIONS = st.builds(lambda r, s: r + s, RELEASES, SUFFIXES)


@st.composite
def constraints(draw):
    """(the text a user writes, what it means in PEP 440)."""
    base = draw(RELEASES)
    form = draw(st.sampled_from(["==", ">=", "<", "<=", ">", "!=", "~=", "==*", "!=*", "conda", "conda=", "range"]))
    if form == "~=":
        base = base if "." in base else base + ".0"  # ~= needs two parts
        return f"~={base}", f"~={base}"
    if form in ("==*", "!=*"):
        return f"{form[:2]}{base}.*", f"{form[:2]}{base}.*"
    if form in ("conda", "conda="):  # conda: `1.6` and `=1.6` are prefix matches
        return ("" if form == "conda" else "=") + base, f"=={base}.*"
    if form == "range":
        high = draw(RELEASES)
        return f">={base},<{high}", f">={base},<{high}"
    return f"{form}{base}", f"{form}{base}"


@SETTINGS
@given(constraints(), VERSIONS)
def test_a_version_satisfies_a_constraint_iff_packaging_says_so(constraint, version):
    text, pep = constraint
    # envbuild's rule: a pre-release matches only a constraint that names one (these name none)
    assert parse_constraint(text).contains(version) == SpecifierSet(pep).contains(Version(version), prereleases=False)


@SETTINGS
@given(constraints())
def test_a_parsed_constraint_prints_its_pep440_meaning(constraint):
    text, pep = constraint
    assert SpecifierSet(str(parse_constraint(text))) == SpecifierSet(pep)


def test_local_labels_and_any():
    c = parse_constraint("1.7.1+cu101")
    assert c.local == "cu101" and str(c) == "==1.7.1+cu101"
    assert c.contains("1.7.1+cu101") and c.contains("1.7.1") and not c.contains("1.7.1+cu102")
    assert not c.contains("1.7.2+cu101")
    for anything in (None, "", "*", "any"):
        assert parse_constraint(anything).any and parse_constraint(anything).contains("0.0.1")
    assert parse_constraint("==2.1.2").exact == Version("2.1.2") and parse_constraint("2.1").exact is None


def test_a_pre_release_matches_only_a_constraint_that_names_one():
    assert not parse_constraint(">=2.0").contains("2.1.0rc1")
    assert parse_constraint(">=2.1.0rc1").contains("2.1.0rc2")
    assert parse_constraint("2.1.0rc1").contains("2.1.0rc1") and not parse_constraint("2.1.0rc1").contains("2.1.0")


@pytest.mark.parametrize("text", ["2.1|2.2", ">=", "1.6,,2", "py37h1234_0 1.6", ">=1.6.*", "1.x", "+cu", "==1.0+cu1,==1.0+cu2",
                                  ">=1.0+cu101", "~=1", "abc", "=="])
def test_malformed_constraints_are_value_errors(text):
    with pytest.raises(ValueError):
        parse_constraint(text)


@SETTINGS
@given(st.text(max_size=16))
def test_any_text_parses_or_is_a_value_error(text):
    try:
        parsed = parse_constraint(text)
    except ValueError as exc:
        assert "\n" not in str(exc).strip()
        return
    parsed.contains("1.0")  # a constraint that parsed can be asked


@SETTINGS
@given(st.text(max_size=16))
def test_a_spec_with_any_constraint_resolves_or_is_a_user_error(text):
    try:
        spec = spec_from_mapping({"frameworks": {"pytorch": text}})
    except UserError as exc:
        assert "\n" not in exc.line()
        return
    assert spec.frameworks[0].name == "pytorch"


@SETTINGS
@given(RELEASES, RELEASES)
def test_parse_version_orders_as_packaging(a, b):
    assert (parse_version(a) < parse_version(b)) == (Version(a) < Version(b))


@pytest.mark.parametrize("text", ["", " ", "1..2", "x.y", "12.1-foo"])
def test_parse_version_malformed(text):
    with pytest.raises(ValueError):
        parse_version(text)


@SETTINGS
@given(st.integers(7, 13), st.integers(0, 9))
def test_cuda_wheel_labels_round_trip(major, minor):
    cuda = f"{major}.{minor}"
    label = cuda_to_local(CudaVersion.parse(cuda))
    assert cuda_from_local(label) == cuda
    assert read_local_label(label).cuda == cuda


def test_local_label_kinds():
    # jaxlib's own labels are read by its plugin; the common reader leaves them unknown
    assert frameworks.read_label("cuda11.cudnn86").cudnn == "8.6" and frameworks.read_label("cuda11.cudnn86").cuda == "11"
    assert frameworks.read_label("cuda111").cuda == "11.1"
    assert read_local_label("cuda111").kind == "unknown"
    assert frameworks.read_label("cu121") == read_local_label("cu121")
    assert [read_local_label(x).kind for x in ("cpu", "rocm5.6", "g1234abc")] == ["cpu", "rocm", "unknown"]
    with pytest.raises(ValueError):
        cuda_to_local(CudaVersion.parse("12.10"))
