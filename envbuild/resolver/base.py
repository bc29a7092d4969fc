"""The base image: chosen from the catalog (`matrices/base_images.yaml`), or the user's
explicit one checked against it.

Rules: the image's CUDA must serve the framework builds (the same major.minor for a
framework image or a build that loads the system CUDA before 11.0; the same major from
11.0 on, where sonames are shared); the NVIDIA container toolkit refuses an image whose
CUDA is newer than the host driver supports natively (NVIDIA_REQUIRE_CUDA); and the
smallest flavour that works is taken: runtime, or devel when something compiles CUDA
code (nvcc, or CuPy's NVRTC on CUDA >= 12.2, which needs the toolkit headers).

Python: the image must run the Python the environment is locked for. A pip environment
is a venv over the image's python3 (for nvidia/cuda, the distribution's python3 the
Dockerfile installs), so that python3 must be the locked Python; a conda prefix brings
its own interpreter. A framework image's Python is its framework's, whatever the installer.

Installer: the image build runs envbuild's installer with the image's own python3, so
that python3 must be one the installer runs on in this mode (`installer_python` in
matrices/base_images.yaml: py-rattler for conda needs 3.10). Bases with an older python3
are passed over (the same CUDA on a newer OS release is taken where the catalog has one).
"""
from __future__ import annotations

import dataclasses

from envbuild import frameworks
from envbuild.core import specifiers
from envbuild.core.model import CUSTOM_FAMILY, BaseImageChoice
from envbuild.core.package_sets import package_frozenset
from envbuild.core.values import ConflictKind, CudaVersion, major_minor
from envbuild.core.versions import parse_version
from envbuild.frameworks.build import Build
from envbuild.matrix import tables as t
from envbuild.matrix.lookup import installer_python_min, installer_runs_on
from envbuild.resolver.context import ImageCuda, Index, fact
from envbuild.resolver.named_base import catalog_image
from envbuild.resolver.problem import NO_HINTS, Hints, Problem, unknown
from envbuild.resolver.request import Request

_FAMILY_NAMES = {"cuda": "nvidia/cuda"}
_FLAVOUR_RANK = {"runtime": 0, "devel": 1, None: 2, "base": 3}


def _pkg_name(text: str) -> str:
    return "".join(ch for ch in text.split("=")[0].split("<")[0].split(">")[0].split("[")[0] if not ch.isspace()).lower()


def needs_devel(req: Request, builds: list[Build], cuda: CudaVersion | None) -> str | None:
    """Why the image must be a devel flavour, or None."""
    for pkg in (*req.spec.conda_packages, *req.spec.pip_packages):
        # packages that build CUDA code at install or run time need nvcc (a devel image)
        if _pkg_name(pkg) in package_frozenset("needs_compiler"):
            return f"{_pkg_name(pkg)} compiles CUDA code, so the image needs nvcc (devel)"
    for b in builds if cuda else ():
        why = frameworks.get(b.framework).install.needs_devel(cuda)
        if why:
            return why
    return None


def _carries(family: str, b: Build) -> bool:
    """Is `family` (a framework's own base family, or AWS's dlc) built around `b`'s framework?"""
    plugin = frameworks.get(b.framework)
    return plugin.install.in_dlc if family == "dlc" else plugin.install.base_family == family


def _serves(img_cuda: ImageCuda, b: Build) -> bool:
    """Can an image with CUDA `img_cuda` host build `b`?"""
    if b.bundles_runtime:
        return img_cuda.major == b.cuda_major
    if b.cuda_major < 11:
        return img_cuda.minor == b.cuda
    return img_cuda.major == b.cuda_major


def find_image(ix: Index, ref: str) -> t.BaseImage | None:
    """The row of the image `ref` names: the one made for the spec's own base
    (`named_base`), else the catalog's, also under a mirror path."""
    named = ix.m.named_base
    if named is not None and named.ref == ref:
        return named
    return catalog_image(ix.m.base_images, ref)


def family_filter(req: Request, ix: Index):
    """For a framework base family, a per-build check that the family has an image
    carrying exactly that build (so completion picks one that exists)."""
    family = req.spec.base
    if req.spec.base_image or family not in {p.install.base_family for p in frameworks.all() if p.install.base_family} | {"dlc"}:
        return None

    def check(b: Build) -> list[Problem]:
        if not _carries(family, b):
            return []
        for img, cuda in ix.images:
            if img.family == family and (img.framework or "").lower() == b.framework and cuda is not None \
                    and _same_version(img.framework_version, b.version) and cuda.fits(b.cuda) \
                    and req.platform in img.platforms:
                return []
        return [Problem(ConflictKind.BASE_IMAGE_CUDA_MISMATCH,
                        f"the {family} image family has no image with {b.framework} {b.version} on CUDA {b.cuda}, "
                        f"so the {b.framework} version or the base family must move", framework=b.framework)]
    return check


def _same_version(image_version: str | None, version: str) -> bool:
    if not image_version:
        return False
    a, b = parse_version(image_version).release, parse_version(version).release
    n = min(len(a), len(b))
    return a[:n] == b[:n]


def carries_resolved_build(m, base: BaseImageChoice, framework, row: t.BaseCarries) -> bool:
    """Does the catalog image `base` carry exactly the resolved `framework` build (the same
    release and CUDA), for a release its family's `base_carries` record covers?"""
    img = catalog_image(m.base_images, base.ref)
    img_cuda = ImageCuda.read(img.cuda) if img is not None else None
    if img_cuda is None or (img.framework or "").lower() != framework.name or not framework.cuda:
        return False
    return (_same_version(img.framework_version, framework.version) and img_cuda.fits(CudaVersion.parse(framework.cuda))
            and specifiers.admits(row.releases, framework.version, True))


def binds_python(img: t.BaseImage | BaseImageChoice, installer: str) -> bool:
    """Is the image's own Python the one the environment runs? Yes for a framework image
    (its framework lives in that Python) and for a pip venv over an OS-only base's
    python3; no for a conda prefix on an OS-only base or an image outside the catalog,
    which brings its own interpreter."""
    return img.family not in ("cuda", CUSTOM_FAMILY) or installer == "pip"


def _pythons_allowed(req: Request, builds: list[Build]) -> frozenset[str] | None:
    """The Pythons the environment may run: the pinned one, else those every build
    supports (None = any)."""
    if req.python:
        return frozenset((req.python,))
    known = [p for b in builds if (p := b.pythons_on(req.platform)) is not None]  # wheels where read
    return frozenset.intersection(*map(frozenset, known)) if known else None


def _python_fact(ix: Index, img: t.BaseImage):
    row = next((r for r in ix.m.distribution_pythons if img.python_source and r.source == img.python_source), None)
    if row is not None:
        return fact(f"{row.os} installs {row.package or 'python3 ' + row.python} as python3", row)
    return fact(f"{img.ref}: Python {img.python}", img)


def _no_python_match(req: Request, ix: Index, family: str, cuda: CudaVersion | None, skipped: list[t.BaseImage],
                     builds: list[Build]) -> Problem:
    """A pip environment whose Python no otherwise fitting image runs."""
    have = {}
    for img in skipped:
        have.setdefault(img.os or img.ref, img)
    listed = ", ".join(f"{name}: {img.python}" for name, img in have.items())
    wanted = f"Python {req.python}" if req.python else "a Python the frameworks support"
    where = f" with CUDA {cuda}" if cuda else ""
    offered = {major_minor(parse_version(img.python)) for img in skipped if img.python}
    every = sorted(offered, key=parse_version, reverse=True)
    supported = _pythons_allowed(dataclasses.replace(req, python=None), builds)
    if supported is not None:
        offered &= supported  # only Pythons the frameworks have builds for are worth a fix
    pythons = sorted(offered, key=parse_version, reverse=True)
    return Problem(
        ConflictKind.PYTHON_UNSUPPORTED,
        f"a pip environment is a venv over the base image's python3, and no {_FAMILY_NAMES.get(family, family)} "
        f"image{where} runs {wanted} ({listed}), so Python, the installer (a conda environment brings its own "
        f"Python) or the base image must move",
        tuple(dict.fromkeys(_python_fact(ix, img) for img in have.values())),
        hints=Hints(pythons=pythons, installer="conda", base_pythons=every))


def _installer_floor_fact(ix: Index, installer: str):
    row = installer_python_min(ix.m, installer)
    return fact(f"envbuild's {installer} installer runs on python3 >= {row.python_min}", row)


def _installer_cannot_run(req: Request, ix: Index, family: str, cuda: CudaVersion | None, skipped: list[t.BaseImage],
                          builds: list[Build], installer: str) -> Problem:
    """Every otherwise fitting image has a python3 too old for the in-image installer."""
    have = {}
    for img in skipped:
        have.setdefault(img.os or img.ref, img)
    listed = ", ".join(f"{name}: {img.python}" for name, img in have.items())
    floor = installer_python_min(ix.m, installer).python_min
    other = "pip" if installer == "conda" else "conda"
    hints = NO_HINTS
    if any(installer_runs_on(ix.m, other, img.python) for img in skipped):
        hints = Hints(installer=other)  # the other mode's installer runs on one of them
    where = f" with CUDA {cuda}" if cuda else ""
    blamed = next((b for b in builds if not b.bundles_runtime and b.cuda_major < 11), builds[0] if builds else None)
    return Problem(
        ConflictKind.PYTHON_UNSUPPORTED,
        f"the image build runs envbuild's {installer} installer with the base image's python3, which must be "
        f"{floor} or newer, and every {_FAMILY_NAMES.get(family, family)} image{where} that fits has an older one "
        f"({listed}), so the CUDA, the framework version or the installer must move",
        (_installer_floor_fact(ix, installer), *dict.fromkeys(_python_fact(ix, img) for img in have.values())),
        framework=blamed.framework if blamed else None, hints=hints)


def choose(req: Request, ix: Index, builds: list[Build], cuda: CudaVersion | None, python: str | None,
           installer: str) -> tuple[BaseImageChoice | None, list[Problem]]:
    """The base image for `builds`, or the problems that leave none. Memoised on what it
    reads: the targets of a fleet mostly end on the same builds."""
    spec = req.spec
    key = (req.platform, spec.base_image, spec.base, spec.conda_packages, spec.pip_packages,
           req.python, req.driver, tuple(builds), cuda, python, installer)
    found = ix.memo.base_images.get(key)
    if found is None:
        found = ix.memo.base_images[key] = _choose(req, ix, builds, cuda, python, installer)
    image, problems = found
    return image, list(problems)


def _choose(req: Request, ix: Index, builds: list[Build], cuda: CudaVersion | None, python: str | None,
            installer: str) -> tuple[BaseImageChoice | None, list[Problem]]:
    if req.platform not in ("linux-64", "linux-aarch64"):
        return None, []
    if req.spec.base_image:
        return _explicit(req, ix, builds, cuda, installer)
    allowed = _pythons_allowed(req, builds)
    python_skipped: list[t.BaseImage] = []
    floor_skipped: list[t.BaseImage] = []
    family = "cuda" if req.spec.base == "auto" else req.spec.base
    devel_why = needs_devel(req, builds, cuda)
    native = ix.driver_cuda(req.driver, req.platform).native_cuda if req.driver else None
    carrier = next((b for b in builds if _carries(family, b)), None)
    runs_installer: dict[str | None, bool] = {}  # image python -> installer_runs_on
    options = []
    for img, img_cuda, (cuda_mm, rank_tail) in _family_images(ix, family, req.platform):
        if devel_why and img.flavour not in ("devel", None):
            continue
        if img.flavour == "base" and builds:
            continue  # only cudart: frameworks need cuBLAS/cuFFT/cuDNN
        if native is not None and cuda_mm > native:
            continue  # the container toolkit would refuse it on this driver
        if carrier is not None:
            if (img.framework or "").lower() != carrier.framework or not _same_version(img.framework_version, carrier.version) \
                    or not img_cuda.fits(carrier.cuda):
                continue
            if img.python and major_minor(parse_version(img.python)) != python and (
                    req.python or carrier.pythons_on(req.platform) is None
                    or major_minor(parse_version(img.python)) not in carrier.pythons_on(req.platform)):
                continue  # the image's Python is the environment's: it must be one the build supports
        elif img.framework:
            continue
        if not all(_serves(img_cuda, b) for b in builds):
            continue
        if cuda and not builds and img_cuda.minor != cuda.minor_version:
            continue
        runs = runs_installer.get(img.python)
        if runs is None:
            runs = runs_installer[img.python] = installer_runs_on(ix.m, installer, img.python)
        if not runs:
            floor_skipped.append(img)  # the build could not run the installer on its python3
            continue
        if carrier is None and binds_python(img, installer) and img.python and allowed is not None \
                and major_minor(parse_version(img.python)) not in allowed:
            python_skipped.append(img)  # the venv would run another Python than the lock's
            continue
        exact = cuda is not None and img_cuda.fits(cuda)
        options.append(((not exact, _FLAVOUR_RANK.get(img.flavour, 2), *rank_tail), img, img_cuda))
    if not options and python_skipped:
        return None, [_no_python_match(req, ix, family, cuda, python_skipped, builds)]
    if not options and floor_skipped:
        return None, [_installer_cannot_run(req, ix, family, cuda, floor_skipped, builds, installer)]
    if not options:
        where = f" with CUDA {cuda}" if cuda else ""
        limit = f" that driver {req.driver} can start (CUDA <= {native})" if native else ""
        if family == "cuda":
            return None, [unknown(f"the base image catalog has no {family} image{where}{limit}; set base_image to "
                                  f"one you trust", ("base_image",))]
        return None, [Problem(ConflictKind.BASE_IMAGE_CUDA_MISMATCH,
                              f"the {family} image family in the catalog has no image{where}{limit} for "
                              f"{', '.join(b.framework + ' ' + b.version for b in builds)}, so the base family "
                              f"or the framework version must move")]
    options.sort(key=lambda o: o[0])
    _rank, img, img_cuda = options[0]
    if devel_why:
        flavour_why = devel_why
    elif img.flavour == "runtime":
        flavour_why = "runtime: the smallest flavour with the CUDA libraries the frameworks load"
    elif img.flavour:
        flavour_why = f"{img.flavour}: the smallest flavour the catalog has for this CUDA"
    else:
        flavour_why = "the framework image as published"
    why = f"{family} image with CUDA {img.cuda}" + (f" matching the {carrier.framework} {carrier.version} build" if carrier else "") \
        + f"; {flavour_why}"
    return _choice(img, why), []


def _family_images(ix: Index, family: str, platform: str) -> list[tuple[t.BaseImage, ImageCuda, tuple]]:
    """The catalog's images of `family` for `platform` that state their CUDA, in catalog
    order, each with what `_choose` compares of it: (its CUDA's major.minor, (the newest-first
    keys of its CUDA and its OS release)). Memoised: the 382 rows are mostly of other
    families, and each target of a fleet that ends on other builds chooses again."""
    key = (family, platform)
    found = ix.memo.family_images.get(key)
    if found is None:
        found = ix.memo.family_images[key] = [(img, img_cuda, (img_cuda.minor, (img_cuda.newest_first, _os_rank(img))))
                                for img, img_cuda in ix.images
                                if img.family == family and platform in img.platforms and img_cuda is not None]
    return found


def _os_rank(img: t.BaseImage) -> tuple:
    # newest OS release first: "ubuntu24.04" before "ubuntu22.04"
    digits = "".join(ch if ch.isdigit() or ch == "." else " " for ch in (img.os or "")).split()
    try:
        return tuple(-x for x in parse_version(digits[0]).release) if digits else ()
    except ValueError:
        return ()


def _choice(img: t.BaseImage, why: str) -> BaseImageChoice:
    return BaseImageChoice(ref=img.ref, family=img.family, flavour=img.flavour, cuda=img.cuda, cudnn=img.cudnn,
                           python=img.python, os=img.os, source=img.source, why=why)


def _explicit(req: Request, ix: Index, builds: list[Build], cuda: CudaVersion | None, installer: str
              ) -> tuple[BaseImageChoice | None, list[Problem]]:
    ref = req.spec.base_image
    img = find_image(ix, ref)
    problems: list[Problem] = _unchecked(req, ix, img, builds, cuda, installer)
    img_cuda = ImageCuda.read(img.cuda)
    facts = (fact(f"{img.ref}: CUDA {img.cuda}, flavour {img.flavour}", img),)
    if img_cuda is not None:
        for b in builds:
            if not _serves(img_cuda, b):
                problems.append(Problem(
                    ConflictKind.BASE_IMAGE_CUDA_MISMATCH,
                    f"{b.label} needs CUDA {b.cuda if not b.bundles_runtime and b.cuda_major < 11 else str(b.cuda_major) + '.x'} "
                    f"libraries, but the base image {img.ref} carries CUDA {img.cuda}, so the base image or the "
                    f"{b.framework} build must move", facts, framework=b.framework))
        if not builds and cuda and img_cuda.minor != cuda.minor_version:
            problems.append(Problem(ConflictKind.BASE_IMAGE_CUDA_MISMATCH,
                                    f"the base image {img.ref} carries CUDA {img.cuda}; you asked for CUDA {cuda}, so "
                                    f"one of them must move", facts))
        if req.driver:
            have = ix.driver_cuda(req.driver, req.platform)
            if have.native_cuda and img_cuda.minor > have.native_cuda:
                need = ix.native_need(img_cuda.minor)
                problems.append(Problem(
                    ConflictKind.DRIVER_TOO_OLD,
                    f"the base image {img.ref} declares CUDA {img_cuda.minor}, which the NVIDIA container toolkit "
                    f"checks against the host driver; driver {req.driver} supports CUDA up to {have.native_cuda}, so "
                    f"upgrade the driver{f' to >= {need}' if need else ''} or use an image with CUDA <= {have.native_cuda}",
                    facts + (fact(have.rule, None),), hints=Hints(driver=need)))
    if img.flavour == "base" and builds:
        problems.append(Problem(ConflictKind.BASE_IMAGE_CUDA_MISMATCH,
                                f"the base image {img.ref} is a -base flavour with only the CUDA runtime; "
                                f"{', '.join(b.framework for b in builds)} need the CUDA libraries of a runtime image, "
                                f"so the base image must move", facts))
    devel_why = needs_devel(req, builds, img_cuda.minor if img_cuda else cuda)
    if devel_why and img.flavour in ("base", "runtime"):
        problems.append(Problem(ConflictKind.BASE_IMAGE_CUDA_MISMATCH, f"{devel_why}; {img.ref} is {img.flavour}, so the base "
                                f"image must move to a devel flavour", facts))
    problems += _explicit_python(req, ix, img, builds, installer, facts)
    if not installer_runs_on(ix.m, installer, img.python):
        floor = installer_python_min(ix.m, installer).python_min
        other = "pip" if installer == "conda" else "conda"
        runs = installer_runs_on(ix.m, other, img.python)
        hints = Hints(base_image=True, installer=other if runs else None)
        problems.append(Problem(
            ConflictKind.PYTHON_UNSUPPORTED,
            f"the image build runs envbuild's {installer} installer with the base image's python3, which is Python "
            f"{img.python} on {img.ref}; the installer needs {floor} or newer, so the base image or the installer "
            f"must move", facts + (_installer_floor_fact(ix, installer), _python_fact(ix, img)), hints=hints))
    return _choice(img, _why_named(ix, img)), problems


def _why_named(ix: Index, img: t.BaseImage) -> str:
    """Why this base: the spec named it; for the spec's own row, what is known of it and where from."""
    if img is not ix.m.named_base:
        return "given in the spec"
    known = ", ".join(f"{name} {value}" for name, value in (
        ("CUDA", img.cuda), ("cuDNN", img.cudnn), ("Python", img.python), ("OS", img.os), ("flavour", img.flavour),
        ("framework", f"{img.framework} {img.framework_version}" if img.framework else None)) if value)
    return f"given in the spec: {img.family} base, {known or 'no facts known'} ({img.source})"


def _unchecked(req: Request, ix: Index, img: t.BaseImage, builds: list[Build], cuda: CudaVersion | None,
               installer: str) -> list[Problem]:
    """What could not be checked on an image outside the catalog because a fact it rests on
    is unknown: unchecked links (the resolution is then `unverified`, refused under
    --strict), each naming the fact, why it is unknown, and how to state it."""
    if img is not ix.m.named_base:
        return []  # a catalog row states what the catalog knows
    why = f" ({img.unread})" if img.unread else ""
    out = []
    needs = ", ".join(f"{b.framework} {b.version} (CUDA {b.cuda})" for b in builds) or (f"CUDA {cuda}" if cuda else "")
    if img.cuda is None and needs:
        # the driver link too: the container toolkit checks the base's declared CUDA against the driver
        out.append(unknown(f"nothing states the CUDA of the base image {img.ref}{why}, so whether it serves "
                           f"{needs}{' and driver ' + str(req.driver) if req.driver else ''} was not checked; "
                           f"{_state_it(img, 'cuda', 'X.Y')}", ("base_image", "driver") if req.driver else ("base_image",)))
    if img.python is None and req.python and binds_python(img, installer):
        out.append(unknown(f"nothing states the Python of the base image {img.ref}{why}; the lock is for the pinned "
                           f"Python {req.python}, and the build stops at its first step if python3 differs: "
                           f"{_state_it(img, 'python', req.python)}", ("python", "base_image")))
    if img.flavour is None and needs_devel(req, builds, cuda):
        out.append(unknown(f"nothing states whether the base image {img.ref} is a devel image{why}, and "
                           f"{needs_devel(req, builds, cuda)}; {_state_it(img, 'flavour', 'devel')}", ("base_image",)))
    return out


def _state_it(img: t.BaseImage, name: str, example: str) -> str:
    return (f"state it in the spec (base_image: {{ref: {img.ref}, {name}: {example}}}) or with "
            f"--base-fact {name}={example}")


def unknown_python(ix: Index, img: BaseImageChoice, assumed: str) -> Problem:
    """The unchecked Python link of an environment built on an image's own Python that
    nothing states (the lock assumes a Python the image may not have)."""
    named = ix.m.named_base
    if named is not None and named.ref == img.ref:
        why = f" ({named.unread})" if named.unread else ""
        return unknown(f"nothing states the Python of the base image {img.ref}{why}; envbuild assumed Python "
                       f"{assumed}, and the build stops at its first step if python3 differs: "
                       f"{_state_it(img, 'python', '3.11')}", ("python", "base_image"))
    return unknown(f"the matrix does not record the Python of {img.ref}; envbuild assumed Python {assumed}, so pin "
                   f"`python:` to the image's Python (or choose base: cuda)", ("python", "base_image"))


def _explicit_python(req: Request, ix: Index, img: t.BaseImage, builds: list[Build], installer: str,
                     facts: tuple) -> list[Problem]:
    if not img.python or not binds_python(img, installer):
        return []
    have = major_minor(parse_version(img.python))
    allowed = _pythons_allowed(req, builds)
    if allowed is None or have in allowed:
        return []
    wanted = f"Python {req.python}" if req.python else \
        f"a Python {', '.join(b.framework + ' ' + b.version for b in builds)} supports"
    hints = Hints(pythons=(have,), base_image=True, base_pythons=(have,))
    if img.family != "cuda":
        return [Problem(ConflictKind.PYTHON_UNSUPPORTED, f"the base image {img.ref} carries Python {img.python}; the environment "
                        f"needs {wanted}, so Python or the base image must move", facts, hints=hints)]
    return [Problem(ConflictKind.PYTHON_UNSUPPORTED,
                    f"a pip environment is a venv over the base image's python3, which is Python {have} on {img.ref}; "
                    f"the environment needs {wanted}, so Python, the installer (a conda environment brings its own "
                    f"Python) or the base image must move", facts + (_python_fact(ix, img),),
                    hints=dataclasses.replace(hints, installer="conda"))]
