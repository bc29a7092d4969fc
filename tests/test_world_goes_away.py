"""When the world goes away mid-command, `envbuild image` says what went away in one line
and exits 3, and no tag a user pulls is moved: a Docker engine stopped in the middle of a
build or a push, a registry that drops the connection while an image is pushed, a base
that cannot be pulled, a push registry that cannot be reached (whose hint must not be the
pull-only --registry-mirror).

The engines stopped here are throwaway dockerd processes this module starts on sockets of
its own (the shared engine keeps running for everyone else); the registry is the local
one, reached through a TCP proxy in this process that drops or stalls chosen requests."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import threading
import time
import uuid
from pathlib import Path

import pytest
import requests

from cli_support import in_process
from image_support import TEST_NAMESPACE
from test_cli_image_e2e import BASE, ENVBUILD, ok, one_error_line, registry_tags, write_spec

pytestmark = pytest.mark.docker


# --- a throwaway Docker engine ------------------------------------------------------------

# The throwaway engine's data (the pulled base, the build's layers) needs well under this.
DATA_SIZE = "2g"


class Engine:
    """A dockerd of its own under `root`: its socket, data, exec root (and with it its
    containerd and network namespaces) and pid file there, and a bridge of its own, on a
    subnet of its own, for its build containers, with no iptables, forwarding or masquerade
    changes, so it runs beside the shared engine without touching it. (Not `--bridge none`:
    with it dockerd deletes the host's docker0, the shared engine's bridge: moby's
    removeDefaultBridgeInterface.) Its data root is a tmpfs: the base it pulls and the layers
    it builds are never written to the disk, and are gone at once when it is removed."""

    def __init__(self, root: Path, bridge: str, subnet: int):
        self.root, self.bridge, self.address = root, bridge, f"10.213.{subnet}.1/24"
        self.socket = root / "docker.sock"
        self.host = f"unix://{self.socket}"
        self.process: subprocess.Popen | None = None
        self.log = None

    def start(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        data = self.root / "data"
        if not data.is_mount():
            data.mkdir(exist_ok=True)
            subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={DATA_SIZE}", "tmpfs", str(data)], check=True,
                           capture_output=True)
        if subprocess.run(["ip", "link", "show", self.bridge], capture_output=True).returncode:
            for command in (["link", "add", self.bridge, "type", "bridge"],
                            ["addr", "add", self.address, "dev", self.bridge], ["link", "set", self.bridge, "up"]):
                subprocess.run(["ip", *command], check=True, capture_output=True)
        if self.log is None:  # a restart writes on in the same log
            self.log = open(self.root / "dockerd.log", "ab")
        self.process = subprocess.Popen(
            ["dockerd", "--host", self.host, "--data-root", str(self.root / "data"),
             "--exec-root", str(self.root / "exec"), "--pidfile", str(self.root / "dockerd.pid"),
             "--bridge", self.bridge, "--iptables=false", "--ip6tables=false", "--ip-forward=false",
             "--ip-masq=false"],
            stdout=self.log, stderr=self.log, start_new_session=True)
        for _ in range(300):
            if self.answers():
                return
            assert self.process.poll() is None, (self.root / "dockerd.log").read_text()[-2000:]
            time.sleep(0.1)
        pytest.fail("the throwaway dockerd did not answer within 30 s")

    def answers(self) -> bool:
        return subprocess.run(["docker", "-H", self.host, "version"], capture_output=True).returncode == 0

    def kill(self) -> None:
        """As a crash or `kill -9` would: no chance to close the streams it serves. Its
        containerd goes too (it would follow on its own, but not before a restart looks)."""
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(30)
        pid_file = self.root / "exec" / "containerd" / "containerd.pid"
        try:
            pid = int(pid_file.read_text().strip())
            os.kill(pid, signal.SIGKILL)
        except (OSError, ValueError):
            return
        for _ in range(300):  # gone from /proc once reaped by init
            if not Path(f"/proc/{pid}").exists():
                return
            time.sleep(0.1)

    def docker(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["docker", "-H", self.host, *args], capture_output=True, text=True, timeout=120)

    def remove(self) -> None:
        """Kill it and everything it started (by the pid files and sockets under its root),
        unmount what it mounted, remove its files."""
        self.kill()
        for pid_file in (self.root / "exec").rglob("*.pid") if (self.root / "exec").is_dir() else ():
            try:
                os.kill(int(pid_file.read_text().strip()), signal.SIGKILL)
            except (OSError, ValueError):
                pass
        for pid in os.listdir("/proc"):
            if pid.isdigit():
                try:
                    command = Path(f"/proc/{pid}/cmdline").read_bytes()
                except OSError:
                    continue
                if str(self.root).encode() in command:
                    try:
                        os.kill(int(pid), signal.SIGKILL)
                    except OSError:
                        pass
        mounts = [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines()
                  if line.split()[1].startswith(str(self.root))]
        for mount in sorted(mounts, key=len, reverse=True):
            if subprocess.run(["umount", mount], capture_output=True).returncode:
                subprocess.run(["umount", "-l", mount], capture_output=True)
        subprocess.run(["rm", "-rf", str(self.root)], capture_output=True)
        subprocess.run(["ip", "link", "del", self.bridge], capture_output=True)
        if self.log is not None:
            self.log.close()


@pytest.fixture(scope="module")
def module_engine(services):
    """One throwaway engine for the module: the tests that stop it start it again (engine),
    so the base it pulled is pulled once and its files are removed once."""
    if os.geteuid() != 0:
        pytest.fail("a throwaway dockerd needs root (the CI machine runs the suite as root)")
    run = uuid.uuid4()
    root = Path("/tmp") / f"envbuild-engine-{run.hex[:8]}"  # short: a unix socket path is <108 bytes
    # an interface name has at most 15 characters; runs side by side get different subnets
    started = Engine(root, f"ebt{run.hex[:8]}", subnet=run.int % 256)
    shared_bridge = _has_docker0()
    try:
        started.start()
        yield started
    finally:  # also when it failed to start: nothing of it stays behind
        started.remove()
    assert _has_docker0() == shared_bridge  # the shared engine's bridge is still there


@pytest.fixture
def engine(module_engine):
    """The module's throwaway engine, answering (again, when a test before stopped it)."""
    if not module_engine.answers():
        module_engine.start()
    return module_engine


def _has_docker0() -> bool:
    return subprocess.run(["ip", "link", "show", "docker0"], capture_output=True).returncode == 0


# --- a registry that goes away ------------------------------------------------------------

class RegistryProxy:
    """127.0.0.1:<port> -> the local registry. A connection whose client sends `trigger`
    (bytes of a request line) is dropped there before that request reaches the registry
    (`mode="drop"`), or held open without forwarding anything more (`mode="stall"`)."""

    def __init__(self, upstream: str, trigger: bytes, mode: str):
        host, port = upstream.split(":")
        self.upstream, self.trigger, self.mode = (host, int(port)), trigger, mode
        self.triggered = threading.Event()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.open: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.upstream)
            self.open += [client, server]
            threading.Thread(target=self._pipe, args=(client, server, True), daemon=True).start()
            threading.Thread(target=self._pipe, args=(server, client, False), daemon=True).start()

    def _pipe(self, source: socket.socket, target: socket.socket, from_client: bool) -> None:
        tail = b""
        try:
            while data := source.recv(65536):
                seen = tail + data
                if from_client and self.trigger in seen:
                    self.triggered.set()
                    if self.mode == "drop":
                        source.close()
                        target.close()
                    return  # stall: nothing more is forwarded on this connection
                tail = seen[-len(self.trigger):]
                target.sendall(data)
        except OSError:
            pass
        if self.mode == "drop" or not self.triggered.is_set():
            for end in (source, target):
                try:
                    end.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        self.listener.close()
        for end in self.open:
            try:
                end.close()
            except OSError:
                pass


@pytest.fixture
def proxy(registry):
    made = []

    def make(trigger: bytes, mode: str) -> RegistryProxy:
        made.append(RegistryProxy(registry, trigger, mode))
        return made[-1]

    yield make
    for one in made:
        one.close()


def image_args(spec: Path, lock: Path, registry: str, wheelhouse: Path, *extra: str) -> list[str]:
    return ["image", str(spec), "--lock-dir", str(lock), "--registry-mirror", registry, "--wheelhouse", str(wheelhouse),
            "--progress", "plain", *extra]


# A command whose output is all a test reads runs in this process (tests/cli_support.py); one
# stopped from outside while it runs is a process of its own (run_until).
def run_until(args: list[str], env: dict, ready, cwd: Path, then) -> subprocess.CompletedProcess:
    """Run envbuild; once `ready(stderr so far)` is true, call `then()`; return the finished
    process with all its output (stderr is read by a thread: a stalled push prints nothing)."""
    proc = subprocess.Popen([ENVBUILD, *args], cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    seen: list[str] = []
    reader = threading.Thread(target=lambda: seen.extend(proc.stderr), daemon=True)
    reader.start()
    deadline = time.monotonic() + 300  # a hang guard, not a measurement
    while proc.poll() is None and not ready("".join(seen)):
        assert time.monotonic() < deadline, "".join(seen)[-3000:]
        time.sleep(0.05)
    then()
    out = proc.stdout.read()  # small: a reference or a JSON object
    proc.wait(300)
    reader.join(30)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, "".join(seen))


@pytest.fixture(scope="module")
def project(tmp_path_factory, registry):
    work = tmp_path_factory.mktemp("away")
    spec = write_spec(work, f"{registry}/{TEST_NAMESPACE}/away")
    ok(in_process("lock", spec, "-o", work / "lock", cwd=work))
    return work, spec


def test_engine_stopped_mid_build(project, engine, registry, wheelhouse):
    work, spec = project
    env = {**os.environ, "DOCKER_HOST": engine.host}
    proc = run_until(image_args(spec, work / "lock", registry, wheelhouse), env, lambda err: "\n[2/" in err, work,
                     engine.kill)
    assert proc.returncode == 3, proc.stderr[-3000:]
    line = one_error_line(proc)
    assert f"DOCKER_HOST={engine.host}: the Docker engine stopped answering during the build" in line
    assert "no tag was changed" in line
    engine.start()  # the same data root: nothing was tagged there
    repositories = engine.docker("images", "--format", "{{.Repository}}").stdout.split()
    assert f"{registry}/{TEST_NAMESPACE}/away" not in repositories


def test_engine_stopped_mid_push(project, engine, registry, wheelhouse, proxy):
    """The push stalls in a blob upload (the proxy holds it); the engine is stopped then."""
    work, spec = project
    stalled = proxy(b"/blobs/uploads/", "stall")
    repository = f"{stalled.address}/{TEST_NAMESPACE}/away-push"
    env = {**os.environ, "DOCKER_HOST": engine.host}
    proc = run_until(image_args(spec, work / "lock", registry, wheelhouse, "--repository", repository, "--push"),
                     env, lambda err: stalled.triggered.is_set(), work, engine.kill)
    assert stalled.triggered.is_set()
    assert proc.returncode == 3, proc.stderr[-3000:]
    line = one_error_line(proc)
    assert "the Docker engine stopped answering during the push" in line and "--registry-mirror" not in line
    assert registry_tags(registry, f"{TEST_NAMESPACE}/away-push") == set()


def holding_the_base_layers(registry: str, repository: str) -> None:
    """Link the base's layers into `repository` on the registry, as an earlier push of an
    image on that base leaves them (a cross-repository blob mount: no upload, no tag), so
    that a push there uploads only the layers envbuild built."""
    base, tag = BASE.split(":")
    manifest = requests.get(f"http://{registry}/v2/{base}/manifests/{tag}", timeout=30, headers={
        "Accept": "application/vnd.docker.distribution.manifest.v2+json, application/vnd.oci.image.manifest.v1+json"})
    manifest.raise_for_status()
    for layer in manifest.json()["layers"]:
        mounted = requests.post(f"http://{registry}/v2/{repository}/blobs/uploads/",
                                params={"mount": layer["digest"], "from": base}, timeout=30)
        assert mounted.status_code == 201, mounted.text


def test_registry_dropping_the_connection_mid_push(project, registry, wheelhouse, proxy, docker_client, base_image):
    """The registry drops every manifest upload (after the layers went up): exit 3 after the
    retries, the registry has no tag, and the local --tag still names its old image. The
    registry holds the base's layers already, as it does for a team that pushed there before."""
    work, spec = project
    name = f"{TEST_NAMESPACE}/away-dropped"
    holding_the_base_layers(registry, name)
    dropping = proxy(f"PUT /v2/{name}/manifests/".encode(), "drop")
    repository = f"{dropping.address}/{name}"
    base = docker_client.images.get(base_image)
    base.tag(repository, "stable")  # what `stable` names before the push
    proc = in_process(*image_args(spec, work / "lock", registry, wheelhouse, "--repository", repository, "--push",
                                  "--tag", "stable"), cwd=work)
    assert proc.returncode == 3, proc.stderr[-3000:]
    line = one_error_line(proc)
    assert f"registry {dropping.address} dropped the connection while {repository}:" in line
    assert "--registry-mirror" not in line and "4 time(s)" in line
    assert dropping.triggered.is_set()
    assert registry_tags(registry, name) == set()
    assert docker_client.images.get(f"{repository}:stable").id == base.id


def test_push_registry_that_cannot_be_reached_gets_a_push_hint(project, registry, wheelhouse):
    work, spec = project
    with socket.create_server(("127.0.0.1", 0)) as closed:
        port = closed.getsockname()[1]
    proc = in_process(*image_args(spec, work / "lock", registry, wheelhouse, "--repository",
                                  f"127.0.0.1:{port}/{TEST_NAMESPACE}/nowhere", "--push"), cwd=work)
    assert proc.returncode == 3
    line = one_error_line(proc)
    assert f"cannot reach registry 127.0.0.1:{port}" in line and "--registry-mirror" not in line
    assert "building " not in proc.stderr


@pytest.mark.parametrize("mirror", ["missing path", "closed port"])
def test_a_base_that_cannot_be_pulled(project, registry, wheelhouse, mirror, docker_client):
    """No copy in the engine and none to pull: one line naming the base, exit 3, a pull hint."""
    work, spec = project
    if mirror == "closed port":
        with socket.create_server(("127.0.0.1", 0)) as closed:
            where = f"127.0.0.1:{closed.getsockname()[1]}"
    else:
        where = f"{registry}/{TEST_NAMESPACE}-nothing-here"
    args = image_args(spec, work / "lock", where, wheelhouse, "--repository", f"{registry}/{TEST_NAMESPACE}/away-base")
    proc = in_process(*args, cwd=work)
    assert proc.returncode == 3, proc.stderr[-3000:]
    line = one_error_line(proc)
    assert f"the base image {where}/nvidia/cuda:" in line and "cannot be pulled" in line
    assert "--registry-mirror" in line and "no tag was changed" in line
    assert not docker_client.images.list(f"{registry}/{TEST_NAMESPACE}/away-base")


@pytest.mark.parametrize("message, auth, transient", [
    ('Put "http://127.0.0.1:40183/v2/x/manifests/87aefac092976517": EOF', False, True),  # a port, not a 401
    ("received unexpected HTTP status: 401 Unauthorized", True, False),
    ("denied: requested access to the resource is denied", True, False),
    ("received unexpected HTTP status: 503 Service Unavailable", False, True),
    ("manifest invalid: tag 403abc, digest sha256:ab401cd504", False, False),
])
def test_push_errors_are_read_by_their_words_not_by_digits_in_names(message, auth, transient):
    from envbuild.image.push import AUTH_WORDS, TRANSIENT_WORDS, mentions

    assert (mentions(message, AUTH_WORDS), mentions(message, TRANSIENT_WORDS)) == (auth, transient)
