#!/usr/bin/env bash
# Placeholder until the Docker/registry set-up lands.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .services
case "${1:-}" in
  up) : > .services/env ;;
  down) ;;
esac
