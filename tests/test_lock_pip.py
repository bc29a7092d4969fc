"""`envbuild lock`, pip path: the exact framework wheel of the CUDA variant, its index,
and hashes that pip's own resolver read from a real (local) package index."""
from __future__ import annotations

import base64
import os
import functools
import hashlib
import http.server
import subprocess
import sys
import threading
import zipfile
from pathlib import Path

import pytest

from envbuild.errors import EnvironmentProblem
from envbuild.lock.api import lock
from envbuild.lock.check import check
from envbuild.lock.pip_lock import PipLockFailed
from lock_channels import pip_resolution


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


def test_the_users_pip_configuration_is_honoured(index, tmp_path, monkeypatch):
    config = tmp_path / "pip.conf"
    port = index["port"]
    # credentials in the configured index: used to read it, never written into the lock
    config.write_text(f"[global]\nindex-url = http://ci:s3cret@127.0.0.1:{port}/idx/simple\ntimeout = 30\n")
    monkeypatch.setenv("PIP_CONFIG_FILE", str(config))
    spec, resolution = pip_resolution(index["cu121"], pip_packages=["envbuild-probe==1.0"])
    result = lock(spec, resolution, None, tmp_path / "lock")
    text = (tmp_path / "lock" / "requirements.lock").read_text()
    assert f"--index-url http://127.0.0.1:{port}/idx/simple\n" in text
    assert f"envbuild-probe==1.0 \\\n    --hash=sha256:{index['sha']['envbuild_probe']}" in text
    assert "s3cret" not in text and "ci@" not in text and result.pip_hashed

    # the same setting from the environment (PIP_INDEX_URL) wins over the file, as in pip
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")
    with pytest.raises(EnvironmentProblem, match="127.0.0.1:9/simple"):
        lock(spec, resolution, None, tmp_path / "lock2", pip_timeout=2)


def test_unreachable_index_is_an_environment_error_with_the_url_masked(tmp_path):
    closed = "http://127.0.0.1:9"  # discard port: nothing listens there
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


def test_a_control_character_in_the_index_url_is_refused(tmp_path):
    spec, _ = pip_resolution("http://127.0.0.1:9/cu121", pip_packages=["einops==0.7.0"])
    done = _cli_lock(tmp_path, spec, "http://127.0.0.1:9/simple\n--trusted-host evil")
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.startswith("envbuild: error: --index-url: the index URL") and done.stderr.count("\n") == 1


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
