"""`python -m envbuild.matrix [--check]`: compile `matrices/*.yaml` into the package data
file that commands read (`envbuild/data/matrices.json`); with --check only say whether
that file is current (exit 1 when it is not)."""
from __future__ import annotations

import sys

from envbuild.infra.paths import COMPILED_MATRICES, MATRICES_DIR
from envbuild.matrix import MatrixError, compile_matrices, load_from, to_json


def main(argv: list[str]) -> int:
    try:
        if argv == ["--check"]:
            current = COMPILED_MATRICES.read_text(encoding="utf-8") == to_json(load_from(MATRICES_DIR))
            print(f"{COMPILED_MATRICES}: {'current' if current else 'out of date: run python -m envbuild.matrix'}")
            return 0 if current else 1
        written = compile_matrices()
    except MatrixError as exc:
        print(f"matrices: {exc}", file=sys.stderr)
        return 2
    print(f"{COMPILED_MATRICES}: {'written' if written else 'current'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
