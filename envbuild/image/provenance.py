"""Where an image's spec came from: the git commit and remote of the spec's checkout."""
from __future__ import annotations

import subprocess
from pathlib import Path

from envbuild.infra.urls import strip_credentials
from envbuild.output import say


def _git(folder: Path, *args: str) -> str | None:
    argv = ["git", "-C", str(folder), *args]
    say.command(argv)
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):  # no git here: no provenance, not an error
        return None
    return done.stdout.strip() if done.returncode == 0 and done.stdout.strip() else None


def git_provenance(spec_path: str | None) -> dict[str, str]:
    """OCI revision/source labels when the spec file lives in a git checkout; the remote
    URL loses any credentials it carries. A checkout with uncommitted changes to the spec
    gets `-dirty` on the revision, so the label never claims a commit that is not what
    was built."""
    if not spec_path:
        return {}
    path = Path(spec_path).resolve()
    folder = path.parent
    revision = _git(folder, "rev-parse", "HEAD")
    if not revision:
        return {}
    if _git(folder, "status", "--porcelain", "--", path.name):
        revision += "-dirty"
    labels = {"org.opencontainers.image.revision": revision}
    remote = _git(folder, "config", "--get", "remote.origin.url")
    if remote:
        labels["org.opencontainers.image.source"] = strip_credentials(remote)
    return labels
