"""Where envbuild's bundled files live: matrices, Dockerfile templates and the probe.

The repository keeps `matrices/` and `Dockerfiles/` at its top level; the package
reaches them through symlinks under `envbuild/data/`, which setuptools follows when
it builds a wheel, so an installed envbuild carries the same files. The probe is the
script copied into every image and job (envbuild/verify/probe_api.py is what envbuild
itself uses of it).
"""
import os
from pathlib import Path

DATA_DIR = Path(__file__).resolve().parent / "data"
MATRICES_DIR = DATA_DIR / "matrices"
DOCKERFILES_DIR = DATA_DIR / "Dockerfiles"
PROBE_FILE = Path(__file__).resolve().parent / "verify" / "probe.py"


def cache_dir() -> Path:
    """Where envbuild keeps what it can rebuild (parsed matrices and specs)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "envbuild"


def forget_oldest(folder: str | os.PathLike[str], pattern: str, keep: int) -> None:
    """Delete all but the `keep` most recently written files of `folder` whose names match
    `pattern` (an fnmatch pattern naming one of envbuild's own cache files), so a cache
    keyed by data and code versions does not grow with every upgrade. A write under way
    (a dot file) is never touched; a file another run still reads stays readable to it."""
    from fnmatch import fnmatch

    try:
        entries = [e for e in os.scandir(folder) if not e.name.startswith(".") and fnmatch(e.name, pattern)]
        entries.sort(key=lambda e: e.stat().st_mtime_ns)
    except OSError:
        return
    for stale in entries[:-keep] if keep > 0 else entries:
        try:
            os.unlink(stale.path)
        except OSError:
            pass
