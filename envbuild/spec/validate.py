"""Step 2 of reading a spec: a raw mapping -> a checked `Spec`.

Every rule here is about the request itself (shape, spelling, formats, pins that
contradict each other); whether the request can work on the target is the resolver's
business. Each problem is one `UserError` that says what is wrong, where (file:line:col
or the flag), and how to fix it. Every mistake a spec holds is reported at once (one line
each, `UserErrors`): each part of the spec, and each item of its lists, is checked on its
own, and a part that depends on another (pins against `cuda:`) only when that one is sound.
"""
from __future__ import annotations

import difflib
import re
from typing import Any, Callable
from urllib.parse import urlsplit

from packaging.requirements import InvalidRequirement, Requirement

from envbuild import frameworks
from envbuild.core import fields
from envbuild.core.memory_size import parse_gib
from envbuild.infra.errors import UserError, UserErrors, clip, shown
from envbuild.core.model import (BASE_FACTS, BASE_FAMILIES, CUSTOM_FAMILY, INSTALLERS, PLATFORMS,
                            FrameworkRequest, Spec)
from envbuild.core.package_sets import package_frozenset
from envbuild.core.values import ComputeCapability, CudaVersion, major_minor
from envbuild.core.versions import cuda_from_local, parse_constraint, parse_version
from envbuild.infra.urls import mask
from envbuild.spec.parse import RawSpec

# The spec's keys. `schema/spec.schema.json` lists the same keys (a test keeps them equal).
TOP_KEYS = (
    "name", "frameworks", "cuda", "cudnn", "python", "target", "installer", "base",
    "base_image", "channels", "packages", "env", "image", "strict", "resources",
)
NESTED_KEYS = {
    "target": ("driver", "gpus", "platform", "platforms"),
    "packages": ("conda", "pip"),
    "image": ("repository",),
    "resources": ("gpus", "gpu_memory"),
}

# The longest key or value a spec may hold (a pip requirement with a wheel URL and its hash
# is about 250). Checked before any pattern reads a value, so a 100,000-character value is
# refused at once, and no message ever has to show one whole.
MAX_VALUE_CHARS = 1024

# Names people write for a framework -> the canonical name (each plugin's `aliases`). Names
# that carry a CUDA major (cupy-cuda12x, cudf-cu12, jax-cuda12-plugin) are the plugins'
# `cuda_in_name` patterns.
FRAMEWORK_ALIASES = frameworks.aliases()
# Package names that also pin CUDA: (pattern, canonical framework, the digits name a
# major ("12" = any 12.x) or a major+minor variant ("102" = 10.2)).
_CUDA_IN_NAME = tuple((pattern, p.name, digits_are)
                      for p in frameworks.all() for pattern, digits_are in p.spelling.cuda_in_name)
# CPU-only package names: asking for them in a GPU spec is a mistake, not a request.
_CPU_ONLY = {cpu: p.name for p in frameworks.all() for cpu in p.spelling.cpu_only}

_DRIVER = r"[0-9]{2,4}\.[0-9]{1,3}(\.[0-9]{1,3})?"
# what nvidia-smi, cloud consoles and issue threads print: "Tesla K40m", "NVIDIA A100-SXM4-80GB",
# "GeForce GTX 1050 Ti with Max-Q Design", "Quadro RTX 6000/8000", "NVIDIA H100 80GB HBM3"
_GPU_NAME = r"[A-Za-z0-9][A-Za-z0-9 ._()/+-]{0,79}"
_CC = r"(?i:[0-9]{1,2}\.[0-9]|(?:sm|compute)_[0-9]{2,3}[af]?)"
_ENV_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_SPEC_NAME = r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}"
_PACKAGE_NAME = r"^[A-Za-z0-9_][A-Za-z0-9_.\-]*"
_OS_LABEL = r"[a-z]+[0-9]+(?:\.[0-9]+)?"  # as base image tags write it: ubuntu22.04, debian12, ubi9
_FLAVOURS = ("base", "runtime", "devel")
# Every pattern here is applied with re.fullmatch (\A...\Z): `$` would accept a final newline.
# Digits are [0-9]: `\d` also matches other scripts' digits (full-width ８.６), which the
# version and compute-capability parsers rightly refuse.
# They are kept as text: `re` compiles one when it is first used (and keeps it), so a spec
# that names no image or channel does not pay for those.
# A channel: a name (conda-forge, pytorch/label/nightly), a URL or a local folder. No spaces,
# quotes, `;`, `$` or backticks: it ends up in lockfiles and solver command lines.
_CHANNEL = r"[A-Za-z0-9_.~/+-]+|[A-Za-z][A-Za-z0-9+.-]*://[A-Za-z0-9_.~/:@%+=,-]+"
# A conda MatchSpec: [channel::]name[ version[ build]] and an optional [key=value,...] part.
_CONDA_SPEC = (
    r"(?:[A-Za-z0-9_.\-/:]+::)?[A-Za-z0-9_][A-Za-z0-9_.\-]*"
    r"(?:\[[A-Za-z0-9_.*=<>!,|~' -]*\])?"
    r"(?:[ =<>!~][A-Za-z0-9_.*+=<>!,|~ -]*)?"
)


# What a spec's GPU names are checked against: name -> (known, hint). The catalog lives in
# the matrices, a layer above specs, so the caller hands it in (envbuild.matrix.gpu_match.
# spec_gpu_check); without one, any readable name passes and the resolver judges it.
GpuCheck = Callable[[str], "tuple[bool, str | None]"]


def validate_raw(raw: RawSpec, gpu_check: GpuCheck | None = None) -> Spec:
    return _Validator(raw, gpu_check).spec()


def did_you_mean(word: str, choices: Any) -> str | None:
    close = difflib.get_close_matches(str(word).lower(), [str(c).lower() for c in choices], n=1, cutoff=0.6)
    if not close:
        return None
    original = {str(c).lower(): str(c) for c in choices}
    return f"did you mean {original[close[0]]!r}?"


def split_framework(text: str) -> tuple[str, str | None]:
    """`pytorch==1.7.1+cu101` -> ("pytorch", "1.7.1+cu101"); `cupy>=13` -> ("cupy", ">=13");
    `jax` -> ("jax", None). The name is returned as written."""
    match = re.match(r"^\s*([A-Za-z0-9_.\-]+(?:\[[^\]]*\])?)\s*(.*?)\s*$", text)
    if not match or not match.group(1):
        raise ValueError(f"{text!r} is not NAME or NAME==VERSION")
    name, rest = match.group(1), match.group(2)
    if not rest:
        return name, None
    if rest[0] not in "=<>!~" and not rest[0].isdigit() and rest != "*":
        raise ValueError(f"{text!r} is not NAME or NAME==VERSION")
    # `==1.7.1+cu101` and `1.7.1+cu101` mean the same; keep the shorter, file-style text.
    if rest.startswith("==") and "," not in rest and ("+" in rest or rest.endswith(".*")):
        rest = rest[2:]
    return name, rest


def canonical_framework(name: str) -> tuple[str, str | None] | None:
    """(canonical framework, CUDA implied by the name or None), or None if unknown."""
    key = re.sub(r"\[.*\]$", "", str(name)).strip().lower().replace("_", "-")
    if key in FRAMEWORK_ALIASES:
        return FRAMEWORK_ALIASES[key], None
    for pattern, framework, digits_are in _CUDA_IN_NAME:
        match = re.fullmatch(pattern, key)
        if match:
            digits = match.group(1)
            return framework, digits if digits_are == "major" else f"{int(digits[:-1])}.{digits[-1]}"
    return None


def _named_cuda(implied: dict[str, tuple[str, tuple]]) -> str | None:
    """The CUDA a framework package's own name asks for (`cupy-cuda102` -> 10.2, `cudf-cu12` ->
    any 12.x), when the spec sets no `cuda`: that package exists for that CUDA only, so a stack
    on another CUDA would install another package than the one asked for. `check_pins` has
    made sure all such names agree. A `+cu` label is not taken here: it pins a build, which
    the resolver matches itself."""
    named = [implied_cuda for what, (implied_cuda, _path) in implied.items() if "+" not in what]
    return named[0] if named else None


class _Validator:
    def __init__(self, raw: RawSpec, gpu_check: GpuCheck | None = None):
        self.raw = raw
        self.data = raw.data
        self.gpu_check = gpu_check
        self.errors: list[UserError] = []  # every mistake found so far

    def collect(self, check: Callable[[], Any], default: Any = None) -> Any:
        """`check()`, or `default` when it finds a mistake, which is kept for the report."""
        try:
            return check()
        except UserErrors as exc:
            self.errors.extend(exc.errors)
        except UserError as exc:
            self.errors.append(exc)
        return default

    # --- reading values -----------------------------------------------------------------------
    def fail(self, path: tuple, message: str, hint: str | None = None, *, key: bool = False) -> UserError:
        return UserError(message, where=self.raw.where(path, key=key) or "spec", hint=hint)

    def label(self, path: tuple) -> str:
        """How a path reads in a message: `target.gpus[1]`."""
        out = ""
        for part in path:
            out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
        return out

    def get(self, path: tuple) -> Any:
        node: Any = self.data
        for part in path:
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif isinstance(node, list) and isinstance(part, int) and part < len(node):
                node = node[part]
            else:
                return None
        return node

    def string(self, path: tuple, *, number_ok: bool = True) -> str | None:
        """A scalar as text (unquoted numbers keep their written form), None if absent."""
        value = self.get(path)
        if value is None:
            return None
        if number_ok:
            value = self.raw.text(path, value)
        if not isinstance(value, str):
            raise self.fail(path, f"{self.label(path)} must be a string, not {_kind(value)}", 'quote it: "..."')
        self.printable(path, value)
        if not value.strip():
            raise self.fail(path, f"{self.label(path)} is empty", "remove the key or give a value")
        return value.strip()

    def printable(self, path: tuple, text: str, *, key: bool = False) -> None:
        """No control or other unprintable characters: every string may end up in a
        Dockerfile, a lockfile or a command line, where a newline starts a new instruction."""
        shown = fields.control_character(text)
        if shown is not None:
            raise self.fail(path, f"{self.label(path)} holds the control character {shown}",
                            "remove it (names and values are single-line text)", key=key)

    def mapping(self, path: tuple) -> dict:
        value = self.get(path)
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise self.fail(path, f"{self.label(path)} must be a mapping, not {_kind(value)}")
        return value

    def string_list(self, path: tuple, *, single_ok: bool = False) -> list[str]:
        value = self.get(path)
        if value is None:
            return []
        if single_ok and not isinstance(value, (list, dict)):
            return [self.string(path)]
        if not isinstance(value, list):
            raise self.fail(path, f"{self.label(path)} must be a list, not {_kind(value)}", "write [a, b] or one item per line with -")
        return [self.string(path + (i,)) or "" for i in range(len(value))]

    def choice(self, path: tuple, choices: tuple[str, ...], default: str | None) -> str | None:
        value = self.string(path)
        if value is None:
            return default
        if value not in choices:
            hint = did_you_mean(value, choices) or f"one of: {', '.join(choices)}"
            raise self.fail(path, f"unknown {self.label(path).rsplit('.', 1)[-1]} {value!r}", hint)
        return value

    def check_lengths(self) -> None:
        """No key or value longer than MAX_VALUE_CHARS (see there)."""
        pending = [((), self.data)]
        while pending:
            path, node = pending.pop()
            items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
            for key, value in items:
                child = path + (key,)
                if isinstance(key, str) and len(key) > MAX_VALUE_CHARS:
                    raise self.fail(child, f"the key {shown(key)} is longer than the {MAX_VALUE_CHARS} characters "
                                           "a spec key may have", "check that this is the right file", key=True)
                text = self.raw.texts.get(child, value)
                if isinstance(text, str) and len(text) > MAX_VALUE_CHARS:
                    raise self.fail(child, f"{clip(self.label(child), 80)} is {len(text)} characters long; a spec "
                                           f"value may have {MAX_VALUE_CHARS}", "shorten it")
                if isinstance(value, (dict, list)):
                    pending.append((child, value))

    def check_is_a_spec(self) -> None:
        """Refuse a file none of whose top-level keys is a spec key or close to one (a wrong
        path, a link to another file): its text may be anything, a password file's too, so
        none of it is shown, and nothing else is said about it."""
        def from_file(key):  # a flag records no place for the keys above the one it sets
            where = self.raw.key_locations.get((key,))
            return where is not None and not where.startswith("--")

        keys = [key for key in self.data if from_file(key)]
        if keys and not any(key in TOP_KEYS or did_you_mean(key, TOP_KEYS) for key in keys):
            raise UserError("this file is not an envbuild spec: none of its top-level keys is a spec key",
                            where=self.raw.source or "spec",
                            hint=f"check the path; a spec has keys such as {', '.join(TOP_KEYS[:4])}")

    def check_keys(self, path: tuple, allowed: tuple[str, ...]) -> None:
        for key in self.mapping(path) if path else self.data:
            if key in allowed:
                continue
            hint = did_you_mean(key, allowed)
            if not path and hint is None:  # a nested key written at the top: `driver:` -> target.driver
                parent = next((p for p, keys in NESTED_KEYS.items() if key in keys), None)
                hint = f"put it under `{parent}:`" if parent else None
            where = self.label(path) + ": " if path else ""
            self.errors.append(self.fail(  # each unknown key is its own mistake
                path + (key,),
                f"unknown key {where}{key!r}",
                hint or f"known keys: {', '.join(allowed)}",
                key=True,
            ))

    def version(self, path: tuple, what: str, *, parts: tuple[int, int], example: str) -> str | None:
        text = self.string(path)
        if text is None:
            return None
        try:
            version = parse_version(text)
        except ValueError:
            version = None
        if version is None or version.local or version.epoch or version.is_prerelease or version.is_postrelease:
            raise self.fail(path, f"malformed {what} version {text!r}", f"write it like {example}")
        if not parts[0] <= len(version.release) <= parts[1]:
            raise self.fail(path, f"{what} version {text!r} needs major.minor", f"write it like {example}")
        return text

    # --- the spec ------------------------------------------------------------------------
    def spec(self) -> Spec:
        self.check_lengths()  # before any pattern reads a value, and alone: nothing else is read then
        self.check_is_a_spec()
        collect = self.collect
        collect(lambda: self.check_keys((), TOP_KEYS))
        for parent, keys in NESTED_KEYS.items():
            if collect(lambda: self.mapping((parent,)), False) is not False:
                collect(lambda: self.check_keys((parent,), keys))

        before = len(self.errors)
        frameworks, implied = collect(self.frameworks, ({}, {}))
        cuda = collect(self.cuda)
        installer = collect(lambda: self.choice(("installer",), INSTALLERS, None))
        base, base_image, base_facts = collect(self.base, ("auto", None, ()))
        read = len(self.errors) == before  # what to resolve reads well: judge it as a whole
        if read:  # pins against each other
            collect(lambda: self.check_pins(implied, cuda, installer))
        if read and cuda is None:
            cuda = _named_cuda(implied)
        values = dict(
            cudnn=collect(lambda: self.version(("cudnn",), "cuDNN", parts=(1, 4), example='"8.9"')),
            python=collect(self.python),
            platform_and_platforms=collect(self.platforms, ("linux-64", ())),
            strict=collect(self.strict, False),
            name=collect(self.name),
            driver=collect(self.driver),
            gpus=collect(self.gpus, ()),
            channels=collect(self.channels, ()),
            conda_packages=tuple(collect(lambda: self.packages("conda"), ())),
            pip_packages=tuple(collect(lambda: self.packages("pip"), ())),
            env=collect(self.env, ()),
            image_repository=collect(self.image_repository),
            resources=collect(self.resources, {}),
        )
        if read and not frameworks and cuda is None and base_image is None:
            self.errors.append(self.fail(
                (), "the spec names no framework, no cuda and no base_image: nothing to resolve",
                "add e.g. `frameworks: {pytorch: null}` or --framework pytorch",
            ))
        if self.errors:
            raise UserErrors(sorted(self.errors, key=_position)) if len(self.errors) > 1 else self.errors[0]
        platform, platforms = values.pop("platform_and_platforms")
        return Spec(
            frameworks=tuple(FrameworkRequest(n, c) for n, c in frameworks.items()),
            cuda=cuda,
            platform=platform,
            platforms=platforms,
            installer=installer,
            base=base,
            base_image=base_image,
            base_facts=base_facts,
            # a spec that names a base (`base: auto` too) or an image is about an image build
            for_image=True if any(self.get((key,)) is not None for key in ("base", "base_image", "image")) else None,
            source=self.raw.source,
            **values.pop("resources"),
            **values,
        )

    def python(self) -> str | None:
        python = self.version(("python",), "Python", parts=(2, 3), example='"3.10"')
        if python is not None and not python.startswith(("2.", "3.")):
            raise self.fail(("python",), f"unknown Python version {python!r}", 'write it like "3.10"')
        return python

    def strict(self) -> bool:
        strict = self.get(("strict",))
        if strict is not None and not isinstance(strict, bool):
            raise self.fail(("strict",), f"strict must be true or false, not {strict!r}")
        return bool(strict)

    def name(self) -> str | None:
        name = self.string(("name",))
        if name is not None and not re.fullmatch(_SPEC_NAME, name):
            raise self.fail(("name",), f"name {name!r} has characters other than letters, digits, . _ -")
        return name

    def platforms(self) -> tuple[str, tuple[str, ...]]:
        """(the platform, every platform of the lock): `target.platform` names one,
        `target.platforms` several (the first is the platform; a flag may pick another of them)."""
        path = ("target", "platforms")
        if self.get(path) is None:
            return self.choice(("target", "platform"), PLATFORMS, "linux-64") or "linux-64", ()
        names = self.string_list(path)
        if not names:
            raise self.fail(path, "target.platforms is empty", "name one platform or more, e.g. [linux-64, linux-aarch64]")
        for i, name in enumerate(names):
            if name not in PLATFORMS:
                raise self.fail(path + (i,), f"unknown platform {name!r}",
                                did_you_mean(name, PLATFORMS) or f"one of: {', '.join(PLATFORMS)}")
        chosen = tuple(names)
        if len(set(chosen)) != len(chosen):
            raise self.fail(path, f"target.platforms names a platform twice: {', '.join(chosen)}", "name each once")
        platform = self.choice(("target", "platform"), PLATFORMS, None)
        if platform is None:
            return chosen[0], chosen
        if platform not in chosen:
            raise self.fail(("target", "platform"), f"platform {platform!r} is not one of target.platforms",
                            f"pick one of {', '.join(chosen)}, or drop target.platform")
        return platform, chosen

    def resources(self) -> dict[str, Any]:
        count = self.get(("resources", "gpus"))
        if count is not None:
            count = fields.gpu_count(count, self.raw.where(("resources", "gpus")) or "spec", "resources.gpus")
        memory = self.get(("resources", "gpu_memory"))
        gib = None
        if memory is not None:
            gib = parse_gib(self.raw.text(("resources", "gpu_memory"), memory))
            if gib is None:
                raise self.fail(("resources", "gpu_memory"), f"malformed gpu_memory {memory!r}",
                                "write a size like 40GiB, 24GB or 16 (GiB)")
        return {"gpu_count": count, "gpu_memory_gib": gib}

    def frameworks(self) -> tuple[dict[str, str | None], dict[str, tuple[str, tuple]]]:
        """{canonical name: constraint text or None} and {name: (CUDA implied, path)}."""
        value = self.get(("frameworks",))
        entries: list[tuple[tuple, str, Any]] = []  # (path, name as written, constraint)
        if value is None:
            return {}, {}
        if not isinstance(value, dict):
            raise self.fail(
                ("frameworks",), f"frameworks must be a mapping of name to version, not {_kind(value)}",
                'write e.g. frameworks: {pytorch: "2.1.*", cupy: null}',
            )
        # unquoted numbers keep their written form: `tensorflow: 2.10` stays "2.10"
        entries = [(("frameworks", k), k, self.raw.text(("frameworks", k), v)) for k, v in value.items()]

        chosen: dict[str, str | None] = {}
        implied: dict[str, tuple[str, tuple]] = {}
        for entry in entries:
            self.collect(lambda: self.framework(*entry, chosen, implied))
        return chosen, implied

    def framework(self, path: tuple, written: str, constraint: Any, chosen: dict, implied: dict) -> None:
        """One entry of `frameworks:`, added to `chosen` and `implied` (see `frameworks`)."""
        self.printable(path, str(written), key=True)
        if isinstance(constraint, str):
            self.printable(path, constraint)
        known = canonical_framework(written)
        if known is None:
            lowered = str(written).lower()
            if lowered in _CPU_ONLY:
                raise self.fail(path, f"{written} is a CPU-only build", f"ask for {_CPU_ONLY[lowered]}", key=True)
            hint = did_you_mean(written, list(FRAMEWORK_ALIASES)) or f"envbuild knows {', '.join(frameworks.names())}"
            raise self.fail(path, f"unknown framework {written!r}", hint, key=True)
        name, cuda_from_name = known
        if constraint is not None:
            if not isinstance(constraint, str):
                raise self.fail(path, f"the version of {written} must be a string, not {_kind(constraint)}", 'quote it: "2.1.*"')
            constraint = constraint.strip() or None
        if constraint is not None:
            try:
                parsed = parse_constraint(constraint)
            except ValueError as exc:
                raise self.fail(path, f"{written}: {exc}", 'write e.g. "2.1.*", ">=2.1,<2.3" or "1.7.1+cu101"') from None
            if parsed.any:
                constraint = None
            elif parsed.local is not None:
                label = frameworks.read_label(parsed.local)
                if label.kind in ("cpu", "rocm"):
                    raise self.fail(
                        path, f"{written} {constraint}: +{parsed.local} is not a CUDA build",
                        "use a +cuXYZ variant (e.g. +cu121) or leave the label off",
                    )
                if label.cuda:  # an unknown label (a git hash) implies nothing: the resolver warns
                    implied[f"{written} {constraint}"] = (label.cuda, path)
        if cuda_from_name is not None:
            implied[written] = (cuda_from_name, path)
        if name in chosen and chosen[name] != constraint:
            raise self.fail(
                path, f"{name} is pinned twice: {chosen[name] or 'any'} and {constraint or 'any'}",
                "keep one pin per framework", key=True,
            )
        chosen[name] = constraint

    def check_pins(self, implied: dict, cuda: str | None, installer: str | None) -> None:
        """Pins that contradict each other before any matrix is consulted."""
        anchor = None
        if cuda:  # "12" stays a major (any 12.x); "12.1.1" and "12.1" both mean 12.1
            anchor = (f"cuda: {cuda}", cuda if "." not in cuda else major_minor(parse_version(cuda)), ("cuda",))
        for what, (implied_cuda, path) in implied.items():
            if "+" in what and installer == "conda":
                raise self.fail(
                    path, f"{what} is a pip wheel, but installer is conda",
                    "drop the +cu label (set cuda: instead) or use installer: pip",
                )
            if anchor is None:
                anchor = (what, implied_cuda, path)
                continue
            ok = _same_cuda(implied_cuda, anchor[1])
            if not ok:
                raise self.fail(
                    path, f"{what} means CUDA {implied_cuda}, but {anchor[0]} asks for CUDA {anchor[1]}",
                    "make the two CUDA versions agree", key="+" not in what,  # a package name: point at it
                )

    def cuda(self) -> str | None:
        """major (any minor of it), major.minor, or a full release; `cu121` is read as 12.1."""
        path = ("cuda",)
        text = self.string(path)
        if text is not None and re.fullmatch(r"cu[0-9]{2,4}", text, re.IGNORECASE):
            self.data["cuda"] = text = cuda_from_local(text)
        elif text is not None and re.fullmatch(r"[0-9]+\.[x*]", text):  # "12.x" / "12.*": any 12.x
            self.data["cuda"] = text = text.split(".")[0]
        return self.version(path, "CUDA", parts=(1, 4), example='"12.1", "12" (any 12.x) or "11.0.221"')

    def driver(self) -> str | None:
        path = ("target", "driver")
        text = self.string(path)
        if text is None:
            return None
        if not re.fullmatch(_DRIVER, text):
            raise self.fail(
                path, f"malformed driver version {text!r}",
                "write it as nvidia-smi prints it, e.g. 535.104.05",
            )
        return text

    def gpus(self) -> tuple[str, ...]:
        path = ("target", "gpus")
        names = self.string_list(path, single_ok=True)
        out: list[str] = []
        for i, name in enumerate(names):
            item = path + (i,) if isinstance(self.get(path), list) else path
            out.append(self.collect(lambda: self.gpu(item, name)))
        return tuple(dict.fromkeys(g for g in out if g is not None))

    def gpu(self, path: tuple, name: str) -> str:
        if re.fullmatch(_CC, name):
            cc = ComputeCapability.parse(name)
            if not 1 <= cc.major <= 20:
                raise self.fail(path, f"unknown compute capability {name!r}", "write it like 8.6")
            return str(cc)
        if not name.isascii():  # the matcher reads other letters as spaces: "A100:８" would be an A100
            raise self.fail(path, f"unreadable GPU name {shown(name)}",
                            "write it in ASCII letters and digits, e.g. A100 or 8.6")
        found, hint = self.gpu_check(name) if self.gpu_check else (False, None)
        if found:
            return name
        ambiguous = hint is not None and hint.startswith("it may be")
        if ambiguous:  # two GPUs answer to it: envbuild never guesses between them
            raise self.fail(path, f"unknown GPU {name!r}", hint)
        if re.fullmatch(_GPU_NAME, name) and re.search(r"[A-Za-z]", name):
            # A readable model name the matrix does not know: the resolver warns (unknown_fact)
            # and runs every check that does not need its compute capability.
            return name
        raise self.fail(path, f"unreadable GPU name {name!r}",
                        hint or "give the model (A100, RTX 3090) or a compute capability (8.6)")

    def base(self) -> tuple[str, str | None, tuple[tuple[str, str], ...]]:
        """`base` is a family name or (shorthand) an image reference; `base_image` an image,
        or a mapping of the image (`ref`) and what the user states about it (BASE_FACTS)."""
        family = self.string(("base",))
        image, facts = self.base_image()
        if family is None:
            return "auto", image, facts
        if family in BASE_FAMILIES:
            return family, image, facts
        if ":" in family or "/" in family or "@" in family:
            ref = self.image_ref(("base",), family, tag=True)
            if image is not None and image != ref:
                raise self.fail(("base",), f"base {ref!r} and base_image {image!r} name different images", "keep one")
            return "auto", ref, facts
        hint = did_you_mean(family, BASE_FAMILIES) or f"one of: {', '.join(BASE_FAMILIES)}, or an IMAGE:TAG"
        raise self.fail(("base",), f"unknown base {family!r}", hint)

    def base_image(self) -> tuple[str | None, tuple[tuple[str, str], ...]]:
        path = ("base_image",)
        if not isinstance(self.get(path), dict):
            image = self.string(path)
            return (None if image is None else self.image_ref(path, image, tag=True)), ()
        self.check_keys(path, ("ref", *BASE_FACTS))
        ref = self.string(path + ("ref",))
        if ref is None:
            raise self.fail(path, "base_image has no ref", "write base_image: {ref: IMAGE:TAG, cuda: ..., python: ...}")
        ref = self.image_ref(path + ("ref",), ref, tag=True)
        facts = []
        for key in BASE_FACTS:
            value = self.string(path + (key,))
            if value is not None:
                facts.append((key, self.base_fact(path + (key,), key, value)))
        return ref, tuple(facts)

    def base_fact(self, path: tuple, key: str, value: str) -> str:
        """One stated fact about a base image, in the form the catalog writes it."""
        if key == "family":
            families = (*BASE_FAMILIES[1:], CUSTOM_FAMILY)
            if value not in families:
                raise self.fail(path, f"unknown base family {value!r}",
                                did_you_mean(value, families) or f"one of: {', '.join(families)}")
            return value
        if key == "cuda":
            text = self.version(path, "CUDA", parts=(2, 3), example='"12.4" or "12.4.1"') or value
            try:
                CudaVersion.parse(text)  # what the checks will compare it as
            except ValueError as exc:
                raise self.fail(path, str(exc), 'write it like "12.4" or "12.4.1"') from None
            return text
        if key == "cudnn":
            return self.version(path, "cuDNN", parts=(1, 4), example='"9" or "8.9.7"') or value
        if key == "python":
            return self.version(path, "Python", parts=(2, 3), example='"3.11"') or value
        if key == "flavour":
            if value not in _FLAVOURS:
                raise self.fail(path, f"unknown flavour {value!r}", f"one of: {', '.join(_FLAVOURS)}")
            return value
        if key == "os":
            if not re.fullmatch(_OS_LABEL, value):
                raise self.fail(path, f"malformed OS {value!r}", "write it as base image tags do, e.g. ubuntu22.04 or debian12")
            return value
        try:  # framework: NAME==VERSION
            name, version = split_framework(value)
        except ValueError:
            name, version = value, None
        known = canonical_framework(name)
        if known is None or not version or not re.fullmatch(r"[0-9]+(\.[0-9]+)*", version.lstrip("=")):
            raise self.fail(path, f"malformed framework {value!r}", f"write NAME==VERSION, e.g. pytorch==2.8.0 "
                            f"(frameworks: {', '.join(frameworks.names())})")
        return f"{known[0]}=={version.lstrip('=')}"

    def image_ref(self, path: tuple, text: str, *, tag: bool) -> str:
        return fields.image_ref(text, self.raw.where(path) or "spec", tag=tag)

    def image_repository(self) -> str | None:
        path = ("image", "repository")
        text = self.string(path)
        return None if text is None else self.image_ref(path, text, tag=False)

    def channels(self) -> tuple[str, ...]:
        path = ("channels",)
        out = []
        for i, channel in enumerate(self.string_list(path)):
            if not re.fullmatch(_CHANNEL, channel):
                self.errors.append(self.fail(path + (i,), f"malformed channel {channel!r}", "give a channel name "
                                             "(conda-forge), a URL or a folder path, without spaces or quotes"))
            out.append(channel)
        return tuple(out)

    def packages(self, kind: str) -> list[str]:
        path = ("packages", kind)
        items = self.string_list(path)
        for i, item in enumerate(items):
            self.collect(lambda: self.package(kind, path + (i,), item))
        return items

    def package(self, kind: str, where: tuple, item: str) -> None:
        """One item of `packages.conda` or `packages.pip`."""
        match = re.match(_PACKAGE_NAME, item)
        name = match.group(0).lower() if match else ""
        if not name:
            raise self.fail(where, f"malformed {kind} package {item!r}", "write NAME or NAME==VERSION")
        framework = canonical_framework(name)
        if framework:
            raise self.fail(
                where, f"{name} is a framework; envbuild checks it only under frameworks:",
                f"move it to frameworks: {{{framework[0]}: ...}}",
            )
        # conda packages that choose the CUDA variant: the spec sets that with `cuda:` instead
        if kind == "conda" and name in package_frozenset("spec_cuda_choice"):
            raise self.fail(where, f"{name} chooses the CUDA variant", "set cuda: instead and envbuild pins it")
        if kind == "conda" and not re.fullmatch(_CONDA_SPEC, item):
            raise self.fail(where, f"malformed conda package {item!r}",
                            "write a conda MatchSpec, e.g. numpy, numpy>=1.26 or conda-forge::numpy=1.26")
        if kind == "pip":
            _check_pip_requirement(item, lambda msg: self.fail(where, msg, "write a PEP 508 requirement, e.g. einops==0.7.0"))

    def env(self) -> tuple[tuple[str, str], ...]:
        out = {}
        for key, value in self.mapping(("env",)).items():
            text = self.collect(lambda: self.env_value(key, value))
            if text is not None:
                out[key] = text
        return tuple(sorted(out.items()))

    def env_value(self, key: str, value: Any) -> str:
        """One variable of `env:`, as the image will hold it."""
        path = ("env", key)
        self.printable(path, key, key=True)
        if not re.fullmatch(_ENV_NAME, key):
            raise self.fail(path, f"env name {key!r} is not a valid variable name", "use letters, digits and _", key=True)
        if isinstance(value, (dict, list)) or value is None:
            raise self.fail(path, f"env.{key} must be a string, not {_kind(value)}", 'quote it: "..."')
        # As written: `N: 4` is "4", `DEBUG: yes` is "yes" (not YAML's True).
        text = self.raw.texts.get(path)
        if text is None:
            text = ("true" if value else "false") if isinstance(value, bool) else str(value)
        self.printable(path, text)
        return text


def _position(error: UserError) -> tuple:
    """Where a mistake is, for ordering the report: a file's in reading order (FILE:LINE:COL),
    then those of flags and variables, as found."""
    match = re.search(r":(\d+):(\d+)$", error.where or "")
    return (0, int(match[1]), int(match[2])) if match else (1, 0, 0)


_INDEX_URL = r"(?:https?://[A-Za-z0-9.\-\[\]:]+(?:@[A-Za-z0-9.\-\[\]:]+)?|file://)[A-Za-z0-9_.~/:@%+=,&?!*()-]*"


def check_index_url(text: str, where: str) -> str:
    """A pip index URL as the lock and pip's command line take it: http(s) or file, one line,
    no spaces or quotes (credentials, if any, are masked in every message and file)."""
    ok = len(text) <= MAX_VALUE_CHARS and re.fullmatch(_INDEX_URL, text) is not None
    if ok:
        try:
            parts = urlsplit(text)
            ok = parts.scheme == "file" or bool(parts.hostname) and _dns_name_fits(parts.hostname)
        except ValueError:
            ok = False
    if not ok:
        raise UserError(f"malformed index URL {shown(mask(text))}", where=where,
                        hint="write e.g. https://pypi.org/simple; put credentials in ~/.netrc or keyring, not in the URL")
    return text


def _dns_name_fits(host: str) -> bool:
    """DNS's limits (253 characters, 63 per label), which HTTP clients enforce by raising."""
    if ":" in host:  # an IPv6 address
        return True
    return len(host) <= 253 and all(0 < len(label) <= 63 for label in host.rstrip(".").split("."))


def _same_cuda(a: str, b: str) -> bool:
    """`12` (a major) agrees with any 12.x; otherwise major.minor must be equal."""
    a_parts, b_parts = a.split("."), b.split(".")
    n = min(len(a_parts), len(b_parts), 2)
    return [int(p) for p in a_parts[:n]] == [int(p) for p in b_parts[:n]]


def _check_pip_requirement(text: str, fail: Callable[[str], UserError]) -> None:
    try:
        Requirement(text)
    except InvalidRequirement as exc:
        raise fail(f"malformed pip requirement {text!r}: {str(exc).splitlines()[0]}") from None


_kind = fields.kind_of  # "a number", "a list", ... in messages
