"""`envbuild verify --fleet` on Kubernetes targets with a kube context, through the real
`kubernetes` client. No API server can run on the test machine, so these tests cover what
happens before and around one: the context chosen from the kubeconfig, a server that cannot
be reached, and a server that refuses (a local HTTP server answering every request with a
403 Status object, as an API server does for a user without RBAC rights). They also read the
request the client sent, which is the Job envbuild submits. A run that completes a Job on a
cluster is not covered here."""
from __future__ import annotations

import contextlib
import io
import json
import socket
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from envbuild.cli import main

ROOT = Path(__file__).resolve().parent.parent
FLEET = "targets:\n  a100:\n    gpu: A100\n    scheduler: {kind: k8s, namespace: ml}\n"
FORBIDDEN = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "reason": "Forbidden",
             "message": 'jobs.batch is forbidden: User "dev" cannot create resource "jobs" in API group "batch" '
                        'in the namespace "ml"', "details": {"group": "batch", "kind": "jobs"}, "code": 403}


def _setup(tmp_path: Path, server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "fleet.yaml").write_text(FLEET)
    (tmp_path / "kubeconfig").write_text(f"""apiVersion: v1
kind: Config
clusters: [{{name: lab, cluster: {{server: "{server}"}}}}]
users: [{{name: dev, user: {{token: test-token}}}}]
contexts: [{{name: lab, context: {{cluster: lab, user: dev, namespace: ml}}}}]
current-context: lab
""")
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "kubeconfig"))


def _verify(tmp_path, *extra) -> subprocess.CompletedProcess:
    """The command line in this process (the kubernetes client imports once for the module)."""
    args = ["verify", "img:1", "--fleet", str(tmp_path / "fleet.yaml"), "--static", "--workdir", str(tmp_path / "work"),
            "--json", str(tmp_path / "v.json"), "--junit", str(tmp_path / "v.xml"), *extra]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(args)
    return subprocess.CompletedProcess(args, code, out.getvalue(), err.getvalue())


def _nothing_written(tmp_path: Path) -> None:
    assert not (tmp_path / "v.json").exists() and not (tmp_path / "v.xml").exists()
    assert not list((tmp_path / "work").glob("*")) if (tmp_path / "work").exists() else True


def test_an_unreachable_api_server_is_exit_3_naming_it(tmp_path, monkeypatch):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    _setup(tmp_path, f"https://127.0.0.1:{port}", monkeypatch)
    done = _verify(tmp_path)
    assert done.returncode == 3, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("envbuild: error:")]
    assert lines == [f"envbuild: error: k8s: cannot reach the API server at https://127.0.0.1:{port} (context lab): "
                     "[Errno 111] Connection refused (check the cluster is up and the kubeconfig's server address)"]
    _nothing_written(tmp_path)


class _Refusing(BaseHTTPRequestHandler):
    """Answers every request as an API server answers a user without the right to create Jobs."""
    seen: list[dict] = []

    def _answer(self):
        length = int(self.headers.get("Content-Length") or 0)
        self.seen.append({"method": self.command, "path": self.path, "auth": self.headers.get("Authorization"),
                          "body": json.loads(self.rfile.read(length) or b"null")})
        data = json.dumps(FORBIDDEN).encode()
        self.send_response(403)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_DELETE = _answer

    def log_message(self, *args):
        pass


def test_an_api_server_that_refuses_the_job_is_exit_3_with_its_message(tmp_path, monkeypatch):
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Refusing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        _setup(tmp_path, f"http://127.0.0.1:{server.server_port}", monkeypatch)
        done = _verify(tmp_path)
    finally:
        server.shutdown()
    assert done.returncode == 3, done.stderr
    line = done.stderr.strip().splitlines()[-1]
    assert line.startswith(f"envbuild: error: k8s: the API server at http://127.0.0.1:{server.server_port} (context lab) "
                           "refused to create Job envbuild-verify-a100-")
    assert line.endswith(' in namespace ml: 403 Forbidden: jobs.batch is forbidden: User "dev" cannot create resource '
                         '"jobs" in API group "batch" in the namespace "ml"')
    _nothing_written(tmp_path)
    # what the client sent: the Job `envbuild export k8s` renders, the probe as its command
    [request] = _Refusing.seen
    assert (request["method"], request["path"], request["auth"]) == ("POST", "/apis/batch/v1/namespaces/ml/jobs", "Bearer test-token")
    job = request["body"]
    assert job["kind"] == "Job" and job["metadata"]["namespace"] == "ml" and job["metadata"]["name"].startswith("envbuild-verify-a100-")
    container = job["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == ["python3", "/opt/envbuild/probe.py", "--json", "--static"]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "1" and container["image"] == "img:1"


def test_an_unknown_kube_context_is_bad_input(tmp_path, monkeypatch):
    _setup(tmp_path, "https://127.0.0.1:1", monkeypatch)
    done = _verify(tmp_path, "--kube-context", "prod")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1] == (
        f"envbuild: error: --kube-context: no kube context 'prod' in {tmp_path / 'kubeconfig'} (one of: lab)")


def test_a_context_without_the_kubernetes_client_says_which_extra_to_install(tmp_path, monkeypatch):
    _setup(tmp_path, "https://127.0.0.1:1", monkeypatch)
    monkeypatch.setitem(sys.modules, "kubernetes", None)  # what `import kubernetes` meets where it is not installed
    done = _verify(tmp_path)
    assert done.returncode == 3
    assert done.stderr.strip().splitlines()[-1] == (
        "envbuild: error: k8s: submitting Jobs to kube context 'lab' needs the kubernetes client "
        "(pip install 'envbuild[k8s]'; or unset the context to get the manifests)")
    _nothing_written(tmp_path)
