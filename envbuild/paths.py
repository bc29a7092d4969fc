"""Where envbuild's bundled data lives (matrices and Dockerfile templates).

The repository keeps `matrices/` and `Dockerfiles/` at its top level; the package
reaches them through symlinks under `envbuild/data/`, which setuptools follows when
it builds a wheel, so an installed envbuild carries the same files.
"""
import os
from pathlib import Path

DATA_DIR = Path(__file__).resolve().parent / "data"
MATRICES_DIR = DATA_DIR / "matrices"
DOCKERFILES_DIR = DATA_DIR / "Dockerfiles"


def cache_dir() -> Path:
    """Where envbuild keeps what it can rebuild (parsed matrices and specs)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "envbuild"
