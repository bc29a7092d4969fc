"""`python -m envbuild.frameworks [--check]`: write what the published JSON schemas say of
the frameworks (`schema/spec.schema.json`: the names and aliases a spec may use, and the
pattern of the names that carry a CUDA version; `schema/matrix.schema.json`: the names)
from the plugins, after checking that every plugin's matrix rows type. With --check only
say whether the schemas are current (exit 1 when they are not).

The schemas stay static files, published for editors and CI; this keeps them equal to the
registry, so that a new framework is its plugin and its matrix file, then this command and
`python -m envbuild.matrix`.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from envbuild import frameworks, matrix
from envbuild.matrix import MatrixError

SCHEMA_DIR = Path(__file__).resolve().parents[2] / "schema"
NAMES_SAID = "Names: "  # where the spec schema's description of `frameworks` lists them


def _spec(schema: dict) -> dict:
    field = schema["properties"]["frameworks"]
    names, pattern = field["propertyNames"]["anyOf"]
    names["enum"] = list(frameworks.aliases())
    written = [p.removeprefix("^").removesuffix("$") for plugin in frameworks.all()
               for p, _digits in plugin.spelling.cuda_in_name]
    pattern["pattern"] = f"^({'|'.join(written)})$"
    said = ", ".join(f"{p.name} ({', '.join(p.spelling.aliases)})" if p.spelling.aliases else p.name
                     for p in frameworks.all())
    head = field["description"].partition(NAMES_SAID)[0]
    field["description"] = f"{head}{NAMES_SAID}{said}; and the names with a CUDA version in them that the pattern admits."
    return schema


def _matrix(schema: dict) -> dict:
    schema["properties"]["framework"]["enum"] = list(frameworks.names())
    return schema


WRITERS = {"spec.schema.json": _spec, "matrix.schema.json": _matrix}


def schema_texts(directory: Path = SCHEMA_DIR) -> dict[Path, str]:
    """Each schema file -> its text as the registry makes it."""
    out = {}
    for name, write in WRITERS.items():
        path = directory / name
        out[path] = json.dumps(write(json.loads(path.read_text(encoding="utf-8"))), indent=2, ensure_ascii=False) + "\n"
    return out


def main(argv: list[str]) -> int:
    m = matrix.load_from(matrix.MATRICES_DIR)
    try:
        for plugin in frameworks.all():
            plugin.rows(m)
    except MatrixError as exc:
        print(f"matrices: {exc}", file=sys.stderr)
        return 2
    stale = [path for path, text in schema_texts().items() if path.read_text(encoding="utf-8") != text]
    if argv == ["--check"]:
        for path in stale:
            print(f"{path}: out of date: run python -m envbuild.frameworks")
        return 1 if stale else 0
    for path, text in schema_texts().items():
        if path in stale:
            path.write_text(text, encoding="utf-8")
        print(f"{path}: {'written' if path in stale else 'current'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
