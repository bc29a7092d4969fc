"""Text from the user is handled in linear time and never echoed at length: credential
masking reads each character a bounded number of times, over-long values are refused at
the door in one short line that gives their length, full-width digits are one line (not a
traceback), and a spec that is not YAML (a link to a password file) is never shown.

Subprocess timeouts here are hang guards, hundreds of times the expected run; the speed
figures live in bench/bench_long_input.py."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings, strategies as st

from envbuild.cli import COMMANDS, MAX_ARGUMENT_CHARS, build_parser
from envbuild.infra.urls import mask_text, strip_text
from envbuild.spec.validate import MAX_VALUE_CHARS
from cli_support import in_process
from test_cli_image_e2e import ENVBUILD

# The pattern the masking replaced: right on short text, quadratic on long runs of letters.
REFERENCE = re.compile(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*://)(?P<user>[^/\s:@]*)(?::(?P<pw>[^/\s@]*))?@")


def reference_mask(text: str) -> str:
    return REFERENCE.sub(lambda m: f"{m['scheme']}{m['user']}:***@" if m["pw"] is not None else f"{m['scheme']}***@",
                         text)


@pytest.mark.slow
@settings(max_examples=3000, deadline=None)
@given(st.text(alphabet="ab1+.-:/@ \t\nxé", max_size=40))
def test_masking_gives_what_the_pattern_gave(text):
    assert mask_text(text) == reference_mask(text)
    assert strip_text(text) == REFERENCE.sub(lambda m: m["scheme"], text)


def test_masking_a_long_text_is_linear():
    """Two million characters in the shapes that made the pattern quadratic (a run of
    letters; a scheme followed by a long user part with no "@"): the old pattern would take
    hours on each, the child must finish well inside the guard."""
    code = ("from envbuild.infra.urls import mask_text\n"
            "n = 2_000_000\n"
            "for text in ('a' * n, 'a://' + 'b' * n, 'a://b:' * (n // 6), 'x' * n + '://u' + 'v' * n):\n"
            "    assert mask_text(text) == text\n"
            "print(mask_text('see https://user:' + 's' * n + '@host/x')[-15:])\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "user:***@host/x"


def envbuild(*args, cwd: Path, stdin=None) -> subprocess.CompletedProcess:
    return in_process(*args, cwd=cwd, stdin=stdin)


def one_short_line(proc: subprocess.CompletedProcess, limit: int = 700) -> str:
    """Exit 2, no traceback, stderr one `envbuild: error:` line of bounded length."""
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("envbuild: error: "), proc.stderr[:2000]
    assert len(lines[0]) <= limit, len(lines[0])
    return lines[0]


LONG = 100_000


def _spec_with(path: tuple, value) -> dict:
    spec = {"frameworks": {"pytorch": "2.4"}, "target": {"driver": "550.54.15", "gpus": ["A100"]}}
    node = spec
    for part in path[:-1]:
        node = node.setdefault(part, {})
    node[path[-1]] = value
    return spec


SPEC_VALUES = {
    "name": (("name",), "a" * LONG),
    "cuda": (("cuda",), "1" * LONG),
    "cudnn": (("cudnn",), "8." * (LONG // 2)),
    "python": (("python",), "3." + "1" * LONG),
    "target.driver": (("target", "driver"), "5" * LONG),
    "target.gpus": (("target", "gpus"), ["A" * LONG]),
    "a framework's version": (("frameworks", "pytorch"), "==" + "1." * (LONG // 2)),
    "a framework's name": (("frameworks", "t" * LONG), None),
    "channels (a URL with a password)": (("channels",), ["https://user:" + "p" * LONG + "@host/c"]),
    "base_image": (("base_image",), "a" * LONG + ":1"),
    "packages.pip": (("packages", "pip"), ["e" * LONG + "==1"]),
    "packages.conda": (("packages", "conda"), ["n" * LONG]),
    "env value": (("env", "X"), "v " * (LONG // 2)),
    "env name": (("env", "X" * LONG), "1"),
    "image.repository": (("image", "repository"), "a/" * (LONG // 2) + "a"),
    "an unknown key": (("k" * LONG,), 1),
}


@pytest.mark.parametrize("field", list(SPEC_VALUES))
def test_over_long_spec_values_are_refused_in_one_short_line(field, tmp_path):
    path, value = SPEC_VALUES[field]
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(_spec_with(path, value), width=10 ** 9))
    for proc in (envbuild("resolve", spec, cwd=tmp_path), envbuild("resolve", "-", cwd=tmp_path,
                                                                    stdin=spec.read_text())):
        line = one_short_line(proc)
        assert re.search(rf"\b{MAX_VALUE_CHARS}\b", line) and "p" * 300 not in line
    as_json = envbuild("resolve", spec, "--json", cwd=tmp_path)
    error = json.loads(as_json.stdout)["error"]
    assert all(len(error[k] or "") <= 1100 for k in ("line", "message", "where", "hint"))


def test_the_console_script_says_the_same_line(tmp_path):
    """The tests here run `main` in this process; the installed console script, a process
    of its own, refuses with the same line and exit status."""
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(_spec_with(("name",), "a" * LONG), width=10 ** 9))
    done = subprocess.run([ENVBUILD, "resolve", str(spec)], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert one_short_line(done) == one_short_line(envbuild("resolve", spec, cwd=tmp_path))


def _value_flags() -> list[tuple[str, str]]:
    found = []
    for command in COMMANDS:
        parser = build_parser(command)
        sub = next(a for a in parser._actions if a.dest == "command").choices[command]
        found += [(command, a.option_strings[-1]) for a in sub._actions
                  if a.option_strings and a.nargs != 0 and a.dest != "help"]
    return found


@pytest.mark.parametrize("command, flag", _value_flags())
def test_every_flag_refuses_an_over_long_value(command, flag, tmp_path):
    args = [command, *(["k8s"] if command == "export" else []), flag, "x" * (MAX_ARGUMENT_CHARS + 1)]
    line = one_short_line(envbuild(*args, cwd=tmp_path), limit=400)
    assert f"{flag}:" in line and f"{MAX_ARGUMENT_CHARS + 1} characters" in line


@pytest.mark.parametrize("flag, value", [
    ("--gpu", "A" * 4000), ("--gpu", "a " * 2000), ("--cuda", "1" * 4000), ("--driver", "5" * 4000),
    ("--framework", "pytorch==" + "1 " * 1990), ("--python", "3." + "1" * 3990), ("--base", "b" * 3990 + ":1"),
])
def test_long_flag_values_under_the_cap_are_one_short_line(flag, value, tmp_path):
    line = one_short_line(envbuild("resolve", "--framework", "jax", flag, value, cwd=tmp_path))
    assert "characters" in line


def test_a_long_index_url_is_one_line_without_its_password(tmp_path):
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(_spec_with(("name",), "x")))
    for host in ("h" * 64 + ".example", "h" * 3000):
        line = one_short_line(envbuild("lock", "spec.yaml", "--index-url", f"https://user:hunter2@{host}/simple",
                                       cwd=tmp_path))
        assert "malformed index URL" in line and "hunter2" not in line


@pytest.mark.parametrize("args", [
    ("--gpu", "８.６"), ("--gpu", "sm_８６"), ("--cuda", "１２.４"), ("--cuda", "cu１２１"), ("--driver", "５５０.５４.１５"),
    ("--python", "３.１１"), ("--framework", "pytorch==２.４"), ("--cudnn", "８.９"),
    ("--gpu", "A100:８"), ("--gpu", "A100 ８"), ("--gpu", "A１00"), ("--gpu", "A100é"),
])
def test_full_width_digits_are_one_line(args, tmp_path):
    """Refused, never read past: the GPU matcher would take "A100:８" for an A100."""
    line = one_short_line(envbuild("resolve", "--framework", "jax", *args, cwd=tmp_path))
    assert args[0] in line


def test_full_width_digits_in_a_spec_are_one_line(tmp_path):
    for path, value in ((("target", "gpus"), ["８.６"]), (("target", "driver"), "５５０.５４.１５"), (("cuda",), "１２.４")):
        spec = tmp_path / "spec.yaml"
        spec.write_text(yaml.safe_dump(_spec_with(path, value), allow_unicode=True))
        one_short_line(envbuild("resolve", spec, cwd=tmp_path))


SECRET = "S3CRET"
NOT_SPECS = {
    "shadow": f"root:$6${SECRET}salt$hash:19000:0:99999:7:::\nbob:$y${SECRET}2:19000::::::\n",
    "passwd": f"root:x:0:0:{SECRET}:/root:/bin/bash\n",
    "private key": f"-----BEGIN OPENSSH PRIVATE KEY-----\nb3Bl{SECRET}\n-----END OPENSSH PRIVATE KEY-----\n",
    "json credentials": json.dumps({"password": SECRET, "user": "me"}) + "\n",
    "aws credentials": f"[default]\naws_secret_access_key = {SECRET}\n",
    "netrc": f"machine host login me password {SECRET}\n",
    "a .env file": f"TOKEN={SECRET}\n",
    "a local YAML tag": f"!{SECRET} {{a: 1}}\n",
    "an unknown tag on a value": f"x: !{SECRET} 1\n",
    "an undefined alias": f"a: *{SECRET}\n",
    "an unknown escape": f'key: "{SECRET}\\q"\n',
    "a bad indent": f"x: {SECRET}\n  y: {SECRET}2\n",
    "a mapping of secrets": f"password: {SECRET}\napi_key: {SECRET}\n",
}


@pytest.mark.parametrize("kind", list(NOT_SPECS))
def test_a_spec_that_is_not_yaml_is_never_echoed(kind, tmp_path):
    """The spec path is a link to a file that is no spec: one line, and none of its text."""
    (tmp_path / "secret").write_text(NOT_SPECS[kind])
    (tmp_path / "spec.yaml").symlink_to(tmp_path / "secret")
    for args in (("spec.yaml",), ("spec.yaml", "--gpu", "8.6"), ("spec.yaml", "--json")):
        proc = envbuild("resolve", *args, cwd=tmp_path)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr
        assert SECRET not in proc.stderr + proc.stdout
