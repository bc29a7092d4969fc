"""Render a Dockerfile from the one template, the base family's data and the resolved stack.

The template (`Dockerfiles/template.Dockerfile`) is a plain Dockerfile with `@{name}`
placeholders (`string.Template` with `@` as delimiter, so Docker's own `${VAR}` stays
untouched). Only values are substituted; the structure lives in the template. What differs
between base families (the opening comment, whether the base brings a python3) is data:
the `families` table of `matrices/base_images.yaml`, handed in by the caller as
`MatrixFacts` with the other values the matrices give.
"""
from __future__ import annotations

import json
import string
from dataclasses import dataclass, field

from envbuild import __version__
from envbuild.core.model import Resolution, ResolvedStack
from envbuild.infra.errors import UserError
from envbuild.infra.paths import DOCKERFILES_DIR

PREFIX = "/opt/env"  # where the locked environment lives in every image
PROBE_PATH = "/opt/envbuild/probe.py"
LABEL_NS = "io.envbuild"

# The final stage of an nvidia/cuda image needs the base's Python only for a pip venv
# (a conda prefix carries its own); nvidia/cuda images have none.
_RUNTIME_PYTHON = (
    "# The pip environment is a venv over the system Python, which nvidia/cuda lacks.\n"
    "# hadolint ignore=DL3008\n"  # the distribution's python3 follows the base release; see the install stage
    "RUN if ! command -v python3 >/dev/null 2>&1; then \\\n"
    "        apt-get update \\\n"
    "        && apt-get install -y --no-install-recommends python3 \\\n"
    "        && rm -rf /var/lib/apt/lists/*; \\\n"
    "    fi\n"
)


# The install stage of an nvidia/cuda image (which ships no Python) needs python3 for
# install.py, and python3-venv for a pip that works online: its ensurepip gives the pip
# environment (and the conda mode's py-rattler install) a pip. With a pip wheel in the
# wheelhouse any python3 will do, so an offline build needs no package archive.
_INSTALL_PYTHON = (
    "# nvidia/cuda images ship no Python; install.py needs @{what} in this stage.\n"
    "# The distribution's own python3: its version is the base release's, so pinning it would\n"
    "# break with the next base; the lock pins everything installed into the environment.\n"
    "# hadolint ignore=DL3008\n"
    "RUN if ! @{test} >/dev/null 2>&1; then \\\n"
    "        apt-get update \\\n"
    "        && apt-get install -y --no-install-recommends python3 python3-venv \\\n"
    "        && rm -rf /var/lib/apt/lists/*; \\\n"
    "    fi\n"
)


def install_python(pip_wheel: bool) -> str:
    if pip_wheel:
        return _Template(_INSTALL_PYTHON).substitute(what="python3", test="command -v python3")
    return _Template(_INSTALL_PYTHON).substitute(what="python3 with ensurepip (python3-venv)",
                                                 test="python3 -c 'import ensurepip'")


# The facts about the base image the stack was checked against, checked on the image
# itself before anything is installed, so a base that is not what they said (a mirror
# serving another image under the tag, a stated fact that was wrong) fails the build at
# once with one line instead of making an image that runs another Python or CUDA.
# A pip environment is a venv over this python3: it must be the locked Python.
_PYTHON_CHECK = (
    "found=\"$(python3 -c 'import sys; print(\"%d.%d\" % sys.version_info[:2])')\" \\\n"
    "    && if [ \"$found\" != \"@{python}\" ]; then \\\n"
    "        echo \"envbuild: error: base image @{base}: python3 is Python $found, the lock is for Python @{python} "
    "(use a base image whose python3 is @{python}, or pin python: $found with a base image that has it, and lock "
    "again)\" >&2; \\\n"
    "        exit 1; \\\n"
    "    fi"
)
# The CUDA the base carries, where it says: CUDA_VERSION (NVIDIA's images and those built
# FROM them), else the toolkit's version.json (its first "version" is the CUDA SDK's; the
# expansion keeps the first line); a base that says neither (a framework image whose CUDA
# comes in wheels) is taken as stated.
_CUDA_CHECK = (
    "cuda=\"${CUDA_VERSION:-}\" \\\n"
    "    && if [ -z \"$cuda\" ] && [ -f /usr/local/cuda/version.json ]; then \\\n"
    "        cuda=\"$(sed -n 's/^ *\"version\" *: *\"\\([0-9.]*\\)\".*/\\1/p' /usr/local/cuda/version.json)\"; \\\n"
    "        cuda=\"${cuda%%[!0-9.]*}\"; \\\n"
    "    fi \\\n"
    "    && case \"$cuda\" in \\\n"
    "        \"\"|@{cuda}|@{cuda}.*) ;; \\\n"
    "        *) echo \"envbuild: error: base image @{base}: it carries CUDA $cuda, the stack was checked against CUDA "
    "@{cuda} (state the base's CUDA with base_image.cuda or --base-fact cuda=X.Y, or use a base image with CUDA "
    "@{cuda}, and lock again)\" >&2; \\\n"
    "           exit 1 ;; \\\n"
    "    esac"
)


def base_check(installer: str, python: str, base: str, cuda: str | None) -> str:
    """The early build step that stops a build on a base other than the one the stack was
    checked against: a pip build on a python3 other than the locked one (a conda prefix
    brings its own interpreter), any build on a base that carries another CUDA than the
    one it was said to carry (compared at the precision it was stated: 12.4, or 13)."""
    checks, what = [], []
    if installer == "pip":
        checks.append(_Template(_PYTHON_CHECK).substitute(python=".".join(python.split(".")[:2]), base=base))
        what.append(f"python3 must be the locked Python {'.'.join(python.split('.')[:2])} (the pip environment is "
                    "a venv over it)")
    if cuda:
        stated = cuda.split(".")
        checks.append(_Template(_CUDA_CHECK).substitute(cuda=".".join(stated[:2]), base=base))
        what.append(f"the base must carry the CUDA {'.'.join(stated[:2])} the stack was checked against")
    if not checks:
        return ""
    lines = "".join(f"# - {line}\n" for line in what)
    return f"# Before anything is installed, the facts the stack relied on:\n{lines}RUN " + " \\\n    && ".join(checks) + "\n"


class _Template(string.Template):
    delimiter = "@"


@dataclass(frozen=True)
class MatrixFacts:
    """What the Dockerfile stage takes from the matrices. The caller reads them
    (`envbuild.pipeline.context_facts`) and hands them in, so this stage reads no table."""

    image_python: bool  # the base family's images bring a python3 (nvidia/cuda: none)
    dockerfile_comment: str  # opens the Dockerfile: the base family's `dockerfile_comment`
    driver_floor: str | None  # minor-version compatibility's driver floor for the stack's CUDA major
    installer_python: tuple[tuple[str, str], ...]  # (installer, the oldest python3 install.py runs on in it)
    # the layers of a pip environment, in image order: (layer, PEP 503 name patterns), from
    # the `layers` table of matrices/packages.yaml
    layers: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def python_min(self, installer: str) -> str | None:
        return dict(self.installer_python).get(installer)


@dataclass(frozen=True)
class RenderInput:
    resolution: Resolution
    installer: str  # conda | pip: what the lock holds
    base_ref: str  # what FROM names: the catalog reference after mirror and digest pinning
    base_digest: str | None = None
    pip_wheel: bool = False  # the wheelhouse holds a pip wheel: no python3-venv needed
    installed: tuple[tuple[str, str], ...] = ()  # (package, version) from the lock: frameworks, key libraries
    # a pip environment's layers after the venv (envbuild.dockerfile.layers): (name, what it holds)
    layers: tuple[tuple[str, str], ...] = ()
    wheelhouse: bool = False  # an offline build: the context has the installer's wheels
    cuda: str | None = None  # the CUDA runtime the lock installs (major.minor); None: the resolved CUDA
    facts: MatrixFacts = field(kw_only=True)

    @property
    def image_cuda(self) -> str | None:
        """The CUDA the image's environment runs: what its lock installs, which a framework's
        own requirements may have moved past the resolved CUDA."""
        return self.cuda or self.resolution.resolved.cuda


TEMPLATE = DOCKERFILES_DIR / "template.Dockerfile"


def comment(text: str) -> str:
    """Dockerfile comment lines: `# ` before each line, a bare `#` for an empty one."""
    return "".join(f"# {line}\n" if line else "#\n" for line in text.splitlines())


def stack_summary(stack: ResolvedStack, cuda: str | None = None) -> str:
    """One line of the stack; `cuda`: the CUDA the lock installs when it is not the resolved one."""
    parts = [f"{f.name} {f.version}" + (f" (CUDA {f.cuda})" if f.cuda else "") for f in stack.frameworks]
    cuda = cuda or stack.cuda
    parts.append(f"CUDA {cuda}" if cuda else "no CUDA")
    if stack.cudnn:
        parts.append(f"cuDNN {stack.cudnn}")
    parts.append(f"Python {stack.python}")
    parts.append(f"{stack.installer} on {stack.platform}")
    return ", ".join(parts)


def require_cuda(stack: ResolvedStack, driver_floor: str | None = None, cuda: str | None = None) -> str:
    """NVIDIA_REQUIRE_CUDA for the NVIDIA container runtime: `cuda>=X.Y` refuses drivers
    older than the environment's CUDA. For CUDA 11+ minor-version compatibility lets any
    driver at or above the major's floor (`driver_floor`, from the matrices) run it, which
    the resolver accepted too, so that floor is allowed as an alternative clause (space =
    OR for the runtime). `cuda`: the CUDA the lock installs, when not the resolved one."""
    cuda = cuda or stack.cuda
    if not cuda:
        return ""
    clauses = [f"cuda>={cuda}"]
    if driver_floor:
        clauses.append(f"driver>={driver_floor}")
    return " ".join(clauses)


def quote(value: str) -> str:
    """A double-quoted Dockerfile word: JSON escaping, and `$` kept literal."""
    return json.dumps(value, ensure_ascii=False).replace("$", "\\$")


def labels(data: RenderInput) -> dict[str, str]:
    res, stack = data.resolution, data.resolution.resolved
    assert stack is not None and stack.base_image is not None
    frameworks = " ".join(f"{f.name}=={f.version}" + (f"+cuda{f.cuda}" if f.cuda else "") for f in stack.frameworks)
    values = {
        "org.opencontainers.image.title": res.spec.name or "envbuild-environment",
        "org.opencontainers.image.description": f"GPU environment: {stack_summary(stack, data.image_cuda)}",
        "org.opencontainers.image.base.name": data.base_ref.split("@")[0],
        "org.opencontainers.image.base.digest": data.base_digest or "",
        f"{LABEL_NS}.version": __version__,
        f"{LABEL_NS}.spec-hash": res.spec.hash(),
        f"{LABEL_NS}.matrix-version": res.matrix_version,
        f"{LABEL_NS}.frameworks": frameworks,
        f"{LABEL_NS}.cuda": data.image_cuda or "",  # installed, as the probe's label check reads it
        f"{LABEL_NS}.cudnn": stack.cudnn or "",
        f"{LABEL_NS}.python": stack.python,
        f"{LABEL_NS}.installer": data.installer,
        f"{LABEL_NS}.platform": stack.platform,
        f"{LABEL_NS}.driver": stack.driver or "",
        f"{LABEL_NS}.gpus": ",".join(f"{g.name}={g.compute_capability or 'unknown'}" for g in stack.gpus),
        f"{LABEL_NS}.base": stack.base_image.ref,
        f"{LABEL_NS}.prefix": PREFIX,
        f"{LABEL_NS}.probe": PROBE_PATH,
    }
    # What the lock installs, not the constraint asked for (`cupy==13` installs 13.6.0).
    values.update({f"{LABEL_NS}.installed.{name}": version for name, version in data.installed})
    return {k: v for k, v in values.items() if v}


# The conda route installs the whole environment in one step; rattler links a transaction
# into one prefix, so it is one layer.
_CONDA_STEPS = ("COPY envbuild/ /tmp/envbuild/\n"
                "RUN python3 /tmp/envbuild/install.py /tmp/envbuild/plan.json\n")
_PIP_STEPS = (
    "# The environment: a venv over the base's python3. Each layer of it is installed in a\n"
    "# stage of its own below, from its part of the lock, so that a change to one package\n"
    "# builds and pushes only its layer.\n"
    "COPY envbuild/install.py envbuild/plan.json /tmp/envbuild/\n"
    "@{wheelhouse}RUN python3 /tmp/envbuild/install.py /tmp/envbuild/plan.json\n"
)
_LAYER_STAGE = (
    "# Layer @{layer}: @{what}\n"
    "FROM install AS layer-@{layer}\n"
    "COPY envbuild/layers/@{layer}/ /tmp/envbuild/layer/\n"
    "RUN python3 /tmp/envbuild/install.py /tmp/envbuild/plan.json /tmp/envbuild/layer\n"
    "\n"
)
LAYER_ROOT = "/tmp/envbuild/root"  # where install.py puts a layer's files (pip --root)


def _install_steps(data: RenderInput) -> str:
    if data.installer != "pip":
        return _CONDA_STEPS
    wheelhouse = "COPY envbuild/wheelhouse/ /tmp/envbuild/wheelhouse/\n" if data.wheelhouse else ""
    return _Template(_PIP_STEPS).substitute(wheelhouse=wheelhouse)


def _layer_stages(data: RenderInput) -> str:
    return "".join(_Template(_LAYER_STAGE).substitute(layer=name, what=what) for name, what in data.layers)


def _environment_copies(data: RenderInput) -> str:
    # A layer is copied from its stage's root (`/`, not the prefix): the copy then carries the
    # prefix's own directory entry as it was built, so the layer is byte-identical whenever
    # its stage was not built again, whichever layer before it changed.
    copies = [f"COPY --from=install {PREFIX} {PREFIX}\n"]
    copies += [f"COPY --from=layer-{name} {LAYER_ROOT}/ /\n" for name, _ in data.layers]
    return "".join(copies)


def final_layers(data: RenderInput) -> tuple[str, ...]:
    """What each layer the final stage adds to the base holds, in order: the distribution's
    python3 (nvidia/cuda bases), the environment (the venv, or the whole conda prefix), each
    pip layer, and envbuild's own files (probe, lockfiles)."""
    python = ("python3",) if _runtime_python(data) else ()
    return (*python, "environment", *(name for name, _ in data.layers), "envbuild")


def _runtime_python(data: RenderInput) -> str:
    # A base without its own python3 gets the distribution's in the install stage, and in the
    # final stage too when the pip environment (a venv over it) needs it at run time.
    return _RUNTIME_PYTHON if data.installer == "pip" and not data.facts.image_python else ""


def render(data: RenderInput) -> str:
    stack = data.resolution.resolved
    if not data.resolution.usable or stack is None:
        raise UserError("the spec does not resolve, so there is no stack to build",
                        hint="run `envbuild resolve` to see the conflicts and their fixes")
    base = stack.base_image
    if base is None:
        raise UserError("the resolution chose no base image", hint="set `base` or `base_image` in the spec")
    label_text = " \\\n      ".join(f"{k}={quote(v)}" for k, v in labels(data).items())
    user_env = "".join(f" \\\n    {k}={quote(v)}" for k, v in data.resolution.spec.env)
    facts = data.facts
    template = _Template(TEMPLATE.read_text(encoding="utf-8"))
    return template.substitute(
        envbuild_version=__version__,
        name=data.resolution.spec.name or "envbuild-environment",
        stack_summary=stack_summary(stack, data.image_cuda),
        base_ref=data.base_ref,
        base_why=" ".join((base.why or f"{base.family} base").split()),
        prefix=PREFIX,
        require_cuda=quote(require_cuda(stack, facts.driver_floor, data.image_cuda)),
        user_env=user_env,
        labels=label_text,
        runtime_python=_runtime_python(data),
        install_steps=_install_steps(data),
        layer_stages=_layer_stages(data),
        environment_copies=_environment_copies(data),
        family_comment=comment(facts.dockerfile_comment),
        install_python="" if facts.image_python else install_python(data.pip_wheel),
        base_check=base_check(data.installer, stack.python, base.ref, base.cuda),
    )
