"""Random specs and random flag values through parse -> validate -> resolve: the only
outcomes allowed are a `Resolution` or a `UserError` (one line, exit 2). Anything else
(KeyError, TypeError, a traceback) is a bug."""
from __future__ import annotations

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from envbuild.cli import build_parser
from envbuild.core.model import BASE_FAMILIES, INSTALLERS, PLATFORMS, Resolution
from envbuild.infra.errors import UserError
from envbuild.spec import spec_from_mapping
from envbuild.spec.cli_args import spec_from_args
from envbuild.spec.parse import parse_text
from envbuild.spec.validate import FRAMEWORK_ALIASES, TOP_KEYS, validate_raw


# long Hypothesis runs: hundreds of specs and command lines per test
pytestmark = pytest.mark.slow

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Plausible pieces, so that many random specs get past validation and reach the resolver.
VERSIONS = st.sampled_from([
    "1.6.0", "1.7.1", "1.7.1+cu101", "2.1.*", ">=2.1,<2.3", "2.0.1+cu118", "2.10", "0.4.31", "24.02", "13.6.0",
    "*", "", "1.x", "==", "+cu", "2.99", "10.2", "11.0.221", "12.1", "12.4", "3.8", "3.10", "3.12", "9.9.9",
])
DRIVERS = st.sampled_from(["450.80.02", "535.104.05", "418.67", "580.65.06", "525.60.13", "470", "x.y", "99999.1"])
GPUS = st.sampled_from(["A100", "A100-80GB", "RTX 3090", "V100", "H100", "L4", "T4", "8.6", "9.0", "sm_120", "3.0",
                        "GTX 1080 Ti", "A10G", "B200", "Voodoo", "0.0"])
TEXT = st.text(max_size=12)
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-5, 5000), st.floats(allow_nan=True), TEXT, VERSIONS)
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3), max_leaves=8)
FRAMEWORKS = st.dictionaries(st.sampled_from(sorted(FRAMEWORK_ALIASES) + ["cupy-cuda12x", "keras"]),
                             st.one_of(st.none(), VERSIONS), max_size=3)

SPECS = st.fixed_dictionaries(
    {},
    optional={
        "name": st.one_of(TEXT, st.just("fuzz")),
        "frameworks": st.one_of(FRAMEWORKS, VALUES),
        "cuda": st.one_of(VERSIONS, VALUES),
        "cudnn": st.one_of(VERSIONS, VALUES),
        "python": st.one_of(VERSIONS, VALUES),
        "target": st.one_of(
            st.fixed_dictionaries({}, optional={"driver": st.one_of(DRIVERS, VALUES),
                                                "gpus": st.one_of(st.lists(GPUS, max_size=3), VALUES),
                                                "platform": st.sampled_from(PLATFORMS + ("linux64",))}),
            VALUES,
        ),
        "installer": st.one_of(st.sampled_from(INSTALLERS), VALUES),
        "base": st.one_of(st.sampled_from(BASE_FAMILIES), VALUES),
        "base_image": st.one_of(st.just("nvidia/cuda:12.4.1-runtime-ubuntu22.04"), VALUES),
        "channels": VALUES,
        "packages": VALUES,
        "env": VALUES,
        "strict": VALUES,
        "unknown": VALUES,
    },
)


# Well-shaped specs with random (often contradictory) values: most pass validation, so
# these stress the resolver rather than the validator.
PLAUSIBLE = st.fixed_dictionaries(
    {"frameworks": st.dictionaries(st.sampled_from(["pytorch", "tensorflow", "jax", "rapids", "cupy", "torch"]),
                                   st.one_of(st.none(), VERSIONS), min_size=1, max_size=3)},
    optional={
        "cuda": st.sampled_from(["9.2", "10.1", "10.2", "11.0.221", "11.8", "12.1", "12.4", "12.8", "13.0", "99.9"]),
        "cudnn": st.sampled_from(["7.6", "8", "8.9", "9.1"]),
        "python": st.sampled_from(["2.7", "3.6", "3.8", "3.10", "3.12", "3.14"]),
        "target": st.fixed_dictionaries({}, optional={"driver": DRIVERS, "gpus": st.lists(GPUS, max_size=3),
                                                      "platform": st.sampled_from(PLATFORMS)}),
        "installer": st.sampled_from(INSTALLERS),
        "base": st.sampled_from(BASE_FAMILIES),
        "strict": st.booleans(),
    },
)


def _through_resolver(spec) -> None:
    from envbuild.resolver import resolve

    try:
        resolution = resolve(spec)
    except UserError:
        return
    assert isinstance(resolution, Resolution)
    assert resolution.verdict in ("ok", "unverified", "conflict")
    resolution.to_json()


@SETTINGS
@given(SPECS)
def test_random_mappings(data):
    try:
        spec = spec_from_mapping(data, source="fuzz")
    except UserError as exc:
        assert "\n" not in exc.line()
        return
    _through_resolver(spec)


@SETTINGS
@given(PLAUSIBLE)
def test_plausible_mappings(data):
    test_random_mappings.hypothesis.inner_test(data)


@SETTINGS
@given(SPECS)
def test_random_mappings_as_yaml(data):
    text = yaml.safe_dump(data, allow_unicode=True)
    try:
        spec = validate_raw(parse_text(text, "fuzz.yaml"))
    except UserError as exc:
        assert "\n" not in exc.line()
        return
    _through_resolver(spec)


@SETTINGS
@given(st.lists(st.sampled_from(list("abc:{}[]-,'\"&*!|>#% \n\t0123456789.") + [f"{k}: " for k in TOP_KEYS]), max_size=40))
def test_random_yaml_text(pieces):
    text = "".join(pieces)
    try:
        validate_raw(parse_text(text, "fuzz.yaml"))
    except UserError as exc:
        assert "\n" not in exc.line()


GOOD_FLAG_VALUES = {
    "--framework": st.builds(lambda n, v: f"{n}=={v}" if v else n, st.sampled_from(sorted(FRAMEWORK_ALIASES)), VERSIONS),
    "--cuda": VERSIONS,
    "--cudnn": VERSIONS,
    "--driver": DRIVERS,
    "--gpu": GPUS,
    "--python": VERSIONS,
    "--installer": st.sampled_from(INSTALLERS),
    "--platform": st.sampled_from(PLATFORMS),
    "--base": st.sampled_from(BASE_FAMILIES + ("nvidia/cuda:12.4.1-runtime-ubuntu22.04",)),
}
FLAG_VALUES = {flag: st.one_of(values, TEXT) for flag, values in GOOD_FLAG_VALUES.items()}
FLAGS = st.lists(st.sampled_from(sorted(FLAG_VALUES)).flatmap(lambda f: FLAG_VALUES[f].map(lambda v: f"{f}={v}")), max_size=6)
PLAUSIBLE_FLAGS = st.tuples(
    GOOD_FLAG_VALUES["--framework"].map(lambda v: f"--framework={v}"),
    st.lists(st.sampled_from(sorted(GOOD_FLAG_VALUES)).flatmap(
        lambda f: GOOD_FLAG_VALUES[f].map(lambda v: f"{f}={v}")), max_size=5),
).map(lambda t: [t[0], *t[1]])


@SETTINGS
@given(PLAUSIBLE_FLAGS, st.booleans())
def test_plausible_flags(argv, strict):
    test_random_flags.hypothesis.inner_test(argv, strict)


@SETTINGS
@given(FLAGS, st.booleans())
def test_random_flags(argv, strict):
    args = build_parser().parse_args(["resolve", *argv, *(["--strict"] if strict else [])])
    try:
        spec = spec_from_args(args)
    except UserError as exc:
        assert "\n" not in exc.line()
        return
    _through_resolver(spec)
