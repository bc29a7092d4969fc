#!/usr/bin/env bash
# The whole test suite, on a fresh machine: install envbuild with its test tools,
# start the Docker engine, the two local registries and the stand-in base images
# (scripts/services.sh), run pytest, and stop what was started.
set -euo pipefail
cd "$(dirname "$0")/.."
# Each phase says when it starts, every 10 s while it runs, and how long it took; the
# seconds count from here, in services.sh's lines too.
export PHASES_START=$EPOCHSECONDS
PHASES_NAME=test.sh
# shellcheck source=scripts/phases.sh
. scripts/phases.sh
mkdir -p .services

phase "installing envbuild and its test tools (pip)" .services/pip-install.log \
  python3 -m pip install --disable-pip-version-check --progress-bar off -e '.[test]'
# Bytecode for envbuild once: the tests start hundreds of `envbuild` processes, and where
# PYTHONDONTWRITEBYTECODE is set each of them would compile every module it imports again.
phase "compiling envbuild's bytecode" .services/compileall.log python3 -m compileall -q envbuild

say "starting the test services"
./scripts/services.sh up
trap './scripts/services.sh down' EXIT
# services.sh writes the addresses the tests need (registries, base image names).
set -a; . .services/env; set +a

export ENVBUILD_REQUIRE_SERVICES=1
say "running pytest"
rc=0
# On every CPU: tests/conftest.py puts the tests of the shared engine, registries and
# Slurm in one group, which one worker runs in order, and the others' files beside it.
python3 -m pytest -n auto --dist loadgroup "$@" || rc=$?
say "pytest exited with $rc"
exit "$rc"
