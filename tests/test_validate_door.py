"""`resolve` already refuses every string the later stages could not write safely (anchored
patterns, no control characters), YAML merge keys follow YAML, and URL credentials are
masked in messages and JSON. Through the real CLI."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from cli_support import in_process

BASE = 'frameworks: {pytorch: "2.1.2"}\ncuda: "12.1"\npython: "3.10"\ninstaller: conda\n'


def envbuild(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return in_process(*args, cwd=cwd)


def one_line(proc: subprocess.CompletedProcess, code: int = 2) -> str:
    assert proc.returncode == code, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("envbuild: error: "), proc.stderr
    return lines[0]


@pytest.mark.parametrize("extra, words", [
    ('env: {"X\\n": "1"}', "control character \\n"),  # `$` would have let the final newline through
    ('env: {X: "a\\nRUN id"}', "control character \\n"),
    ('env: {X: "a\\u0000"}', "control character \\x00"),
    ('channels: ["conda-forge;id"]', "malformed channel"),
    ('channels: ["conda-forge\\n"]', "control character \\n"),
    ('channels: ["my channel"]', "malformed channel"),
    ('packages: {conda: ["numpy`id`"]}', "malformed conda package"),
    ('packages: {conda: ["numpy; rm -rf /"]}', "malformed conda package"),
    ('packages: {conda: ["numpy\\n"]}', "control character \\n"),
    ('packages: {pip: ["einops==0.7.0\\n--index-url http://evil"]}', "control character \\n"),
    ('image: {repository: "127.0.0.1:5000/team/x\\n"}', "control character \\n"),
    ('base_image: "nvidia/cuda:12.4.1-runtime-ubuntu22.04\\t"', "control character \\t"),
    ('name: "train\\n"', "control character \\n"),
    ('target: {driver: "535.104.05\\u2028"}', "control character \\u2028"),
])
def test_resolve_refuses_what_later_stages_could_not_write(tmp_path, extra, words):
    (tmp_path / "spec.yaml").write_text(BASE + extra + "\n")
    line = one_line(envbuild("resolve", "spec.yaml", cwd=tmp_path))
    assert words in line and "spec.yaml:" in line


@pytest.mark.parametrize("channels", [
    "[conda-forge, pytorch/label/nightly, ./mirror/pytorch, /srv/conda/nvidia, ~/chan]",
    '["https://conda.anaconda.org/pytorch", "file:///srv/conda/nvidia"]',
])
def test_channels_users_write_still_pass(tmp_path, channels):
    (tmp_path / "spec.yaml").write_text(BASE + f"channels: {channels}\n"
                                        'packages: {conda: ["numpy>=1.26", "scipy 1.11.* py310*", '
                                        '"conda-forge::pandas=2.1", "numpy[version=\'>=1.2\']"]}\n')
    proc = envbuild("resolve", "spec.yaml", "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr


def test_an_explicit_key_overrides_a_merged_one(tmp_path):
    (tmp_path / "spec.yaml").write_text(BASE + "target:\n  <<: {driver: \"450.80.02\", gpus: [A100]}\n"
                                        "  driver: \"535.104.05\"\n")
    proc = envbuild("resolve", "spec.yaml", "--json", cwd=tmp_path)
    resolved = json.loads(proc.stdout)["resolved"]
    assert resolved["driver"] == "535.104.05" and resolved["gpus"][0]["compute_capability"] == "8.0"
    # a key written twice in one mapping is still a mistake
    (tmp_path / "spec.yaml").write_text(BASE + "target: {driver: \"450.80.02\", driver: \"535.104.05\"}\n")
    assert "duplicate key 'driver'" in one_line(envbuild("resolve", "spec.yaml", cwd=tmp_path))


@pytest.mark.parametrize("url, words", [
    ("https://pypi.org/simple\n--trusted-host evil", "malformed index URL"),
    ("https://pypi.org/simple --extra-index-url x", "malformed index URL"),
    ("ftp://pypi.org/simple", "malformed index URL"),
])
@pytest.mark.parametrize("flag", ["--index-url", "--extra-index-url"])
def test_bad_index_urls_are_refused_before_any_work(tmp_path, url, words, flag):
    (tmp_path / "spec.yaml").write_text(BASE)
    line = one_line(envbuild("lock", "spec.yaml", flag, url, "-o", "lock", cwd=tmp_path))
    assert words in line and f"{flag}:" in line
    assert not (tmp_path / "lock").exists()


def test_credentials_are_masked_in_the_error_line_and_json(tmp_path):
    (tmp_path / "spec.yaml").write_text(BASE)
    proc = envbuild("lock", "spec.yaml", "--index-url", "https://alice:s3cret@idx.example/sim ple", "--json",
                    cwd=tmp_path)
    assert proc.returncode == 2
    assert "s3cret" not in proc.stderr + proc.stdout
    assert "alice:***@idx.example" in proc.stderr
    assert json.loads(proc.stdout)["error"]["kind"] == "bad_input"
