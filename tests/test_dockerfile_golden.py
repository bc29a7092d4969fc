"""Rendered Dockerfiles stay byte-identical: every recipe and every base family, for
both installers and with or without a pip wheel in the wheelhouse, against the files
in tests/data/dockerfiles/.

The template and the per-family data may be reorganised freely; what they render may
not change unnoticed. When a change to the output is intended (or the matrices move a
recipe to another base), regenerate the files with
`ENVBUILD_UPDATE_GOLDEN=1 python -m pytest tests/test_dockerfile_golden.py` and review
the diff. The data version label is masked: it changes with every edit of `matrices/`.
"""
from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path

import image_support as support
from envbuild import __version__, pipeline
from envbuild.dockerfile import render

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "data" / "dockerfiles"
_MATRIX_VERSION = re.compile(r'(io\.envbuild\.matrix-version=)"[^"]*"')


def _recipe_resolutions():
    from envbuild.resolver import resolve
    from envbuild.spec import load_spec

    for recipe in sorted((ROOT / "recipes").glob("*.yaml")):
        resolution = resolve(dataclasses.replace(load_spec(recipe), for_image=True))
        if resolution.usable:  # a recipe that shows a conflict renders nothing (test_dockerfile checks the error)
            yield f"recipe-{recipe.stem}", resolution


def _cases() -> dict[str, tuple]:
    cases = {}
    sources = [(f"family-{family}", support.resolution(family)) for family in sorted(support.FAMILY_BASES)]
    for name, resolution in [*sources, *_recipe_resolutions()]:
        for installer in ("conda", "pip"):
            for pip_wheel in (False, True):
                key = f"{name}.{installer}{'.wheel' if pip_wheel else ''}.Dockerfile"
                cases[key] = (resolution, installer, pip_wheel)
    return cases


# A pip environment's layers as envbuild.dockerfile.layers splits them (what each holds is
# only a comment of the Dockerfile)
PIP_LAYERS = (("frameworks", "cupy-cuda12x 13.3.0"), ("dependencies", "2 pins: fastrlock 0.8.2, numpy 2.1.3"),
              ("package-1", "einops 0.8.0"))


def _render(resolution, installer: str, pip_wheel: bool) -> str:
    text = render.render(render.RenderInput(resolution, installer, resolution.resolved.base_image.ref,
                                            pip_wheel=pip_wheel, wheelhouse=pip_wheel,
                                            installed=(("envbuild-demo", "1.0"),),
                                            layers=PIP_LAYERS if installer == "pip" else (),
                                            facts=pipeline.context_facts(resolution)))
    text = text.replace(f"envbuild {__version__} ", "envbuild VERSION ")
    text = text.replace(f'io.envbuild.version="{__version__}"', 'io.envbuild.version="VERSION"')
    return _MATRIX_VERSION.sub(r'\1"MATRIX-VERSION"', text)


def test_rendered_dockerfiles_are_unchanged():
    cases = _cases()
    assert len(cases) >= 40  # 5 families and the resolving recipes, 4 ways each
    rendered = {key: _render(*args) for key, args in cases.items()}
    if os.environ.get("ENVBUILD_UPDATE_GOLDEN") == "1":
        GOLDEN.mkdir(parents=True, exist_ok=True)
        for stale in GOLDEN.glob("*.Dockerfile"):
            stale.unlink()
        for key, text in rendered.items():
            (GOLDEN / key).write_text(text, encoding="utf-8")
    assert sorted(p.name for p in GOLDEN.glob("*.Dockerfile")) == sorted(rendered)
    changed = [key for key, text in rendered.items() if (GOLDEN / key).read_text(encoding="utf-8") != text]
    assert changed == []
