"""Install a locked environment during an image build.

This file is copied into the build context and run by the base image's own Python in
the first build stage (the oldest it runs on, per mode, is `python_min` in plan.json,
from matrices/base_images.yaml `installer_python`: 3.8 for pip, 3.10 for conda, so
this file keeps to syntax and standard library that 3.8 has); it uses only the standard library, plus
py-rattler which it installs into a throw-away folder of that stage. It reads
`plan.json` (written by envbuild next to it) and either

- conda: links every package of the explicit lock into the prefix with py-rattler
  (the same installer `envbuild lock` solves with), after checking each archive's
  hash against the lock; archives bundled in the context are used as they are, the
  others are downloaded; or
- pip, `install.py PLAN.json`: creates a venv over the base's Python (so a framework
  already in the base stays importable); then, in a build stage of its own for each layer
  of the environment, `install.py PLAN.json LAYER_DIR` runs pip on that layer's part of
  the lock (hash-checked when the lock carries hashes) with `--root`, so the stage holds
  that layer's files alone, under LAYER_ROOT, for the final image to copy.

Nothing it downloads or caches lives outside the build stage, which the final image
never copies; only the prefix and the layers' roots are copied.
"""
from __future__ import annotations

import asyncio
import compileall
import glob
import hashlib
import json
import os
import shutil
import subprocess
import sys
import urllib.parse
import urllib.request
import zipfile


def fail(message: str) -> None:
    print(f"envbuild-install: error: {message}", file=sys.stderr)
    sys.exit(1)


def run(cmd: list[str]) -> None:
    print("envbuild-install: $ " + " ".join(cmd), flush=True)
    code = subprocess.call(cmd)
    if code:
        fail(f"command failed with exit code {code}: {' '.join(cmd)}")


def runs(cmd: list[str]) -> bool:
    return subprocess.call(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) == 0


def has_ensurepip(python: str) -> bool:
    """Debian and Ubuntu split ensurepip into python3-venv; without it a venv gets no pip."""
    return runs([python, "-c", "import ensurepip"])


# Where the pip mode's venv step unpacks the wheelhouse's pip for the layers' steps: pip run
# from its wheel imports from the zip file, several seconds per step.
UNPACKED_PIP = "pip-unpacked"


def pip_command(python: str, wheelhouse: str | None, tools: str) -> list[str]:
    """A pip for `python`: the wheelhouse's pip (unpacked in `tools` by the venv step, or
    run from its wheel) when one is given and runs on this Python (offline builds), else
    the pip `python` already has, else a throw-away venv made with ensurepip in `tools`
    (its pip installs into other places with --target / -r)."""
    unpacked = os.path.join(tools, UNPACKED_PIP, "pip")
    if os.path.isdir(unpacked):  # made by the same interpreter the venv runs
        return [python, unpacked]
    wheels = sorted(glob.glob(os.path.join(wheelhouse, "pip-*.whl"))) if wheelhouse else []
    if wheels and runs([python, os.path.join(wheels[-1], "pip"), "--version"]):
        return [python, os.path.join(wheels[-1], "pip")]
    if runs([python, "-m", "pip", "--version"]):
        return [python, "-m", "pip"]
    if has_ensurepip(python):
        venv = os.path.join(tools, "pip-venv")
        run([python, "-m", "venv", venv])
        return [os.path.join(venv, "bin", "python"), "-m", "pip"]
    fail(f"{python} has no pip, no ensurepip, and the build context has no pip wheel it can run; install "
         "python3-venv (or python3-pip) in the base, or pass a wheelhouse holding a pip wheel")
    raise AssertionError


def pip_install_args(wheelhouse: str | None) -> list[str]:
    args = ["install", "--no-cache-dir", "--disable-pip-version-check", "--no-input", "--no-warn-script-location"]
    if wheelhouse and os.path.isdir(wheelhouse) and any(
            name.endswith(".whl") or name.endswith(".tar.gz") for name in os.listdir(wheelhouse)):
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
    run(pip_command(sys.executable, wheelhouse, context) + pip_install_args(wheelhouse) + ["--target", tools, plan["rattler"]])
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
        run(pip_command(python, wheelhouse, context) + pip_install_args(wheelhouse)
            + ["--no-deps", "-r", os.path.join(context, plan["pip_lock"])])


# `pip` in the venv of a base whose Python has pip: that pip, run by the venv's Python,
# installs into the venv (a venv sees the base's packages, so it needs no copy of pip).
PIP_SCRIPT = """#!{python}
# The base image's pip, run by this environment's Python: it installs into {prefix}.
import runpy

runpy.run_module("pip", run_name="__main__", alter_sys=True)
"""


def make_venv(plan: dict, context: str, wheelhouse: str | None) -> None:
    """The venv the layers are installed into. The user can add packages to it later with
    `pip`: the base's pip when its Python has one, else the venv's own from ensurepip
    (python3-venv); a base with neither gets a bare venv. The wheelhouse's pip, when it
    has one, is unpacked here (outside the venv) for the layers' steps."""
    prefix = plan["prefix"]
    wheels = sorted(glob.glob(os.path.join(wheelhouse, "pip-*.whl"))) if wheelhouse else []
    if wheels:  # pip is pure Python: its wheel unpacked is pip, if it runs on this Python at all
        unpacked = os.path.join(context, UNPACKED_PIP)
        with zipfile.ZipFile(wheels[-1]) as wheel:
            wheel.extractall(unpacked)
        if runs([sys.executable, os.path.join(unpacked, "pip"), "--version"]):
            compileall.compile_dir(unpacked, quiet=1)  # once here, not in every layer's step
        else:
            shutil.rmtree(unpacked)
    base_pip = runs([sys.executable, "-m", "pip", "--version"])
    own_pip = not base_pip and has_ensurepip(sys.executable)
    run([sys.executable, "-m", "venv", *([] if own_pip else ["--without-pip"]), "--system-site-packages", prefix])
    if base_pip:
        python = os.path.join(prefix, "bin", "python")
        for name in ("pip", "pip3"):
            path = os.path.join(prefix, "bin", name)
            with open(path, "w") as handle:
                handle.write(PIP_SCRIPT.format(python=python, prefix=prefix))
            os.chmod(path, 0o755)


def install_layer(plan: dict, context: str, layer: str, wheelhouse: str | None) -> None:
    """One layer: pip installs its part of the lock as if into the venv, but under a root
    folder of its own (`--root`), which then holds exactly this layer's files. Installed
    packages of the base or of other layers are not looked at (`--ignore-installed`, and
    the lock pins every dependency, `--no-deps`)."""
    prefix = plan["prefix"]
    root = os.path.join(context, "root")
    python = os.path.join(prefix, "bin", "python")
    args = pip_command(python, wheelhouse, context) + pip_install_args(os.path.join(layer, "wheels"))
    if plan.get("require_hashes"):
        args.append("--require-hashes")
    run(args + ["--no-deps", "--ignore-installed", "--root", root, "-r", os.path.join(layer, "requirements.lock")])
    outside = _outside(root, prefix)
    if outside:  # the final image copies the prefix's part of the root only
        fail(f"pip put files outside {prefix}: {outside[0]}" + (f" and {len(outside) - 1} more" if len(outside) > 1 else ""))
    # The folders above the layer's files are copied over the image's own: give them the
    # image's owner, mode and times, so the copy changes nothing of them.
    path = prefix
    while True:
        found, staged = os.stat(path), os.path.join(root, path.lstrip("/"))
        if os.path.isdir(staged):
            if os.geteuid() == 0:  # a build runs as root; elsewhere the owner is the caller
                os.chown(staged, found.st_uid, found.st_gid)
            os.chmod(staged, found.st_mode & 0o7777)
            os.utime(staged, ns=(found.st_atime_ns, found.st_mtime_ns))
        if path == "/":
            break
        path = os.path.dirname(path)


def _outside(root: str, prefix: str) -> list[str]:
    """What pip wrote under `root` that is neither in the prefix nor a folder above it."""
    staged = os.path.join(root, prefix.lstrip("/"))
    found = []
    for top, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(top, name)
            if not (_within(path, staged) or _within(staged, path)):
                found.append("/" + os.path.relpath(path, root))
        dirs[:] = [name for name in dirs if _within(staged, os.path.join(top, name))]  # on the way to the prefix
    return sorted(found)


def _within(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder + os.sep)


def main(argv: list[str]) -> None:
    if len(argv) not in (1, 2):
        fail("usage: install.py PLAN.json [LAYER_DIR]")
    with open(argv[0]) as handle:
        plan = json.load(handle)
    context = os.path.dirname(os.path.abspath(argv[0]))
    wheelhouse = os.path.join(context, plan["wheelhouse"]) if plan.get("wheelhouse") else None
    os.environ.setdefault("PIP_ROOT_USER_ACTION", "ignore")  # a build runs as root on purpose
    floor = tuple(int(x) for x in str(plan.get("python_min") or "3.10").split("."))
    if sys.version_info[:2] < floor:  # the resolver avoids such bases; a hand-made context may not
        fail(f"the base image's python3 is {sys.version.split()[0]}; the {plan['installer']} installer needs "
             f"{plan.get('python_min') or '3.10'} or newer (matrices/base_images.yaml installer_python)")
    if plan["installer"] == "conda":
        install_conda(plan, context, wheelhouse)
    elif len(argv) == 2:
        install_layer(plan, context, os.path.abspath(argv[1]), wheelhouse)
        root = os.path.join(context, "root")
        print(f"envbuild-install: layer ready in {root} ({prefix_size(root)} bytes)", flush=True)
        return
    else:
        make_venv(plan, context, wheelhouse)
    print(f"envbuild-install: environment ready in {plan['prefix']} ({prefix_size(plan['prefix'])} bytes)", flush=True)


def prefix_size(prefix: str) -> int:
    """Bytes in the prefix, or a layer's root (links not followed): what the final stage's
    COPY --from copies, so the build's progress can say how much that silent step moves."""
    total = 0
    for folder, _dirs, files in os.walk(prefix):
        for name in files:
            try:
                total += os.lstat(os.path.join(folder, name)).st_size
            except OSError:
                pass
    return total


if __name__ == "__main__":
    main(sys.argv[1:])
    # py-rattler's native runtime can crash while the interpreter tears down (seen as a
    # segfault after a successful install); the work is done and flushed, so leave now.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
