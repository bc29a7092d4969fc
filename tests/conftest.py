"""Shared fixtures: the real Docker engine, the local registries and the stand-in base
images that `scripts/services.sh up` starts and describes in `.services/env`.

Tests that need them take these fixtures. When the services were not started (a bare
`pytest` on a laptop) those tests are skipped with the command that starts them; under
`scripts/test.sh` (ENVBUILD_REQUIRE_SERVICES=1) a missing service is an error instead,
so CI can never pass by skipping them.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


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
def services() -> dict[str, str]:
    """All ENVBUILD_TEST_* values written by scripts/services.sh."""
    _need("ENVBUILD_TEST_REGISTRY")
    return _services_env()


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


@pytest.fixture(scope="session", autouse=True)
def _remove_images_this_run_made():
    """At the end of the run, remove the images this run made: every tag under its
    repository namespace (tests/image_support.TEST_NAMESPACE), then envbuild-built images
    left untagged by a moved tag or a failed build since the run started. Images that
    other runs use are never touched: their tags are elsewhere, and the engine refuses to
    remove an image a container or a child image still uses."""
    import time

    started = time.time()
    yield
    if not _services_env().get("ENVBUILD_TEST_REGISTRY"):
        return
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
