"""What `envbuild resolve` and `envbuild lock` load, checked by module names rather than by
time (times vary with the machine; an import that should not happen shows up here at once),
and that `resolve` reads and writes no per-user cache: what it knows comes from the package
(the compiled matrices) and from its input."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# run one command in a fresh interpreter and print the names of the modules it loaded
CHILD = """
import contextlib, io, json, sys
from envbuild.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    try:
        code = main(sys.argv[1:])
    except SystemExit as exc:  # --version and --help end in argparse's exit
        code = exc.code
print(json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""

# never on the `resolve` path: the services' and solvers' libraries, terminals, and the
# lock and verify stages. (A base outside the catalog is read from the local engine or a
# registry, so envbuild.image.facts brings the engine's and the registry's own modules,
# which talk HTTP with the standard library: the docker SDK and requests stay out. The
# probe's shared names, envbuild.verify.probe_api, are host facts: hostinfo reads this
# machine's GPUs with them.)
NOT_FOR_RESOLVE = ("docker", "kubernetes", "rattler", "requests", "urllib3", "rich", "conda_lock", "pydantic", "cupy",
                   "asyncio", "envbuild.lock", "envbuild.verify.runner", "envbuild.verify.fleet",
                   "envbuild.verify.summary", "envbuild.verify.junit")


def _loaded(args: list[str], cwd: Path = ROOT, env: dict | None = None) -> tuple[int, set[str]]:
    done = subprocess.run([sys.executable, "-c", CHILD, *args], env=env, capture_output=True, text=True, cwd=cwd,
                          check=True)
    answer = json.loads(done.stdout.splitlines()[-1])
    return answer["code"], set(answer["modules"])


def _hits(modules: set[str], banned: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if any(m == b or m.startswith(b + ".") for b in banned))


def test_resolve_loads_no_heavy_library_and_no_other_command():
    for name in ("pytorch-official.yaml", "pytorch-dlc.yaml"):  # the second has pip packages
        code, modules = _loaded(["resolve", str(ROOT / "recipes" / name)])
        assert code == 0
        assert _hits(modules, NOT_FOR_RESOLVE) == []
        # only the command that runs is imported and declared
        assert "envbuild.commands.resolve" in modules
        assert _hits(modules, ("envbuild.commands.lock", "envbuild.commands.image", "envbuild.commands.matrix")) == []


def test_help_still_lists_every_command():
    from envbuild.cli import COMMANDS

    done = subprocess.run([sys.executable, "-m", "envbuild", "--help"], capture_output=True, text=True, check=True)
    for name in ("resolve", "matrix", "lock", "dockerfile", "image", "verify", "doctor", "init", "env", "run"):
        assert f"    {name}" in done.stdout
        assert f"{name} {' '.join(COMMANDS[name].split()[:4])}" in " ".join(done.stdout.split())  # with its help


def test_version_help_and_a_misspelt_command_import_no_command_module():
    for args, expected in ((["--version"], 0), (["--help"], 0), (["-v", "--help"], 0), (["reslove"], 2), ([], 2)):
        code, modules = _loaded(args)
        assert code == expected, args
        assert _hits(modules, ("envbuild.commands",)) == ["envbuild.commands"], args  # the package alone


def test_lock_loads_no_later_stage():
    """The lock path (here `lock --check` of a pip recipe, which reads what `lock` reads
    before it solves) needs neither the pipeline nor the Dockerfile, image and verify stages."""
    code, modules = _loaded(["lock", str(ROOT / "recipes" / "cupy.yaml"), "-o", "no-lock-here", "--check"])
    assert code == 1  # no lock there: out of date
    assert _hits(modules, ("envbuild.pipeline", "envbuild.dockerfile.context", "envbuild.dockerfile.render",
                           "envbuild.image.make", "envbuild.image.build", "envbuild.verify.runner",
                           "envbuild.commands.image")) == []


def test_resolve_reads_and_writes_no_cache_folder(tmp_path):
    """A cache folder anyone could have written to (a CI cache mount) is not read: FIFOs
    and a link to /dev/zero under the names earlier releases used for their caches would
    hang a reader, garbage would change an answer. Nothing is written there or in the home
    folder either."""
    cache, home = tmp_path / "cache", tmp_path / "home"
    (cache / "envbuild").mkdir(parents=True)
    home.mkdir()
    for name in ("matrices-version-00000000.marshal", "specifiers-packaging-26.0.marshal", "package-sets-1.marshal",
                 "dataclass-code-cpython-311-30b07f0.marshal", "builds-pytorch-0-code0.pickle"):
        os.mkfifo(cache / "envbuild" / name)
    os.symlink("/dev/zero", cache / "envbuild" / "matrices-0-gpu1-code0.pickle")  # endless
    before = sorted(p.name for p in (cache / "envbuild").iterdir())

    def resolve(env=None):
        return subprocess.run([sys.executable, "-m", "envbuild", "resolve", str(ROOT / "recipes" / "pytorch-official.yaml"),
                               "--json"], capture_output=True, text=True, cwd=ROOT, env=env, timeout=60)

    expected = resolve()
    assert expected.returncode == 0 and expected.stdout
    for _ in range(2):
        got = resolve({**os.environ, "XDG_CACHE_HOME": str(cache), "HOME": str(home)})
        assert (got.returncode, got.stdout, got.stderr) == (expected.returncode, expected.stdout, expected.stderr)
    assert sorted(p.name for p in (cache / "envbuild").iterdir()) == before
    assert list(home.iterdir()) == []


def test_lock_loads_the_solver_only_to_solve(tmp_path):
    """`lock` imports py-rattler and asyncio (which drives rattler's coroutines) when it
    solves; `lock --check` compares hashes and needs neither. conda-lock (its models pull in
    its whole command-line tool) is never imported."""
    from lock_channels import repodata_channels
    from test_lock_cli import SPEC

    repodata_channels(tmp_path / "channels")
    (tmp_path / "spec.yaml").write_text(SPEC.format(version="2.1.2", cuda="12.1", python="3.10"))
    code, solving = _loaded(["lock", "spec.yaml", "-o", "lock"], cwd=tmp_path)
    assert code == 0
    assert {"rattler", "asyncio"} <= solving
    # a conda-only lock needs neither the pip lock's network libraries nor, to check it, TLS
    assert _hits(solving, ("conda_lock", "pydantic", "docker", "requests")) == []
    code, checking = _loaded(["lock", "spec.yaml", "-o", "lock", "--check"], cwd=tmp_path)
    assert code == 0
    # (the solver, conda-lock and requests never)
    assert _hits(checking, ("rattler", "asyncio", "conda_lock", "pydantic", "requests")) == []
