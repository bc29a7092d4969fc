#!/usr/bin/env bash
# The whole test suite, on a fresh machine: install envbuild with its test tools,
# start the Docker engine, the two local registries and the stand-in base images
# (scripts/services.sh), run pytest, and stop what was started.
set -euo pipefail
cd "$(dirname "$0")/.."

python3 -m pip install --quiet --disable-pip-version-check -e '.[test]'
# Bytecode for envbuild once: the tests start hundreds of `envbuild` processes, and where
# PYTHONDONTWRITEBYTECODE is set each of them would compile every module it imports again.
python3 -m compileall -q envbuild > /dev/null

./scripts/services.sh up
trap './scripts/services.sh down' EXIT
# services.sh writes the addresses the tests need (registries, base image names).
set -a; . .services/env; set +a

export ENVBUILD_REQUIRE_SERVICES=1
python3 -m pytest "$@"
