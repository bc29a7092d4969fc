"""Where envbuild's bundled files live: matrices, Dockerfile templates and the probe.

The repository keeps `matrices/` and `Dockerfiles/` at its top level; the package
reaches them through symlinks under `envbuild/data/`, which setuptools follows when
it builds a wheel, so an installed envbuild carries the same files. Next to them lies
`matrices.json`, the tables of `matrices/` compiled into one file (see `envbuild.matrix`).
The probe is the script copied into every image and job (envbuild/verify/probe_api.py is
what envbuild itself uses of it).
"""
from __future__ import annotations

import functools
import json
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent.parent  # envbuild/
DATA_DIR = PACKAGE_DIR / "data"
MATRICES_DIR = DATA_DIR / "matrices"
COMPILED_MATRICES = DATA_DIR / "matrices.json"  # the tables of MATRICES_DIR, checked and compiled (envbuild.matrix)
DOCKERFILES_DIR = DATA_DIR / "Dockerfiles"
PROBE_FILE = PACKAGE_DIR / "verify" / "probe.py"


@functools.lru_cache(maxsize=1)
def compiled_matrices() -> dict:
    """The compiled matrices as plain JSON values, read once per process: `envbuild.matrix`
    types them; `envbuild.core.package_sets` reads its one table without the others' types."""
    return json.loads(COMPILED_MATRICES.read_bytes())
