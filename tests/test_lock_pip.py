"""`envbuild lock`, pip path: the exact framework wheel of the CUDA variant, its index,
and hashes that pip's own resolver read from a real (local) package index."""
from __future__ import annotations

import base64
import functools
import hashlib
import http.server
import subprocess
import sys
import threading
import zipfile
from pathlib import Path

import pytest

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


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    """A PyPI-like base index (/idx/simple) and a PyTorch-like variant index
    (/idx/cu121), served over HTTP on 127.0.0.1."""
    root = tmp_path_factory.mktemp("pypi")
    files = root / "files"
    files.mkdir()
    torch = _wheel(files, "torch", "2.1.2+cu121", "cp310-cp310-linux_x86_64", ["filelock", "typing-extensions"])
    filelock = _wheel(files, "filelock", "3.13.1", "py3-none-any", [])
    typing = _wheel(files, "typing_extensions", "4.9.0", "py3-none-any", [])
    einops = _wheel(files, "einops", "0.7.0", "py3-none-any", [])
    _project_page(root / "idx" / "cu121", "torch", [torch])
    for project, wheel in (("filelock", filelock), ("typing-extensions", typing), ("einops", einops)):
        _project_page(root / "idx" / "simple", project, [wheel])
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    handler.log_message = lambda *a, **k: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/idx"
    yield {"simple": f"{base}/simple", "cu121": f"{base}/cu121",
           "sha": {w.name.split("-")[0]: hashlib.sha256(w.read_bytes()).hexdigest()
                   for w in (torch, filelock, typing, einops)}}
    server.shutdown()


def test_pip_lock_pins_the_variant_wheel_and_hashes_the_closure(index, tmp_path):
    spec, resolution = pip_resolution(index["cu121"], pip_packages=["einops==0.7.0"])
    result = lock(spec, resolution, None, tmp_path, index_url=index["simple"])
    assert result.pip_hashed is True and result.notes == ()
    text = (tmp_path / "requirements.lock").read_text()
    assert f"--index-url {index['simple']}\n--extra-index-url {index['cu121']}\n" in text
    assert f"torch==2.1.2+cu121 \\\n    --hash=sha256:{index['sha']['torch']}" in text
    assert f"filelock==3.13.1 \\\n    --hash=sha256:{index['sha']['filelock']}" in text
    assert f"typing_extensions==4.9.0 \\\n    --hash=sha256:{index['sha']['typing_extensions']}" in text
    assert f"einops==0.7.0 \\\n    --hash=sha256:{index['sha']['einops']}" in text
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


def test_pip_lock_refuses_a_variant_the_index_does_not_have(index, tmp_path):
    spec, resolution = pip_resolution(index["cu121"], requirement="torch==2.1.2+cu118", cuda="11.8")
    with pytest.raises(PipLockFailed) as info:
        lock(spec, resolution, None, tmp_path, index_url=index["simple"])
    (conflict,) = info.value.conflicts
    assert conflict.kind == "framework_cuda_mismatch" and "torch==2.1.2+cu118" in conflict.message
    assert not (tmp_path / "requirements.lock").exists()


def test_unreachable_index_is_said_not_papered_over(tmp_path):
    closed = "http://127.0.0.1:9"  # discard port: nothing listens there
    spec, resolution = pip_resolution(f"{closed}/whl/cu121", pip_packages=["einops==0.7.0"])
    result = lock(spec, resolution, None, tmp_path, index_url=f"{closed}/simple", pip_timeout=2)
    assert result.pip_hashed is False
    assert result.notes and "could not be reached" in result.notes[0]
    text = (tmp_path / "requirements.lock").read_text()
    assert "# NO HASHES: the package index http://127.0.0.1:9/simple" in text
    assert "--hash" not in text
    assert "\ntorch==2.1.2+cu121\neinops==0.7.0\n" in text
