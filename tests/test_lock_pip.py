"""`envbuild lock`, pip path: the exact framework wheel of the CUDA variant, its index,
and hashes that pip's own resolver read from a real (local) package index."""
from __future__ import annotations

import base64
import os
import functools
import hashlib
import http.server
import json
import subprocess
import sys
import threading
import time
import zipfile
from pathlib import Path

import jsonschema
import pytest

from envbuild.infra.errors import EnvironmentProblem
from envbuild.lock.api import lock
from envbuild.lock.check import check
from envbuild.lock.pip_lock import PipLockFailed
from lock_channels import pip_resolution

ROOT = Path(__file__).resolve().parent.parent


def _wheel(folder: Path, name: str, version: str, tag: str, requires: list[str]) -> Path:
    """A minimal but installable wheel (METADATA, WHEEL, RECORD and one module)."""
    dist = f"{name}-{version}.dist-info"
    files = {
        f"{name}/__init__.py": f"__version__ = {version!r}\n",
        f"{dist}/METADATA": "Metadata-Version: 2.1\n" + f"Name: {name}\nVersion: {version}\n"
                            + "".join(f"Requires-Dist: {r}\n" for r in requires),
        f"{dist}/WHEEL": f"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\nTag: {tag}\n",
    }
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(text.encode())}")
    record.append(f"{dist}/RECORD,,")
    target = folder / f"{name}-{version}-{tag}.whl"
    with zipfile.ZipFile(target, "w") as archive:
        for path, text in files.items():
            archive.writestr(path, text)
        archive.writestr(f"{dist}/RECORD", "\n".join(record) + "\n")
    return target


def _project_page(index: Path, project: str, wheels: list[Path]) -> None:
    page = index / project
    page.mkdir(parents=True, exist_ok=True)
    links = "".join(
        f'<a href="../../../files/{w.name}#sha256={hashlib.sha256(w.read_bytes()).hexdigest()}">{w.name}</a>\n'
        for w in wheels)
    (page / "index.html").write_text(f"<!DOCTYPE html><html><body>\n{links}</body></html>\n")


@pytest.fixture(autouse=True)
def own_pip_config(monkeypatch):
    """The machine's pip configuration (mirrors, find-links) stays out of these tests;
    a test that is about the configuration sets its own."""
    for key in [k for k in os.environ if k.startswith(("PIP_", "UV_"))]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)


def _serve(root: Path, handler_class=None) -> tuple[http.server.ThreadingHTTPServer, str]:
    handler = handler_class or functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    handler.log_message = lambda *a, **k: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    """A PyPI-like base index (/idx/simple) and a PyTorch-like variant index
    (/idx/cu121), served over HTTP on 127.0.0.1."""
    root = tmp_path_factory.mktemp("pypi")
    files = root / "files"
    files.mkdir()
    torch = _wheel(files, "torch", "2.1.2+cu121", "cp310-cp310-linux_x86_64", ["filelock", "typing-extensions"])
    cpu = _wheel(files, "torch", "2.1.2+cpu", "cp310-cp310-linux_x86_64", ["filelock"])
    filelock = _wheel(files, "filelock", "3.13.1", "py3-none-any", [])
    typing = _wheel(files, "typing_extensions", "4.9.0", "py3-none-any", [])
    einops = _wheel(files, "einops", "0.7.0", "py3-none-any", [])
    # envbuild-probe exists only here: finding it proves the index that was asked
    probe = _wheel(files, "envbuild_probe", "1.0", "py3-none-any", [])
    _project_page(root / "idx" / "cu121", "torch", [torch])
    _project_page(root / "idx" / "cpu", "torch", [cpu])
    for project, wheel in (("filelock", filelock), ("typing-extensions", typing), ("einops", einops),
                           ("envbuild-probe", probe)):
        _project_page(root / "idx" / "simple", project, [wheel])
    server, url = _serve(root)
    base = f"{url}/idx"
    yield {"simple": f"{base}/simple", "cu121": f"{base}/cu121", "cpu": f"{base}/cpu", "port": server.server_address[1],
           "sha": {w.name.split("-")[0]: hashlib.sha256(w.read_bytes()).hexdigest()
                   for w in (torch, filelock, typing, einops, probe)}}
    server.shutdown()


def test_pip_lock_pins_the_variant_wheel_and_hashes_the_closure(index, tmp_path):
    spec, resolution = pip_resolution(index["cu121"], pip_packages=["einops==0.7.0"])
    result = lock(spec, resolution, None, tmp_path, index_url=index["simple"])
    assert result.pip_hashed is True and result.notes == ()
    text = (tmp_path / "requirements.lock").read_text()
    assert f"--index-url {index['simple']}\n--extra-index-url {index['cu121']}\n" in text
    assert f"torch==2.1.2+cu121 \\\n    --hash=sha256:{index['sha']['torch']}\n" in text
    assert f"filelock==3.13.1 \\\n    --hash=sha256:{index['sha']['filelock']}\n" in text
    assert f"typing-extensions==4.9.0 \\\n    --hash=sha256:{index['sha']['typing_extensions']}\n" in text
    assert f"einops==0.7.0 \\\n    --hash=sha256:{index['sha']['einops']}\n" in text
    assert f"# envbuild.spec_hash: {spec.hash()}" in text
    assert not (tmp_path / "conda-lock.yml").exists()
    assert check(spec, resolution, None, tmp_path) == []

    # pip itself accepts the file in hash-checking mode for the target.
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--isolated", "--dry-run", "--require-hashes", "--target", str(tmp_path / "t"),
         "--only-binary=:all:", "--python-version", "3.10", "--implementation", "cp", "--platform", "linux_x86_64",
         "-r", str(tmp_path / "requirements.lock")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "torch-2.1.2+cu121" in done.stdout


def test_pip_lock_names_the_package_without_candidates(index, tmp_path):
    spec, resolution = pip_resolution(index["cu121"], requirement="torch==2.1.2+cu118", cuda="11.8")
    with pytest.raises(PipLockFailed) as info:
        lock(spec, resolution, None, tmp_path, index_url=index["simple"])
    (conflict,) = info.value.conflicts
    # no Python locks it either, so no fix is offered
    assert conflict.kind == "framework_cuda_mismatch" and conflict.fixes == ()
    assert conflict.message.startswith("no usable wheel of torch for CPython 3.10 on linux-64")
    assert not (tmp_path / "requirements.lock").exists()

    spec, resolution = pip_resolution(index["cu121"], pip_packages=["envbuild-probe==2.0"])
    with pytest.raises(PipLockFailed) as info:
        lock(spec, resolution, None, tmp_path, index_url=index["simple"])
    (conflict,) = info.value.conflicts
    assert conflict.kind == "library_abi" and "wheel of envbuild-probe for" in conflict.message


def test_pip_lock_offers_the_python_that_locks(index, tmp_path):
    # the variant wheel is cp310 only: a CPython 3.11 target gets the fix that was itself locked
    spec, resolution = pip_resolution(index["cu121"], python="3.11")
    with pytest.raises(PipLockFailed) as info:
        lock(spec, resolution, None, tmp_path, index_url=index["simple"])
    (conflict,) = info.value.conflicts
    assert conflict.kind == "python_unsupported" and "torch" in conflict.message
    assert [f.changes for f in conflict.fixes] == [{"python": "3.10"}]


def test_pip_lock_refuses_a_cpu_build_next_to_the_gpu_target(index, tmp_path):
    spec, resolution = pip_resolution(index["cpu"], requirement="torch==2.1.2", pip_packages=["filelock==3.13.1"])
    with pytest.raises(PipLockFailed) as info:
        lock(spec, resolution, None, tmp_path, index_url=index["simple"])
    (conflict,) = info.value.conflicts
    assert conflict.kind == "framework_cuda_mismatch" and "torch==2.1.2+cpu, which is a CPU build" in conflict.message


def test_the_machines_pip_configuration_reaches_the_named_indexes_and_adds_none(index, tmp_path, monkeypatch):
    config = tmp_path / "pip.conf"
    port = index["port"]
    # This machine's configuration names a mirror (with credentials), extra indexes and a
    # find-links folder: its credentials reach the index the command line names (the same
    # host), its sources never enter the lock.
    config.write_text(f"[global]\nindex-url = http://ci:s3cret@127.0.0.1:{port}/idx/simple\n"
                      f"extra-index-url = file://{tmp_path}/local/simple http://mirror.invalid/simple\n"
                      f"find-links = {tmp_path}/wheels\ntimeout = 30\n")
    monkeypatch.setenv("PIP_CONFIG_FILE", str(config))
    spec, resolution = pip_resolution(index["cu121"], pip_packages=["envbuild-probe==1.0"])
    result = lock(spec, resolution, None, tmp_path / "lock", index_url=f"http://127.0.0.1:{port}/idx/simple")
    text = (tmp_path / "lock" / "requirements.lock").read_text()
    pylock = (tmp_path / "lock" / "pylock.toml").read_text()
    indexes = [line for line in text.splitlines() if line.startswith("--")]
    assert indexes == [f"--index-url http://127.0.0.1:{port}/idx/simple", f"--extra-index-url {index['cu121']}"]
    assert f"envbuild-probe==1.0 \\\n    --hash=sha256:{index['sha']['envbuild_probe']}" in text
    for written in (text, pylock):
        assert "s3cret" not in written and "ci@" not in written
        assert "file:" not in written and "mirror.invalid" not in written and f"{tmp_path}/wheels" not in written
    assert "the pip configuration of the machine that wrote it was used only to" in text.lower()
    assert result.pip_hashed and any("mirror.invalid" in n and "--index-url" in n for n in result.notes)


def test_pip_configuration_adds_no_index_to_the_request(monkeypatch, tmp_path):
    from envbuild.lock import pip_lock
    from envbuild.lock.pip_config import read_pip_settings

    config = tmp_path / "pip.conf"
    config.write_text("[global]\nindex-url = https://mirror.example/simple\nextra-index-url = file:///opt/x/simple\n"
                      "[install]\nfind-links = /opt/wheels\n")
    monkeypatch.setenv("PIP_CONFIG_FILE", str(config))
    monkeypatch.setenv("PIP_EXTRA_INDEX_URL", "https://env.example/simple")
    settings = read_pip_settings()
    # read as pip reads it: the file, its [install] section, the environment over both
    assert settings.index_url == "https://mirror.example/simple"
    assert settings.extra_index_urls == ("https://env.example/simple",) and settings.find_links == ("/opt/wheels",)
    spec, resolution = pip_resolution("https://download.pytorch.org/whl/cu121")
    request = pip_lock.build_pip_request(spec, resolution, "linux-64", None, settings)
    assert request.indexes == ("https://pypi.org/simple", "https://download.pytorch.org/whl/cu121")


def test_unreachable_index_is_an_environment_error_with_the_url_masked(tmp_path, monkeypatch):
    closed = "http://127.0.0.1:9"  # discard port: nothing listens there
    monkeypatch.setenv("UV_HTTP_RETRIES", "0")  # retrying a port nobody listens on only waits longer
    spec, resolution = pip_resolution(f"{closed}/whl/cu121", pip_packages=["einops==0.7.0"])
    with pytest.raises(EnvironmentProblem) as info:
        lock(spec, resolution, None, tmp_path, index_url="http://bot:tok3n@127.0.0.1:9/simple", pip_timeout=2)
    line = info.value.line()
    assert info.value.exit_code == 3
    assert "cannot read the package index http://bot:***@127.0.0.1:9/simple: cannot connect" in line
    assert "tok3n" not in line
    assert not (tmp_path / "requirements.lock").exists()


class _Unauthorized(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(401)
        self.send_header("WWW-Authenticate", 'Basic realm="index"')
        self.end_headers()


def test_an_index_answering_401_is_an_environment_error(tmp_path):
    server, url = _serve(tmp_path, _Unauthorized)
    try:
        spec, resolution = pip_resolution(f"{url}/cu121", pip_packages=["einops==0.7.0"])
        done = _cli_lock(tmp_path, spec, f"http://me:pw@{url.removeprefix('http://')}/simple")
    finally:
        server.shutdown()
    assert done.returncode == 3, done.stdout + done.stderr
    assert f"http://me:***@{url.removeprefix('http://')}/simple: HTTP 401" in done.stderr
    assert ":pw@" not in done.stderr + done.stdout


def _cli_lock(tmp_path: Path, spec, index_url: str) -> subprocess.CompletedProcess:
    """`envbuild lock` on a spec file asking for nothing but `spec.pip_packages`."""
    path = tmp_path / "spec.yaml"
    path.write_text("name: small\ncuda: '12.4'\npython: '3.10'\ninstaller: pip\n"
                    f"target: {{platform: linux-64}}\npackages: {{pip: {list(spec.pip_packages)}}}\n")
    return subprocess.run([sys.executable, "-m", "envbuild", "lock", str(path), "-o", str(tmp_path / "out"),
                           "--index-url", index_url], capture_output=True, text=True)


# --- credentials never on a command line -------------------------------------------------
SECRET = "pw-9f3c1e77"


class _PasswordIndex(http.server.SimpleHTTPRequestHandler):
    """A simple index that answers only with user `ci` and SECRET, slowly enough (0.3 s an
    answer) that the lock's child processes live long enough to be read."""

    expected = "Basic " + base64.b64encode(f"ci:{SECRET}".encode()).decode()

    def do_GET(self):
        time.sleep(0.3)
        if self.headers.get("Authorization") != self.expected:
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="index"')
            self.end_headers()
            return
        super().do_GET()


def _command_lines_during(process: subprocess.Popen) -> tuple[set[bytes], list[tuple[bytes, bytes]]]:
    """Every process command line seen on this machine while `process` runs (read from
    /proc/PID/cmdline, which any local user can read), and the command line and environment
    (readable only by its user) of each child of `process`."""
    seen: set[bytes] = set()
    children: dict[str, tuple[bytes, bytes]] = {}
    while process.poll() is None:
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                command = Path(f"/proc/{entry}/cmdline").read_bytes()
                seen.add(command)
                parent = Path(f"/proc/{entry}/stat").read_text().rpartition(")")[2].split()[1]
                if parent == str(process.pid) and entry not in children:
                    children[entry] = (command, Path(f"/proc/{entry}/environ").read_bytes())
            except OSError:  # the process ended while it was read
                continue
        time.sleep(0.01)
    return seen, list(children.values())


@pytest.mark.parametrize("given", ["--index-url", "PIP_INDEX_URL", "pip.conf"])
def test_index_credentials_never_reach_a_command_line(tmp_path, given):
    root = tmp_path / "www"
    files = root / "files"
    files.mkdir(parents=True)
    wheel = _wheel(files, "envbuild_probe", "1.0", "py3-none-any", [])
    _project_page(root / "simple", "envbuild-probe", [wheel])
    server, url = _serve(root, functools.partial(_PasswordIndex, directory=str(root)))
    plain = f"{url}/simple"
    with_password = plain.replace("http://", f"http://ci:{SECRET}@")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_"))}
    env["PIP_CONFIG_FILE"] = os.devnull
    index = with_password
    if given == "PIP_INDEX_URL":  # the configuration holds the password for the index the flag names
        env["PIP_INDEX_URL"], index = with_password, plain
    elif given == "pip.conf":
        (tmp_path / "pip.conf").write_text(f"[global]\nindex-url = {with_password}\n")
        env["PIP_CONFIG_FILE"], index = str(tmp_path / "pip.conf"), plain
    (tmp_path / "spec.yaml").write_text("name: small\ncuda: '12.4'\npython: '3.10'\ninstaller: pip\n"
                                        "target: {platform: linux-64}\npackages: {pip: [envbuild-probe==1.0]}\n")
    try:
        process = subprocess.Popen([sys.executable, "-m", "envbuild", "lock", "spec.yaml", "-o", "out",
                                    "--index-url", index, "--json"], cwd=tmp_path, env=env,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        command_lines, children = _command_lines_during(process)
        stdout, stderr = (stream.read().decode() for stream in (process.stdout, process.stderr))
    finally:
        server.shutdown()
    assert process.returncode == 0, stdout + stderr
    # uv ran, and was given the password the index wants through its environment
    uv = [environment for command, environment in children if b"pip\x00compile" in command]
    assert uv and all(SECRET.encode() in environment for environment in uv)
    # no command line holds it, but envbuild's own when the user typed it there
    holders = [c for c in command_lines if SECRET.encode() in c]
    assert holders == [c for c in holders if given == "--index-url" and b"envbuild\x00lock" in c]
    written = "".join(p.read_text() for p in (tmp_path / "out").iterdir() if p.is_file())
    assert SECRET not in written + stdout + stderr and f"--index-url {plain}" in written
    # `lock --json` lists the pins of a pip lock, as its schema says
    answer = json.loads(stdout)
    jsonschema.validate(answer, json.loads((ROOT / "schema" / "lock.schema.json").read_text()))
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    assert answer["pip_packages"] == {"linux-64": [{"name": "envbuild-probe", "version": "1.0",
                                                     "hashes": [f"sha256:{digest}"]}]}


def test_a_control_character_in_the_index_url_is_refused(tmp_path):
    spec, _ = pip_resolution("http://127.0.0.1:9/cu121", pip_packages=["einops==0.7.0"])
    done = _cli_lock(tmp_path, spec, "http://127.0.0.1:9/simple\n--trusted-host evil")
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.startswith("envbuild: error: --index-url: ") and "index URL" in done.stderr
    assert done.stderr.count("\n") == 1


def test_files_the_index_publishes_no_hash_for_are_hashed_from_their_bytes(tmp_path):
    files = tmp_path / "files"
    files.mkdir()
    wheel = _wheel(files, "einops", "0.7.0", "py3-none-any", [])
    page = tmp_path / "idx" / "simple" / "einops"
    page.mkdir(parents=True)
    (page / "index.html").write_text(f'<a href="../../../files/{wheel.name}">{wheel.name}</a>\n')  # no #sha256=
    server, url = _serve(tmp_path)
    try:
        spec, resolution = pip_resolution(f"{url}/idx/simple", requirement="einops==0.7.0", cuda=None)
        result = lock(spec, resolution, None, tmp_path / "out", index_url=f"{url}/idx/simple")
    finally:
        server.shutdown()
    assert result.pip_hashed is True
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    assert f"einops==0.7.0 \\\n    --hash=sha256:{digest}\n" in (tmp_path / "out/requirements.lock").read_text()


def test_a_lock_without_hashes_is_refused_unless_allowed(tmp_path):
    from envbuild.lock import pip_lock

    spec, resolution = pip_resolution(None, requirement="einops==0.7.0", cuda=None)
    request = pip_lock.build_pip_request(spec, resolution, "linux-64", None)
    pins = pip_lock.parse_requirements("einops==0.7.0\nfilelock==3.13.1 \\\n    --hash=sha256:" + "ab" * 32 + "\n")
    assert pins == (pip_lock.PipPin("einops", "0.7.0", ()), pip_lock.PipPin("filelock", "3.13.1", ("sha256:" + "ab" * 32,)))
    with pytest.raises(EnvironmentProblem, match="no sha256 for einops.*--allow-unhashed"):
        pip_lock.checked_lock(request, pins, allow_unhashed=False)
    written = pip_lock.checked_lock(request, pins, allow_unhashed=True)
    assert not written.hashed and "no sha256 for einops" in written.note


def test_platform_tags_are_the_ones_packaging_gives_this_machine():
    import platform as host

    from packaging import tags

    from envbuild.lock.pip_tags import platform_tags

    libc, version = host.libc_ver()
    if libc != "glibc" or host.machine() != "x86_64":
        pytest.skip("compares with packaging's tags for an x86_64 glibc host")
    ours = platform_tags("linux-64", version)
    theirs = list(dict.fromkeys(t.platform for t in tags.sys_tags() if t.platform != "any"))
    assert sorted(ours) == sorted(theirs)
    assert {"manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux1_x86_64", "linux_x86_64"} <= set(ours)
