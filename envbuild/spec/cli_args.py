"""The spec on the command line: the same request as a spec file, as flags.

These flags are a stable contract (scripts and CI depend on them); `resolve`, `lock`,
`dockerfile` and `image` all take them. Given together with a spec file, a flag
replaces the file's value: `--framework pytorch==X` replaces only pytorch, `--gpu`
replaces the whole GPU list.

Without a SPEC argument, the spec is `./envbuild.yaml` (or `./envbuild.yml`) when there
is one, as `envbuild init` writes it; the file used is named on stderr.

The common request flags can also come from the environment (ENVIRONMENT below), for CI
jobs and shells that always target one machine. A flag beats the environment, which
beats the spec file; a bad value is refused at the door like a bad flag, naming the
variable.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
from pathlib import Path
from typing import Any, Callable, Mapping

from envbuild.core.model import BASE_FACTS, BASE_FAMILIES, INSTALLERS, PLATFORMS, Spec
from envbuild.infra.errors import UserError, clip, shown
from envbuild.output import say
from envbuild.spec.parse import RawSpec, read_spec_file
from envbuild.spec.validate import GpuCheck, canonical_framework, split_framework, validate_raw

COMMAND_LINE = "command line"
SPEC_NAMES = ("envbuild.yaml", "envbuild.yml")  # found in the current folder when no SPEC is given

# ENVBUILD_* variable -> the spec key it sets (the flag of the same name sets it too)
ENVIRONMENT = {
    "ENVBUILD_CUDA": ("cuda",),
    "ENVBUILD_CUDNN": ("cudnn",),
    "ENVBUILD_PYTHON": ("python",),
    "ENVBUILD_INSTALLER": ("installer",),
    "ENVBUILD_DRIVER": ("target", "driver"),
    "ENVBUILD_PLATFORM": ("target", "platform"),
    "ENVBUILD_GPU": ("target", "gpus"),  # comma-separated, like repeated --gpu
    "ENVBUILD_STRICT": ("strict",),  # 1/true/yes or 0/false/no
}
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def add_judged_for_argument(parser: argparse.ArgumentParser) -> None:
    """--for host|image, for the commands that judge a stack without building an image."""
    parser.add_argument(
        "--for", dest="judged_for", choices=("host", "image"),
        help="judge the stack as it runs on a host (the default unless the spec names base, base_image or "
             "image) or as an image build (the base's python3, the in-image installer)")


def add_spec_arguments(parser: argparse.ArgumentParser, *, multi_platform: bool = False) -> None:
    """The request flags every command shares. With `multi_platform`, --platform is
    repeatable (lock covers several platforms; the first one is the spec's)."""
    parser.add_argument("spec", nargs="?", metavar="SPEC.yaml",
                        help="spec file (default: ./envbuild.yaml or ./envbuild.yml when there is one; "
                             "flags alone can form the request)")
    group = parser.add_argument_group("request (each flag overrides the spec file)")
    group.add_argument(
        "--framework", action="append", default=[], metavar="NAME[==VERSION]",
        help="framework and version constraint, repeatable: pytorch==2.1.2, pytorch==1.7.1+cu101, "
        "'tensorflow>=2.15,<2.17', jax (any version)",
    )
    group.add_argument("--cuda", metavar="X.Y", help="CUDA toolkit / wheel variant, e.g. 12.1 or 11.0.221")
    group.add_argument("--cudnn", metavar="X.Y", help="cuDNN version, e.g. 8.9")
    group.add_argument("--driver", metavar="VERSION", help="target host driver as nvidia-smi prints it, e.g. 535.104.05")
    group.add_argument(
        "--gpu", action="append", default=[], metavar="GPU",
        help="target GPU, repeatable: model name (A100-80GB, 'RTX 3090', L4) or compute capability (8.6)",
    )
    group.add_argument("--python", metavar="X.Y", help="Python version, e.g. 3.10")
    group.add_argument("--installer", metavar="|".join(INSTALLERS), help="install frameworks with conda or pip")
    if multi_platform:
        group.add_argument(
            "--platform", action="append", metavar="PLATFORM",
            help="target platform, repeatable: --platform linux-64 --platform linux-aarch64",
        )
    else:
        group.add_argument(
            "--platform", metavar="PLATFORM",
            help=f"target platform: {', '.join(PLATFORMS)} (the last three for checking only)",
        )
    group.add_argument(
        "--base", metavar="IMAGE:TAG|FAMILY",
        help=f"explicit base image, or a base family: {', '.join(BASE_FAMILIES)}",
    )
    group.add_argument(
        "--base-fact", action="append", default=[], metavar="FACT=VALUE",
        help=f"what the base image (--base IMAGE:TAG or the spec's base_image) carries, repeatable: "
             f"{', '.join(BASE_FACTS)} (cuda=12.4, python=3.11); stated facts win over what envbuild reads from the image",
    )
    group.add_argument("--strict", action="store_true", default=None, help="refuse (not just warn) when the matrices have no row to decide on")
    group.add_argument(
        "--host", action="store_true",
        help="target this machine: take the driver and GPUs from it (explicit --driver/--gpu win)",
    )


# This machine's driver and the GPUs as a spec names them, for --host. Reading the host and
# naming its GPUs belong to layers above specs, so the caller hands the reader in
# (envbuild.commands._spec.host_target).
HostReader = Callable[[], "tuple[str | None, list[str]]"]


def spec_from_args(args: argparse.Namespace, *, gpu_check: GpuCheck | None = None,
                   host: HostReader | None = None, environ: Mapping[str, str] | None = None) -> Spec:
    """The spec file (given, else found here, if any) with the environment's values and
    then the flags laid over it, validated; `--for` says whether it is judged for a host or
    an image build."""
    path = getattr(args, "spec", None)
    if path is None:
        path = args.spec = discover_spec()
    raw = read_spec_file(path) if path else RawSpec(data={}, locations={(): COMMAND_LINE})
    overlay_environment(raw, os.environ if environ is None else environ)
    overlay_args(raw, args, host)
    spec = validate_raw(raw, gpu_check)
    judged = getattr(args, "judged_for", None)
    if judged is not None:
        spec = dataclasses.replace(spec, for_image=judged == "image")
    return spec


def discover_spec(folder: Path = Path(".")) -> str | None:
    """`envbuild.yaml` or `envbuild.yml` in `folder`, named on stderr; None when neither is there."""
    found = [name for name in SPEC_NAMES if os.path.lexists(folder / name)]
    if len(found) > 1:
        raise UserError(f"both {' and '.join(found)} are here: envbuild does not guess which is the spec",
                        where=str(folder), hint=f"name one (`envbuild resolve {found[0]}`) or remove the other")
    if not found:
        return None
    path = str(folder / found[0])
    say.note(f"using spec {path if folder != Path('.') else './' + path} (found in this folder)")
    return path


def overlay_environment(raw: Any, environ: Mapping[str, str]) -> None:
    """Lay the ENVBUILD_* values (ENVIRONMENT) over a `RawSpec` in place; each value
    remembers its variable, so a bad one is reported as `ENVBUILD_DRIVER: ...`. An empty
    variable counts as unset."""
    for name, path in ENVIRONMENT.items():
        value = environ.get(name, "").strip()
        if not value:
            continue
        say.detail(f"{name}={value} (from the environment; a flag would win)")
        if name == "ENVBUILD_GPU":
            _set_gpus(raw, [gpu.strip() for gpu in value.split(",")], name)
        elif name == "ENVBUILD_STRICT":
            raw.set(path, _boolean(value, name), name)
        elif name == "ENVBUILD_PLATFORM":
            _overlay_platform(raw, value, name)
        else:
            raw.set(path, value, name)


def _boolean(text: str, name: str) -> bool:
    if text.lower() in _TRUE + _FALSE:
        return text.lower() in _TRUE
    raise UserError(f"{text!r} is not a yes or no", where=name, hint="set it to 1, true or yes, or to 0, false or no")


def overlay_args(raw: Any, args: argparse.Namespace, host: HostReader | None = None) -> None:
    """Lay the flags over a `RawSpec` in place; each value remembers the flag it came from."""
    for text in getattr(args, "framework", None) or []:
        where = f"--framework {clip(text)}"
        try:
            name, constraint = split_framework(text)
        except ValueError as exc:
            raise UserError(str(exc), where="--framework", hint="write NAME or NAME==VERSION, e.g. pytorch==2.1.2") from None
        frameworks = raw.data.get("frameworks")
        if not isinstance(frameworks, dict):
            frameworks = raw.data["frameworks"] = {}
        # The flag replaces the file's entry for the same framework (under any alias) in
        # place; two flags for one framework stay side by side for the validator to judge.
        canonical = canonical_framework(name)
        for old in frameworks:
            same = old == name or (canonical and canonical_framework(old) == canonical)
            if same and _from_flag(raw, old) and frameworks[old] != constraint:
                raise UserError(
                    f"{(canonical or (name,))[0]} is pinned twice: {frameworks[old] or 'any'} and {constraint or 'any'}",
                    where=where, hint="keep one --framework per framework",
                )
        replaced = [
            old for old in frameworks
            if old == name or (canonical and canonical_framework(old) == canonical and not _from_flag(raw, old))
        ]
        if replaced:
            items = list(frameworks.items())
            at = next(i for i, (k, _) in enumerate(items) if k == replaced[0])
            items[at] = (name, constraint)
            frameworks.clear()
            frameworks.update((k, v) for k, v in items if k not in replaced or k == name)
        raw.set(("frameworks", name), constraint, where)

    for flag, path in (("cuda", ("cuda",)), ("cudnn", ("cudnn",)), ("python", ("python",)),
                       ("installer", ("installer",)), ("driver", ("target", "driver"))):
        value = getattr(args, flag, None)
        if value is not None:
            raw.set(path, value, f"--{flag}")
    _overlay_platform(raw, getattr(args, "platform", None), "--platform")

    if getattr(args, "host", False):
        _overlay_host(raw, args, host)

    gpus = getattr(args, "gpu", None) or []
    if gpus:
        _set_gpus(raw, gpus, "--gpu")

    base = getattr(args, "base", None)
    if base is not None:
        # a family name chooses the family; anything else is an explicit image
        if base in BASE_FAMILIES:
            raw.set(("base",), base, "--base")
            raw.data.pop("base_image", None)
        else:
            raw.set(("base_image",), base, "--base")
            raw.data.pop("base", None)
    for text in getattr(args, "base_fact", None) or []:
        _set_base_fact(raw, text)
    if getattr(args, "strict", None):
        raw.set(("strict",), True, "--strict")


def _overlay_platform(raw: Any, value: "str | list[str] | None", where: str) -> None:
    """--platform: one platform picks it (among the spec's target.platforms, which then stay
    the lock's platforms, or instead of them); `lock`'s repeated --platform replaces both."""
    names = [value] if isinstance(value, str) else list(value or ())
    if not names:
        return
    target = raw.data.get("target")
    listed = target.get("platforms") if isinstance(target, dict) else None
    if len(names) > 1:
        raw.set(("target", "platforms"), names, where)
        for i, name in enumerate(names):
            raw.locations[("target", "platforms", i)] = f"{where} {name}"
        target = raw.data["target"]
        target.pop("platform", None)
        return
    if isinstance(listed, list) and names[0] not in listed:
        target.pop("platforms", None)
    raw.set(("target", "platform"), names[0], where)


def _set_base_fact(raw: Any, text: str) -> None:
    """--base-fact cuda=12.4: the same as `cuda: "12.4"` under the spec's `base_image` mapping."""
    where = f"--base-fact {text}"
    key, sep, value = text.partition("=")
    key = key.strip()
    if not sep or key not in BASE_FACTS:
        raise UserError(f"{text!r} is not FACT=VALUE with a known fact", where="--base-fact",
                        hint=f"facts: {', '.join(BASE_FACTS)}, e.g. --base-fact cuda=12.4")
    image = raw.data.get("base_image")
    shorthand = raw.data.get("base")
    if not image and isinstance(shorthand, str) and shorthand not in BASE_FAMILIES:  # `base: IMAGE:TAG`
        image = raw.data["base_image"] = raw.data.pop("base")
        raw.locations[("base_image",)] = raw.locations.get(("base",), where)
    if not image:
        raise UserError("--base-fact states facts about a base image, and none is named", where=where,
                        hint="name it with --base IMAGE:TAG (or base_image: in the spec)")
    if not isinstance(image, dict):  # the shorthand `base_image: IMAGE:TAG` becomes the mapping form
        at = raw.locations.get(("base_image",), where)
        raw.data["base_image"] = {"ref": image}
        raw.locations[("base_image", "ref")] = at
    raw.set(("base_image", key), value.strip(), where)


def _from_flag(raw: Any, key: str) -> bool:
    return str(raw.locations.get(("frameworks", key), "")).startswith("--framework")


def _set_gpus(raw: Any, gpus: list[str], flag: str) -> None:
    raw.set(("target", "gpus"), list(gpus), flag)
    for i, gpu in enumerate(gpus):
        raw.locations[("target", "gpus", i)] = f"{flag} {shown(gpu)}"


def _overlay_host(raw: Any, args: argparse.Namespace, host: HostReader | None) -> None:
    """--host: the driver and GPUs of this machine, unless --driver/--gpu name them."""
    if host is None:
        raise UserError("--host is not available here", where="--host", hint="pass --driver and --gpu instead")
    driver, gpus = host()
    if driver and getattr(args, "driver", None) is None:
        raw.set(("target", "driver"), str(driver), "--host")
    if gpus and not getattr(args, "gpu", None):
        _set_gpus(raw, gpus, "--host")
