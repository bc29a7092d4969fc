"""Environments on this host: `envbuild env` and `envbuild run` (see docs/env.md)."""
