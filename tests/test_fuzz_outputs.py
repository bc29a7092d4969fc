"""Every string a spec or a flag carries (name, env keys and values, channels, conda and pip
packages, image references, index URLs), fuzzed with control characters, quotes, shell and
Dockerfile syntax, through validation to what envbuild writes: the rendered Dockerfile
(read back by the Go Dockerfile parser) and the lock folder's files (written by the lock
folder's own writer, read back by YAML, packaging and line checks). A value is either
refused in one clean line, or arrives without a control character, without a new line
or instruction, and without URL credentials."""
from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path

import dockerfile
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from packaging.requirements import Requirement

import image_support as support
from envbuild import pipeline
from envbuild.dockerfile import render
from envbuild.infra.errors import UserError
from envbuild.lock import conda_lockfile, folder, pip_lock
from envbuild.lock.metadata import Stamp
from envbuild.lock.request import SolveRequest
from envbuild.spec import spec_from_mapping
from envbuild.spec.validate import check_index_url

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
NASTY = st.sampled_from(["\n", "\r", "\t", "\x00", "\x1b", "\x7f", "\u2028", "\u0085", "\ufeff", ";", "`", "$", "$(id)",
                         "\\", '"', "'", " ", "#", "&&", "@", ":", "/", "=", "*", "\nRUN rm -rf /", "\\\n"])
PLAUSIBLE = st.sampled_from(["numpy", "OMP_NUM_THREADS", "conda-forge", "https://user:tok@h.example/simple",
                             "127.0.0.1:5000/team/x", "nvidia/cuda:12.4.1-runtime-ubuntu22.04", "einops==0.7.0",
                             "file:///srv/chan", "numpy>=1.26", "conda-forge::scipy", "x", "1"])
FUZZ = st.lists(st.one_of(NASTY, PLAUSIBLE, st.text(max_size=5)), min_size=1, max_size=4).map("".join)
STAMP = Stamp("s" * 64, "m" * 12, "r" * 64, ("linux-64",))
BASE = {"frameworks": {"cupy": ">=13"}, "cuda": "12.4"}
FIELDS = {
    "name": lambda s: {"name": s},
    "env key": lambda s: {"env": {s: "1"}},
    "env value": lambda s: {"env": {"X": s}},
    "channel": lambda s: {"channels": [s]},
    "conda package": lambda s: {"packages": {"conda": [s]}},
    "pip package": lambda s: {"packages": {"pip": [s]}},
    "image repository": lambda s: {"image": {"repository": s}},
    "base image": lambda s: {"base_image": s},
}


def clean(text: str, where: str) -> None:
    bad = [c for c in text if not c.isprintable() and c != "\n"]
    assert not bad, f"{where} holds {bad!r}"


def dockerfile_of(spec) -> str:
    resolution = support.resolution("cuda", installer="conda", name=spec.name or "demo", env=spec.env,
                                    base_ref=spec.base_image)
    resolution = dataclasses.replace(resolution, spec=dataclasses.replace(
        resolution.spec, channels=spec.channels, conda_packages=spec.conda_packages, pip_packages=spec.pip_packages,
        image_repository=spec.image_repository))
    base = resolution.resolved.base_image.ref
    return render.render(render.RenderInput(resolution, "conda", base, None, facts=pipeline.context_facts(resolution)))


BASELINE = [c.cmd for c in dockerfile.parse_string(dockerfile_of(spec_from_mapping(BASE)))]


def lock_folder_of(spec, index_url: str | None) -> dict[str, str]:
    """The lockfiles these strings reach, written by the lock folder's writer."""
    requirements = spec.pip_packages or ("einops==0.7.0",)
    request = pip_lock.PipRequest("linux-64", "3.11", "2.35", tuple(requirements), index_url or pip_lock.DEFAULT_INDEX,
                                  ("https://download.pytorch.org/whl/cu124",))
    pins = []
    for text in requirements:  # the requirements as written, pinned where they name one version
        req = Requirement(text)
        exact = [s.version for s in req.specifier if s.operator == "=="]
        pins.append(pip_lock.PipPin(req.name, exact[0] if len(exact) == 1 else "", ("sha256:" + "0" * 64,)))
    pip = pip_lock.PipLock(request, tuple(pins), hashed=True, note="")
    solve = SolveRequest("linux-64", spec.channels or ("conda-forge",), spec.conda_packages, (), (), ())
    lockfile = conda_lockfile.build_lockfile({}, [solve], STAMP, {"envbuild.spec_hash": STAMP.spec_hash}, ["spec.yaml"])
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "lock"
        with folder.replacing(out) as new:
            conda_lockfile.write_lockfile(lockfile, new.file(folder.CONDA_LOCKFILE))
            new.write_text(folder.PIP_LOCKFILE, pip_lock.render(pip, STAMP))
        assert folder.verify(out) == []
        return {p.name: p.read_text(encoding="utf-8") for p in out.iterdir() if p.is_file()}


def check_requirements_lock(text: str) -> None:
    for line in text.splitlines():
        line = line.strip().removesuffix("\\").strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith(("--index-url ", "--extra-index-url ")):
            option, url = line.split(" ", 1)
            assert " " not in url and check_index_url(url, option)
        elif line.startswith("--hash=sha256:"):
            continue
        else:
            Requirement(line)  # each requirement line parses on its own


@SETTINGS
@given(field=st.sampled_from(sorted(FIELDS)), value=FUZZ, index_url=st.one_of(st.none(), FUZZ))
def test_every_string_field_reaches_the_outputs_clean(field, value, index_url):
    try:
        spec = spec_from_mapping({**BASE, **FIELDS[field](value)}, source="fuzz.yaml")
        if index_url is not None:
            check_index_url(index_url, "--index-url")
    except UserError as exc:
        line = exc.line()
        assert "\n" not in line and "\r" not in line
        clean(line, "the error line")
        return

    text = dockerfile_of(spec)
    clean(text, "the Dockerfile")
    commands = dockerfile.parse_string(text)
    assert [c.cmd for c in commands] == BASELINE  # no instruction added, none lost
    for command in commands:
        clean(command.original, f"{command.cmd} line")
    if field == "env value":
        env = [c for c in commands if c.cmd == "ENV" and "X" in c.value][-1]
        assert env.value[env.value.index("X") + 1].strip('"') in (render.quote(value).strip('"'), value)

    files = lock_folder_of(spec, index_url)
    for name, content in files.items():
        clean(content, name)
        assert "tok@" not in content and "user:" not in content  # credentials never reach a file
    data = yaml.safe_load(files[folder.CONDA_LOCKFILE])
    assert data["metadata"]["channels"]
    check_requirements_lock(files[folder.PIP_LOCKFILE])
