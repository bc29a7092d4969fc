"""The spec parser and validator: good specs read right, each kind of bad input is one
line that says where (file:line:column or the flag), exit 2, never a traceback."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from envbuild.commands._spec import load_spec  # as commands read specs: GPU names checked against the matrix
from envbuild.core.model import FrameworkRequest
from envbuild.infra.errors import UserError
from envbuild.spec import spec_from_mapping, spec_from_text
from envbuild.spec.validate import NESTED_KEYS, TOP_KEYS, canonical_framework, split_framework

from cli_support import in_process

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = ROOT / "schema" / "spec.schema.json"
RECIPES = sorted((ROOT / "recipes").glob("*.yaml"))

FULL = """\
name: train-a100
frameworks: {pytorch: "2.1.*", cupy: ">=13"}
cuda: "12.1"
cudnn: "8.9"
python: 3.10
target: {driver: "535.104.05", gpus: ["A100-80GB", "8.6", sm_90], platform: linux-64}
installer: conda
base: auto
channels: [pytorch, nvidia, conda-forge]
packages: {conda: [numpy], pip: ["einops==0.7.0"]}
env: {FOO: bar, OMP_NUM_THREADS: 4, DEBUG: yes}
image: {repository: "127.0.0.1:5000/team/train"}
"""


def test_full_spec_reads_every_key(tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_text(FULL)
    spec = load_spec(path)
    assert spec.name == "train-a100"
    assert spec.frameworks == (FrameworkRequest("pytorch", "2.1.*"), FrameworkRequest("cupy", ">=13"))
    assert (spec.cuda, spec.cudnn, spec.python) == ("12.1", "8.9", "3.10")
    assert spec.driver == "535.104.05"
    assert spec.gpus == ("A100-80GB", "8.6", "9.0")  # names as written, capabilities normalised
    assert (spec.platform, spec.installer, spec.base, spec.base_image) == ("linux-64", "conda", "auto", None)
    assert spec.channels == ("pytorch", "nvidia", "conda-forge")
    assert spec.conda_packages == ("numpy",) and spec.pip_packages == ("einops==0.7.0",)
    assert spec.env == (("DEBUG", "yes"), ("FOO", "bar"), ("OMP_NUM_THREADS", "4"))
    assert spec.image_repository == "127.0.0.1:5000/team/train"
    assert spec.source == str(path)


def test_unquoted_numbers_keep_their_written_form():
    # YAML reads 3.10 and 2.10 as the float 3.1 / 2.1; the spec means the text.
    spec = spec_from_text("frameworks: {tensorflow: 2.10}\npython: 3.10\ncuda: 11.2\ntarget: {driver: 460.32}\n")
    assert spec.framework("tensorflow").constraint == "2.10"
    assert (spec.python, spec.cuda, spec.driver) == ("3.10", "11.2", "460.32")


def test_defaults_and_minimal_spec():
    spec = spec_from_text("frameworks: {jax: null}")
    assert spec.frameworks == (FrameworkRequest("jax", None),)
    assert (spec.platform, spec.base, spec.installer, spec.strict) == ("linux-64", "auto", None, False)


@pytest.mark.parametrize(
    "written, canonical",
    [
        ("torch", "pytorch"), ("pytorch", "pytorch"), ("tf", "tensorflow"), ("tensorflow-gpu", "tensorflow"),
        ("jaxlib", "jax"), ("jax[cuda12]", "jax"), ("cudf", "rapids"), ("cuml", "rapids"),
        ("cupy-cuda12x", "cupy"), ("CuPy", "cupy"),
    ],
)
def test_framework_aliases(written, canonical):
    spec = spec_from_mapping({"frameworks": {written: None}})
    assert spec.frameworks == (FrameworkRequest(canonical, None),)


def test_names_that_pin_cuda():
    assert canonical_framework("cupy-cuda12x") == ("cupy", "12")
    assert canonical_framework("cupy-cuda102") == ("cupy", "10.2")
    assert canonical_framework("cudf-cu11") == ("rapids", "11")
    assert canonical_framework("jax-cuda12-plugin") == ("jax", "12")
    assert spec_from_text('frameworks: {cupy-cuda12x: ">=13"}\ncuda: "12.4"').cuda == "12.4"


def test_split_framework():
    assert split_framework("pytorch==1.7.1+cu101") == ("pytorch", "1.7.1+cu101")
    assert split_framework("pytorch==2.1.*") == ("pytorch", "2.1.*")
    assert split_framework("pytorch==2.1.2") == ("pytorch", "==2.1.2")
    assert split_framework("tensorflow>=2.15,<2.17") == ("tensorflow", ">=2.15,<2.17")
    assert split_framework("pytorch 1.6") == ("pytorch", "1.6")
    assert split_framework("jax") == ("jax", None)
    with pytest.raises(ValueError):
        split_framework("==1.6")


def test_base_accepts_an_image_as_shorthand():
    spec = spec_from_text('frameworks: {pytorch: null}\nbase: "pytorch/pytorch:2.1.2-cuda12.1-cudnn8-runtime"')
    assert (spec.base, spec.base_image) == ("auto", "pytorch/pytorch:2.1.2-cuda12.1-cudnn8-runtime")


def test_cuda_alone_is_a_request():
    assert spec_from_text('cuda: "12.4"').cuda == "12.4"


# Each bad-input class: spec text, words the message must contain, where it must point.
BAD = [
    pytest.param("frameworks: {pytorch: 1.6\ncuda: 11.0\n", "invalid YAML", ":2:", id="yaml-syntax"),
    pytest.param("frameworks: {pytorch: null}\n  cuda: 11.0\n", "invalid YAML", ":2:", id="yaml-indent"),
    pytest.param("frameworks: {pytorch: null}\ncudda: '11.0'\n", "did you mean 'cuda'", ":2:1", id="unknown-key"),
    pytest.param("frameworks: {pytorch: null}\ntarget: {drivr: '450.80.02'}\n", "did you mean 'driver'", ":2:10", id="unknown-nested-key"),
    pytest.param("frameworks: {pytorch: null}\ndriver: '450.80.02'\n", "under `target:`", ":2:1", id="nested-key-at-top"),
    pytest.param("frameworks: {pytroch: '1.6.0'}\n", "unknown framework 'pytroch' (did you mean 'pytorch'", ":1:14", id="unknown-framework"),
    pytest.param("frameworks: {keras: null}\n", "unknown framework 'keras'", ":1:14", id="unknown-framework-no-match"),
    pytest.param("frameworks: {pytorch: '1.x'}\n", "malformed version constraint", ":1:23", id="malformed-constraint"),
    pytest.param("frameworks: {pytorch: '>=2.1,<'}\n", "malformed version constraint", ":1:23", id="malformed-constraint-2"),
    pytest.param("frameworks: {pytorch: null}\ncuda: 'twelve'\n", "malformed CUDA version", ":2:7", id="malformed-cuda"),
    pytest.param("frameworks: {pytorch: null}\npython: '3'\n", "needs major.minor", ":2:9", id="python-major-only"),
    pytest.param("frameworks: {pytorch: null}\ntarget: {gpus: ['RTX 3099?']}\n", "unreadable GPU name 'RTX 3099?' (did you mean 'RTX 3090'", ":2:17", id="unreadable-gpu"),
    pytest.param("frameworks: {pytorch: null}\ntarget: {driver: '535'}\n", "malformed driver version", ":2:18", id="driver-branch-only"),
    pytest.param("frameworks: {pytorch: null}\ntarget: {driver: 'latest'}\n", "malformed driver version", ":2:18", id="driver-word"),
    pytest.param("frameworks: {pytorch: '1.7.1+cu101'}\ncuda: '11.0'\n", "means CUDA 10.1, but cuda: 11.0", ":1:23", id="local-tag-vs-cuda"),
    pytest.param("cuda: '12.1'\nframeworks: {pytorch: '2.1.0+cu118'}\n", "means CUDA 11.8, but cuda: 12.1", ":2:23", id="cuda-vs-local-tag"),
    pytest.param("frameworks: {torch: '2.1', pytorch: '2.0'}\n", "pytorch is pinned twice", ":1:28", id="same-framework-twice"),
    pytest.param("frameworks:\n  pytorch: '2.1'\n  pytorch: '2.0'\n", "duplicate key 'pytorch'", ":3:3", id="duplicate-key"),
    pytest.param("frameworks: {cupy-cuda11x: null}\ncuda: '12.1'\n", "cupy-cuda11x means CUDA 11", ":1:14", id="package-name-vs-cuda"),
    pytest.param("frameworks: {pytorch: '1.7.1+cu101'}\ninstaller: conda\n", "is a pip wheel, but installer is conda", ":1:23", id="local-tag-with-conda"),
    pytest.param("frameworks: {pytorch: '2.1.0+cpu'}\n", "+cpu is not a CUDA build", ":1:23", id="cpu-local-tag"),
    pytest.param("frameworks: {tensorflow-cpu: null}\n", "CPU-only build", ":1:14", id="cpu-package"),
    pytest.param("frameworks: {pytorch: null}\ninstaller: mamba\n", "unknown installer 'mamba'", ":2:12", id="installer-enum"),
    pytest.param("frameworks: {pytorch: null}\ntarget: {platform: linux64}\n", "did you mean 'linux-64'", ":2:20", id="platform-enum"),
    pytest.param("frameworks: {pytorch: null}\ntarget: {platforms: [linux-64, linux64]}\n", "unknown platform 'linux64' (did you mean 'linux-64'",
                 ":2:32", id="platforms-enum"),
    pytest.param("frameworks: {pytorch: null}\ntarget: {platforms: [linux-64, linux-64]}\n", "names a platform twice",
                 ":2:21", id="platforms-twice"),
    pytest.param("frameworks: {pytorch: null}\ntarget: {platforms: []}\n", "target.platforms is empty", ":2:21",
                 id="platforms-empty"),
    pytest.param("frameworks: {pytorch: null}\ntarget: {platforms: linux-64}\n", "must be a list", ":2:21",
                 id="platforms-not-a-list"),
    pytest.param("frameworks: {pytorch: null}\ntarget: {platform: win-64, platforms: [linux-64, linux-aarch64]}\n",
                 "is not one of target.platforms", ":2:20", id="platform-outside-platforms"),
    pytest.param("frameworks: {pytorch: null}\nbase: pytroch\n", "did you mean 'pytorch'", ":2:7", id="base-enum"),
    pytest.param("frameworks: {pytorch: null}\nbase_image: nvidia/cuda\n", "has no tag", ":2:13", id="base-image-no-tag"),
    pytest.param("frameworks: {pytorch: null}\nenv: {A: [1, 2]}\n", "env.A must be a string", ":2:10", id="env-value-list"),
    pytest.param("frameworks: {pytorch: null}\nenv: {A: null}\n", "env.A must be a string", ":2:10", id="env-value-null"),
    pytest.param("frameworks: {pytorch: null}\nenv: {1A: x}\n", "not a valid variable name", ":2:7", id="env-name"),
    pytest.param("frameworks: {pytorch: null}\nenv: [A, B]\n", "env must be a mapping", ":2:6", id="env-not-mapping"),
    pytest.param("frameworks: {pytorch: null}\npackages: {conda: [cudatoolkit=11.0]}\n", "set cuda: instead", ":2:20", id="cuda-package"),
    pytest.param("frameworks: {pytorch: null}\npackages: {pip: ['torch==2.1']}\n", "is a framework", ":2:18", id="framework-in-packages"),
    pytest.param("frameworks: {pytorch: null}\npackages: {pip: ['einops ==']}\n", "malformed pip requirement", ":2:18", id="pip-requirement"),
    pytest.param("frameworks: [pytorch]\n", "frameworks must be a mapping", ":1:13", id="frameworks-list"),
    pytest.param("frameworks: {pytorch: null}\nstrict: maybe\n", "strict must be true or false", ":2:9", id="strict-bool"),
    pytest.param("name: only-a-name\n", "nothing to resolve", ":1:1", id="no-workload"),
    pytest.param("- pytorch\n", "must be a mapping", ":1:1", id="not-a-mapping"),
    pytest.param("1: x\n", "keys must be plain names", ":1:1", id="number-key"),
    pytest.param("a: &x [*x]\n", "recursive YAML alias", ":1:", id="recursive-alias"),
    pytest.param("frameworks: !!set {pytorch}\n", "unsupported YAML tag", ":1:13", id="yaml-tag"),
]


@pytest.mark.parametrize("text, words, where", BAD)
def test_bad_input_is_one_located_line(tmp_path, text, words, where):
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    with pytest.raises(UserError) as caught:
        load_spec(path)
    line = caught.value.line()
    assert "\n" not in line
    assert words in line
    assert line.startswith(f"{path}{where}"), line


def test_one_spec_names_the_platforms_of_its_lock(tmp_path):
    from envbuild.cli import build_parser
    from envbuild.commands._spec import spec_from_args

    path = tmp_path / "spec.yaml"
    path.write_text("frameworks: {cupy: null}\ntarget: {platforms: [linux-64, linux-aarch64]}\n")
    spec = load_spec(path)
    assert (spec.platform, spec.platforms, spec.lock_platforms) == ("linux-64", ("linux-64", "linux-aarch64"),
                                                                     ("linux-64", "linux-aarch64"))
    one = spec_from_text("frameworks: {cupy: null}\ntarget: {platform: linux-64}\n")
    assert (one.platforms, one.lock_platforms) == ((), ("linux-64",))
    # one platform hashes as it always did; the platforms of a lock are part of its request
    assert one.hash() == spec_from_text("frameworks: {cupy: null}\n").hash() != spec.hash()

    def read(*argv):
        return spec_from_args(build_parser().parse_args([*argv, str(path)]))

    # --platform picks one of them (the lock still covers both), or replaces them
    picked = read("resolve", "--platform", "linux-aarch64")
    assert (picked.platform, picked.lock_platforms) == ("linux-aarch64", spec.platforms)
    assert read("resolve", "--platform", "win-64").lock_platforms == ("win-64",)
    # lock's repeated --platform names the lock's platforms
    assert read("lock", "--platform", "linux-aarch64", "--platform", "linux-64").lock_platforms == (
        "linux-aarch64", "linux-64")


def test_empty_and_missing_files(tmp_path):
    empty = tmp_path / "empty.yaml"
    empty.write_text("# nothing\n")
    with pytest.raises(UserError, match="the spec is empty"):
        load_spec(empty)
    with pytest.raises(UserError, match="spec file not found"):
        load_spec(tmp_path / "nope.yaml")


def test_spec_from_mapping_points_at_key_paths():
    with pytest.raises(UserError) as caught:
        spec_from_mapping({"frameworks": {"pytorch": None}, "target": {"gpus": ["A100", 7]}}, source="api")
    assert "target.gpus[1] must be a string" not in caught.value.line()  # numbers are accepted as text
    with pytest.raises(UserError, match=r"unknown compute capability|unknown GPU"):
        spec_from_mapping({"frameworks": {"pytorch": None}, "target": {"gpus": ["42.0"]}}, source="api")
    with pytest.raises(UserError, match="a spec must be a mapping"):
        spec_from_mapping(["pytorch"])


def _cli(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return in_process(*args, cwd=cwd)


@pytest.mark.parametrize(
    "text, words",
    [
        ("frameworks: {pytorch: 1.6\n", "invalid YAML"),
        ("frameworks: {pytroch: '1.6.0'}\n", "did you mean 'pytorch'"),
        ("frameworks: {pytorch: '1.7.1+cu101'}\ncuda: '11.0'\n", "means CUDA 10.1"),
        ("frameworks: {pytorch: null}\ntarget: {gpus: ['Voodoo5?']}\n", "unreadable GPU name 'Voodoo5?'"),
    ],
)
def test_cli_bad_spec_exits_2_with_one_line(tmp_path, text, words):
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    result = _cli("resolve", str(path))
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("envbuild: error: ") and words in lines[0]
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    "flags, words",
    [
        (["--framework", "pytorch==1.x"], "--framework pytorch==1.x: pytorch: malformed version constraint"),
        (["--framework", "pytorch", "--gpu", "RTX 3099?"], "--gpu 'RTX 3099?': unreadable GPU name"),
        (["--framework", "pytorch", "--driver", "abc"], "--driver: malformed driver version"),
        (["--framework", "pytorch==1.7.1+cu101", "--cuda", "11.0"], "means CUDA 10.1, but cuda: 11.0"),
        (["--framework", "pytorch", "--platform", "macos"], "--platform: unknown platform"),
        (["--gpu", "A100"], "command line: the spec names no framework"),
    ],
)
def test_cli_bad_flags_exit_2(flags, words):
    result = _cli("resolve", *flags, "--json")
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1 and words in result.stderr
    assert "Traceback" not in result.stderr
    # stdout still carries one JSON object for CI parsers, valid against the error schema
    import jsonschema

    answer = json.loads(result.stdout)
    jsonschema.validate(answer, json.loads((ROOT / "schema" / "error.schema.json").read_text()))
    assert answer["verdict"] == "error" and answer["error"]["exit_code"] == 2
    assert answer["error"]["line"] == result.stderr.strip().removeprefix("envbuild: error: ")


# --- JSON Schema for editors ------------------------------------------------------------------
def _schema() -> dict:
    return json.loads(SCHEMA.read_text())


def test_schema_keys_match_the_validator():
    schema = _schema()
    assert set(schema["properties"]) == set(TOP_KEYS)
    for parent, keys in NESTED_KEYS.items():
        assert set(schema["properties"][parent]["properties"]) == set(keys), parent


def test_schema_is_valid_and_matches_good_and_bad_specs():
    import jsonschema
    import yaml

    schema = _schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    assert not list(validator.iter_errors(yaml.safe_load(FULL)))
    for bad in ({"frameworks": {"pytorch": None}, "cudda": "11.0"}, {"frameworks": {"keras": None}},
                {"frameworks": {"pytorch": None}, "installer": "mamba"}, {"name": "x"}):
        assert list(validator.iter_errors(bad)), bad


def test_recipes_exist():
    assert len(RECIPES) >= 8, "recipes/ should hold at least 8 example specs"


@pytest.mark.parametrize("recipe", RECIPES, ids=lambda p: p.name)
def test_recipe_matches_schema_and_validates(recipe):
    import jsonschema
    import yaml

    jsonschema.validate(yaml.safe_load(recipe.read_text()), _schema(), cls=jsonschema.Draft202012Validator)
    load_spec(recipe)


def test_gpu_names_are_checked_by_the_catalog_the_caller_hands_in():
    # The spec layer sits below the matrices: on its own it judges only whether a GPU name is
    # readable; the GPU matrix's check (ambiguous names, nearest names) comes from the caller.
    from envbuild.matrix.lookup import spec_gpu_check

    text = "frameworks: {pytorch: null}\ntarget: {gpus: ['RTX 6000']}\n"
    assert spec_from_text(text).gpus == ("RTX 6000",)
    with pytest.raises(UserError, match="unknown GPU 'RTX 6000' .*it may be"):
        spec_from_text(text, gpu_check=spec_gpu_check)
