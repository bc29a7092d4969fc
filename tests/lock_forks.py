"""Run `envbuild` commands fast, many times: a helper process imports envbuild (and the
solver libraries) once, then forks one child per command, which runs `envbuild.cli.main`
exactly as the console script does. The parent never solves, so the children start from a
process without solver threads. Used by the kill sweep and the concurrency tests.

Protocol: one JSON list of jobs per stdin line, each {"argv", "env", "cwd"}; the jobs of a
line run at the same time. The answer is one JSON list of {"status", "stdout", "stderr"}
(status: exit code, or minus the signal number that ended the child).
"""
from __future__ import annotations

import json
import os
import sys
import tempfile


def _child(job: dict, out: str, err: str) -> None:
    os.chdir(job["cwd"])
    os.environ.update(job.get("env") or {})
    for fd, path in ((1, out), (2, err)):
        handle = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(handle, fd)
        os.close(handle)
    from envbuild.cli import main

    try:
        code = main(job["argv"])
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def main() -> None:
    # Imports only: nothing here starts a solver. Everything `envbuild lock` imports is
    # imported here once, so that no child spends its time importing (the command modules
    # are imported lazily by the CLI, asyncio lazily by the solver loop).
    import asyncio  # noqa: F401

    import rattler  # noqa: F401
    import rattler.exceptions  # noqa: F401
    import yaml  # noqa: F401

    import envbuild.cli  # noqa: F401
    import envbuild.commands.lock  # noqa: F401
    import envbuild.lock.api  # noqa: F401
    import envbuild.lock.check  # noqa: F401
    import envbuild.resolver  # noqa: F401

    for line in sys.stdin:
        jobs = json.loads(line)
        with tempfile.TemporaryDirectory() as tmp:
            running = []
            for i, job in enumerate(jobs):
                out, err = os.path.join(tmp, f"{i}.out"), os.path.join(tmp, f"{i}.err")
                pid = os.fork()
                if pid == 0:
                    _child(job, out, err)
                running.append((pid, out, err))
            answers = []
            for pid, out, err in running:
                _, status = os.waitpid(pid, 0)
                with open(out) as o, open(err) as e:
                    answers.append({"status": os.waitstatus_to_exitcode(status), "stdout": o.read(), "stderr": e.read()})
        sys.stdout.write(json.dumps(answers) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
