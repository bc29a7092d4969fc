"""The CUDA a lock installs, judged again on the locked records.

`resolve` checks the CUDA it chose against the driver and the GPUs; what is installed is
decided later, by the solver, and a framework's own requirements can pull NVIDIA's CUDA
wheels of a newer minor than the one checked (jax 0.4.38's CUDA plugin needs
nvidia-cuda-nvcc-cu12 >= 12.6.85: left alone, a lock for CUDA 12.4 installs the 12.9
runtime, ptxas and cuBLAS). So:

* the pip lock holds NVIDIA's CUDA wheels to the resolved CUDA release, as NVIDIA's
  `cuda-toolkit` metapackage pins that release's components (matrices/wheels.yaml), and
  lets go only of what a requirement refuses, moving it as little as that requirement
  needs (`lock_pip`); so the lock installs the CUDA that was checked wherever the framework
  allows it, and otherwise says which it installs and why;
* the locked records say which CUDA runtime, ptxas and cuDNN the environment installs
  (`components`), and these are checked again against the target driver and the resolved
  stack (`judge`). A runtime or ptxas newer than the CUDA the driver reports is a warning:
  it runs through minor-version compatibility, and XLA (JAX, TensorFlow) then compiles
  serially. It is a conflict where the release needs its toolkit's own driver
  (matrices/family_rules.yaml `native_driver`), where the driver cannot run that CUDA at
  all, and for a cuDNN major other than the resolved one.
"""
from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import Version

from envbuild import frameworks
from envbuild.core import specifiers
from envbuild.core.cuda_packages import Component, components
from envbuild.core.model import Conflict, Fact, Fix, ResolvedStack
from envbuild.core.package_sets import package_set
from envbuild.core.values import ConflictKind
from envbuild.infra.errors import EnvironmentProblem
from envbuild.lock import pip_lock
from envbuild.matrix.lookup import max_cuda_for_driver

# what XLA does with a ptxas newer than the driver: its own warning, as users report it
PTXAS_SOURCE = ("XLA's warning in xla/service/gpu/nvptx_compiler.cc, e.g. jax-ml/jax#19821 (jaxlib 0.4.24, "
                "driver 535.154.05, ptxas 12.3.107): \"The NVIDIA driver's CUDA version is 12.2 which is older than "
                "the ptxas CUDA version (12.3.107). Because the driver is older than the ptxas version, XLA is "
                "disabling parallel compilation\"")


@dataclass(frozen=True)
class Released:
    """A CUDA wheel the lock could not hold to the resolved minor, and the requirement why."""

    package: str
    asked: str  # the constraint given up: nvidia-cuda-nvcc-cu12==12.4.*
    why: str  # the requirement that refused it: jax-cuda12-plugin[with-cuda]==0.4.38 depends on ...>=12.6.85
    held: str | None = None  # what was held instead: nvidia-cuda-nvcc-cu12==12.6.*


@dataclass(frozen=True)
class Check:
    """One link of the installed CUDA, judged: ok, warning or conflict."""

    link: str  # runtime | ptxas | cudnn
    status: str  # ok | warning | conflict
    message: str
    kind: str | None = None  # the warning's or conflict's kind
    fixes: tuple[Fix, ...] = ()
    facts: tuple[Fact, ...] = ()


@dataclass(frozen=True)
class CudaReport:
    """What CUDA one platform's lock installs and how it stands against the target."""

    platform: str
    resolved: str | None  # the CUDA resolve checked
    installed: str | None  # the CUDA runtime the environment loads (major.minor); None: none locked
    components: tuple[Component, ...] = ()
    released: tuple[Released, ...] = ()
    checks: tuple[Check, ...] = ()

    @property
    def conflicts(self) -> tuple[Conflict, ...]:
        return tuple(Conflict(c.kind or ConflictKind.LIBRARY_ABI, c.message, c.facts, c.fixes)
                     for c in self.checks if c.status == "conflict")

    @property
    def warnings(self) -> tuple[str, ...]:
        return tuple(c.message for c in self.checks if c.status == "warning")

    def lines(self, warnings: bool = True) -> list[str]:
        """The report in words: what is installed, why a wheel is not of the resolved CUDA,
        then (with `warnings`) each check that is not plain ok."""
        parts = [f"{c.role} {c.minor} ({c.package} {c.version})" for c in self.components]
        if self.installed is None:
            head = f"CUDA: no CUDA runtime package locked for {self.platform}; " \
                   f"the framework's wheel or the base image carries CUDA {self.resolved}"
        else:
            same = "the resolved CUDA" if self.installed == self.resolved else f"resolved {self.resolved}"
            head = f"CUDA installed on {self.platform}: {self.installed} ({same})"
        out = [head + (f": {', '.join(parts)}" if parts else "")]
        out += [f"  {r.package}: not {r.asked[len(r.package):]}, because {r.why}"
                + (f"; held to {r.held[len(r.package):]}" if r.held else "") for r in self.released]
        out += [f"  {c.status}: {c.message}" for c in self.checks if c.status != "ok" and warnings]
        return out


def _minor(version: str) -> str:
    return ".".join(version.split(".")[:2])


def _key(minor: str) -> tuple[int, ...]:
    return tuple(int(p) for p in minor.split(".") if p.isdigit())


def _major_of(name: str) -> int | None:
    """The CUDA major a NVIDIA wheel name is for: `-cu12` -> 12; no suffix -> None (13 on)."""
    found = re.search(r"-cu(\d+)$", name)
    return int(found.group(1)) if found else None


def _for_major(name: str, major: int) -> bool:
    named = _major_of(name)
    return named == major if named is not None else major >= 13


# --- asking for the resolved CUDA ------------------------------------------------------------

def toolkit_releases(m, major: int) -> list[tuple[str, dict[str, str]]]:
    """[(CUDA minor, {wheel: version})] of CUDA `major`, oldest first: the component wheels
    NVIDIA's `cuda-toolkit` metapackage pins for the newest update of each minor
    (matrices/wheels.yaml, read by `envbuild matrix refresh`)."""
    newest: dict[str, tuple] = {}
    for r in m.wheels:
        if r.package != "cuda-toolkit" or not r.pins or int(r.version.split(".")[0]) != major:
            continue
        minor = _minor(r.version)
        if minor not in newest or Version(r.version) > newest[minor][0]:
            pins = dict(r.pins).get("all", "")
            newest[minor] = (Version(r.version), dict(p.split("==", 1) for p in pins.split()))
    return [(minor, newest[minor][1]) for minor in sorted(newest, key=_key)]


@dataclass(frozen=True)
class _Hold:
    """What the pip lock holds its CUDA wheels to: the libraries of one CUDA release, a ptxas
    minor and a cuDNN minor (None: left to the requirements)."""

    major: int
    release: str | None
    ptxas: str | None
    cudnn: str | None

    def constraints(self, releases: dict[str, dict[str, str]]) -> tuple[str, ...]:
        ptxas = set(package_set("ptxas_package"))
        out = []
        for name, version in (releases.get(self.release) or {}).items():
            if name in ptxas:
                continue
            # a wheel versioned as its CUDA release is held to the minor; the others (cuFFT 11.2,
            # cuSPARSE 12.3 in CUDA 12.4) to no newer than that release's: a library newer than
            # the ones it links against fails to load (`undefined symbol: __nvJitLink..._12_9`)
            out.append(f"{name}=={self.release}.*" if _minor(version) == self.release else f"{name}<={version}")
        if self.ptxas:
            out += [f"{name}=={self.ptxas}.*" for name in package_set("ptxas_package")
                    if name.startswith("nvidia-") and _for_major(name, self.major)]
        if self.cudnn:
            out += [f"{name}=={self.cudnn}.*" for name in package_set("cudnn_package")
                    if name.startswith("nvidia-") and _for_major(name, self.major)]
        return tuple(out)


def _name(constraint: str) -> str:
    return re.split(r"[=<>]", constraint, maxsplit=1)[0]


_SPEC = r"(?:[<>=!~]=?|===)[\w.*+!]+(?:,(?:[<>=!~]=?|===)[\w.*+!]+)*"


def _refusal(package: str, explanation: str) -> tuple[str, str] | None:
    """(the requirement on `package` that uv's explanation names, its specifier) when the
    explanation names `package`; None when it does not."""
    text = " ".join(explanation.split())
    name = rf"(?<![\w-]){re.escape(package)}(?![\w-])"
    if not re.search(name, text):
        return None
    found = re.search(rf"([A-Za-z0-9][\w.\-]*(?:\[[^\]]*\])?(?:==\S+?)?) depends on {name}({_SPEC})", text)
    if found:
        return f"{found.group(1).rstrip(',')} depends on {package}{found.group(2)}", found.group(2)
    found = re.search(rf"you require {name}({_SPEC})", text)
    if found:
        return f"the spec asks for {package}{found.group(1)}", found.group(1)
    return f"no {package} of that CUDA release fits the other requirements", ""


def _admits(spec: str, version: str) -> bool:
    try:
        return SpecifierSet(spec).contains(version, prereleases=True)
    except InvalidSpecifier:
        return False


def _moved(hold: _Hold, package: str, spec: str, releases: dict, tried: set) -> _Hold:
    """`hold` with `package` let go: ptxas to the oldest minor `spec` admits, cuDNN to the
    requirements, the libraries to the CUDA release nearest the resolved one (newer first)
    whose wheel `spec` admits; each tried once."""
    if package in package_set("ptxas_package"):
        floors = re.findall(r"(?:>=|==|~=|>)(\d+\.\d+)", spec)
        moved = floors[0] if floors and ("ptxas", floors[0]) not in tried else None
        tried.add(("ptxas", moved))
        return dataclasses.replace(hold, ptxas=moved)
    if package in package_set("cudnn_package"):
        return dataclasses.replace(hold, cudnn=None)
    here = _key(hold.release) if hold.release else (hold.major,)
    newer = [r for r in releases if _key(r) > here]  # `releases` is oldest first
    older = [r for r in reversed(list(releases)) if _key(r) < here]
    fits = [r for r in newer + older if package in releases[r] and _admits(spec, releases[r][package]) and r not in tried]
    tried.update(fits[:1])
    return dataclasses.replace(hold, release=fits[0] if fits else None)


def lock_pip(m, request, cudnn: str | None, *, timeout: float, allow_unhashed: bool, explain: bool = True):
    """The pip lock of `request` with its CUDA wheels held to the resolved CUDA release and
    cuDNN wherever the requirements allow: (PipLock, the wheels let go of and why). A wheel a
    requirement refuses moves as little as that requirement needs (see `_moved`). The
    request's own constraints (a base image's versions) hold throughout; a failure without
    any CUDA hold left is explained when `explain`."""
    major = int(request.cuda.split(".")[0]) if request.cuda else 0
    releases = dict(toolkit_releases(m, major)) if request.cuda else {}
    cuda = _minor(request.cuda) if request.cuda else None
    hold = _Hold(major, cuda if cuda in releases else None, cuda, _minor(cudnn) if cudnn and cuda else None)
    tried: set = {hold.release, ("ptxas", hold.ptxas)}
    released: dict[str, Released] = {}
    while True:
        held = hold.constraints(releases) if request.cuda else ()
        asked = dataclasses.replace(request, constraints=request.constraints + held)
        try:
            pins = pip_lock.resolve_uv(asked, timeout, explain=explain and not held)
            break
        except EnvironmentProblem:
            if held:  # (without them resolve_uv asked already) an index that cannot be read is named
                pip_lock.check_indexes(request, timeout)
            raise
        except pip_lock.PipLockFailed as failed:
            if not held:
                raise
            refused = [(c, found) for c in held if (found := _refusal(_name(c), failed.raw))]
            if not refused:  # not the CUDA wheels: the request fails without them too, and is explained there
                hold = _Hold(major, None, None, None)
                continue
            constraint, (why, spec) = refused[0]
            package = _name(constraint)
            released.setdefault(package, Released(package, constraint, why))
            hold = _moved(hold, package, spec, releases, tried)
    lock = pip_lock.checked_lock(asked, pins, allow_unhashed=allow_unhashed)
    kept = {_name(c): c for c in held}
    return lock, tuple(dataclasses.replace(r, held=kept.get(r.package)) for r in released.values())


def _ptxas_users(stack: ResolvedStack) -> list[str]:
    """The stack's frameworks that compile their kernels with the installed ptxas (XLA)."""
    return [f.name for f in stack.frameworks if f.name in frameworks.names() and frameworks.get(f.name).lock.jit_ptxas]


# --- judging it --------------------------------------------------------------------------

def judge(m, stack: ResolvedStack, platform: str, packages, released: tuple[Released, ...] = ()) -> CudaReport:
    """The report of what (name, version) pairs `packages` install for `stack` on `platform`."""
    found = components(packages)
    by_role = {c.role: c for c in found}
    runtime = by_role.get("runtime")
    checks = []
    if runtime is not None:
        checks.append(_runtime(m, stack, platform, runtime))
    if "ptxas" in by_role:
        checks.append(_ptxas(m, stack, platform, by_role["ptxas"]))
    if "cudnn" in by_role and stack.cudnn:
        checks.append(_cudnn(stack, by_role["cudnn"], released))
    return CudaReport(platform, stack.cuda, runtime.minor if runtime else None, found, released, tuple(checks))


def _driver_for(m, cuda: str, platform: str) -> str | None:
    """The driver released with CUDA `cuda` (major.minor), which runs it with every feature."""
    rows = sorted((r for r in m.cuda_releases if _minor(r.version) == cuda), key=lambda r: _key(r.version))
    drivers = [r.min_driver_windows if platform.startswith("win") else r.min_driver_linux for r in rows]
    return next((d for d in drivers if d), None)


def _driver_facts(m, stack: ResolvedStack, platform: str):
    _, have = max_cuda_for_driver(m, stack.driver, platform)
    return have, Fact(have.rule, have.source or "envbuild rule", have.inferred, have.secondary)


def _runtime(m, stack: ResolvedStack, platform: str, c: Component) -> Check:
    said = f"CUDA runtime {c.minor} ({c.package} {c.version})"
    if not stack.driver or platform.startswith("osx"):
        return Check("runtime", "ok", f"{said}; no target driver to check it against")
    have, fact = _driver_facts(m, stack, platform)
    if have.cuda is None or _key(c.minor) > _key(have.cuda):
        need = _driver_for(m, c.minor, platform)
        return Check("runtime", "conflict",
                     f"the lock installs {said}, which driver {stack.driver} cannot run (it runs CUDA up to "
                     f"{have.cuda or 'none in the matrix'}); the driver or the CUDA version must move",
                     ConflictKind.DRIVER_TOO_OLD, (Fix(f"upgrade the target driver to >= {need}", {"driver": need}),) if need else (),
                     (fact,))
    if have.native_cuda and _key(c.minor) > _key(have.native_cuda):
        return Check("runtime", "warning",
                     f"the lock installs {said}, newer than the CUDA {have.native_cuda} driver {stack.driver} reports: "
                     f"it runs through minor-version compatibility (no PTX JIT of code newer than {have.native_cuda})",
                     ConflictKind.MINOR_VERSION_COMPAT, facts=(fact,))
    return Check("runtime", "ok", f"{said}: driver {stack.driver} runs it")


def _native_rule(m, stack: ResolvedStack):
    """The family rule that says one of the stack's releases needs its toolkit's own driver."""
    for f in stack.frameworks:
        for r in m.family_rules:
            if r.native_driver and r.framework in (f.name, "*") and \
                    (not r.releases or specifiers.admits(r.releases, f.version, True)):
                return f, r
    return None


def _ptxas(m, stack: ResolvedStack, platform: str, c: Component) -> Check:
    said = f"ptxas {c.minor} ({c.package} {c.version})"
    if not stack.driver or platform.startswith("osx"):
        return Check("ptxas", "ok", f"{said}; no target driver to check it against")
    have, fact = _driver_facts(m, stack, platform)
    native = have.native_cuda
    if native and _key(c.minor) <= _key(native):
        return Check("ptxas", "ok", f"{said}: not newer than the CUDA {native} driver {stack.driver} reports")
    need = _driver_for(m, c.minor, platform)
    fixes = (Fix(f"upgrade the target driver to >= {need} (CUDA {c.minor} natively)", {"driver": need}),) if need else ()
    ruled = _native_rule(m, stack)
    if ruled is not None:
        f, rule = ruled
        return Check("ptxas", "conflict",
                     f"{f.name} {f.version} compiles its kernels with {said} and needs the driver released with that "
                     f"CUDA (no minor-version compatibility); driver {stack.driver} reports CUDA {native}, so the "
                     f"driver or the CUDA version must move", ConflictKind.DRIVER_TOO_OLD, fixes,
                     (fact, Fact(f"{f.name} {rule.releases}: native_driver", rule.source)))
    users = _ptxas_users(stack)
    who = f"XLA ({', '.join(users)}) then compiles serially" if users else \
        "PTX it produces cannot be JIT-compiled by that driver"
    upgrade = f"; driver >= {need} runs it natively" if need else ""
    return Check("ptxas", "warning",
                 f"the lock installs {said}, newer than the CUDA {native or '?'} driver {stack.driver} reports: "
                 f"{who} (\"the NVIDIA driver's CUDA version is older than the ptxas CUDA version\"){upgrade}",
                 "ptxas_newer_than_driver", fixes, (fact, Fact("ptxas newer than the driver", PTXAS_SOURCE)))


def _cudnn(stack: ResolvedStack, c: Component, released: tuple[Released, ...]) -> Check:
    said = f"cuDNN {c.minor} ({c.package} {c.version})"
    wanted = stack.cudnn or ""
    if _key(c.minor)[:1] != _key(wanted)[:1]:
        why = next((f", because {r.why}" for r in released if r.package == c.package), "")
        return Check("cudnn", "conflict",
                     f"the lock installs {said}{why}, but the stack's frameworks are built for cuDNN {wanted}; "
                     f"cuDNN or the framework version must move", ConflictKind.CUDNN_MISMATCH)
    return Check("cudnn", "ok", f"{said}: the resolved cuDNN {wanted} major")
