"""Install a locked environment during an image build.

This file is copied into the build context and run by the base image's own Python
(3.10 or newer) in the first build stage; it uses only the standard library, plus
py-rattler which it installs into a throw-away folder of that stage. It reads
`plan.json` (written by envbuild next to it) and either

- conda: links every package of the explicit lock into the prefix with py-rattler
  (the same installer `envbuild lock` solves with), after checking each archive's
  hash against the lock; archives bundled in the context are used as they are, the
  others are downloaded; or
- pip: creates a venv over the base's Python (so a framework already in the base
  stays importable) and runs pip on the locked requirements (hash-checked when the
  lock carries hashes).

Nothing it downloads or caches lives outside the build stage, which the final image
never copies; only the prefix is copied.
"""
from __future__ import annotations

import asyncio
import glob
import hashlib
import json
import os
import subprocess
import sys
import urllib.parse
import urllib.request


def fail(message: str) -> None:
    print(f"envbuild-install: error: {message}", file=sys.stderr)
    sys.exit(1)


def run(cmd: list[str]) -> None:
    print("envbuild-install: $ " + " ".join(cmd), flush=True)
    code = subprocess.call(cmd)
    if code:
        fail(f"command failed with exit code {code}: {' '.join(cmd)}")


def pip_command(python: str, wheelhouse: str | None) -> list[str]:
    """pip from the wheelhouse when it carries one (bases without pip), else the base's pip."""
    wheels = sorted(glob.glob(os.path.join(wheelhouse, "pip-*.whl"))) if wheelhouse else []
    if wheels:
        return [python, os.path.join(wheels[-1], "pip")]
    if subprocess.call([python, "-m", "pip", "--version"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) == 0:
        return [python, "-m", "pip"]
    fail(f"{python} has no pip and the build context has no pip wheel; install python3-pip in the base "
         "or pass a wheelhouse holding a pip wheel")
    raise AssertionError


def pip_install_args(wheelhouse: str | None) -> list[str]:
    args = ["install", "--no-cache-dir", "--disable-pip-version-check", "--no-input", "--no-warn-script-location"]
    if wheelhouse and any(name.endswith(".whl") or name.endswith(".tar.gz") for name in os.listdir(wheelhouse)):
        args += ["--no-index", "--find-links", wheelhouse]  # offline: everything comes from the context
    return args


def check_hash(path: str, sha256: str | None, md5: str | None) -> None:
    if not sha256 and not md5:
        return
    algo, expected = ("sha256", sha256) if sha256 else ("md5", md5)
    digest = hashlib.new(algo)
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    if digest.hexdigest() != expected:
        fail(f"{os.path.basename(path)}: {algo} {digest.hexdigest()} does not match the lock ({expected})")


def fetch(package: dict, context: str, downloads: str) -> str:
    if package.get("file"):
        path = os.path.join(context, package["file"])
    else:
        url = package["url"]
        os.makedirs(downloads, exist_ok=True)
        path = os.path.join(downloads, os.path.basename(urllib.parse.urlparse(url).path))
        print(f"envbuild-install: downloading {url}", flush=True)
        urllib.request.urlretrieve(url, path)  # noqa: S310 - URLs come from the lockfile
    check_hash(path, package.get("sha256"), package.get("md5"))
    return path


def install_conda(plan: dict, context: str, wheelhouse: str | None) -> None:
    tools = os.path.join(context, "tools")
    run(pip_command(sys.executable, wheelhouse) + pip_install_args(wheelhouse) + ["--target", tools, plan["rattler"]])
    sys.path.insert(0, tools)
    import rattler  # noqa: PLC0415 - installed just above

    paths = [fetch(p, context, os.path.join(context, "downloads")) for p in plan["conda"]]

    async def link() -> None:
        records = [await rattler.RepoDataRecord.from_package_archive(p) for p in paths]
        await rattler.install(records, plan["prefix"], cache_dir=os.path.join(context, "cache"), show_progress=False)

    print(f"envbuild-install: linking {len(paths)} conda packages into {plan['prefix']}", flush=True)
    asyncio.run(link())
    marker = os.path.join(plan["prefix"], "CACHEDIR.TAG")  # rattler marks the prefix; it is no cache
    if os.path.exists(marker):
        os.remove(marker)
    if plan.get("pip_lock"):  # pip section of a conda lock: installed by the environment's own python
        python = os.path.join(plan["prefix"], "bin", "python")
        run(pip_command(python, wheelhouse) + pip_install_args(wheelhouse) + ["--no-deps", "-r", os.path.join(context, plan["pip_lock"])])


def install_pip(plan: dict, context: str, wheelhouse: str | None) -> None:
    prefix = plan["prefix"]
    run([sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", prefix])
    python = os.path.join(prefix, "bin", "python")
    run(pip_command(python, wheelhouse) + pip_install_args(wheelhouse) + ["--no-deps", "-r", os.path.join(context, plan["pip_lock"])])


def main(argv: list[str]) -> None:
    if len(argv) != 1:
        fail("usage: install.py PLAN.json")
    with open(argv[0]) as handle:
        plan = json.load(handle)
    context = os.path.dirname(os.path.abspath(argv[0]))
    wheelhouse = os.path.join(context, plan["wheelhouse"]) if plan.get("wheelhouse") else None
    os.environ.setdefault("PIP_ROOT_USER_ACTION", "ignore")  # a build runs as root on purpose
    if sys.version_info < (3, 10):
        fail(f"the base image's Python is {sys.version.split()[0]}; the installer needs 3.10 or newer")
    if plan["installer"] == "conda":
        install_conda(plan, context, wheelhouse)
    else:
        install_pip(plan, context, wheelhouse)
    print(f"envbuild-install: environment ready in {plan['prefix']}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
    # py-rattler's native runtime can crash while the interpreter tears down (seen as a
    # segfault after a successful install); the work is done and flushed, so leave now.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
