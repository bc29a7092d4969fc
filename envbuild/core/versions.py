"""Version helpers on top of `packaging`.

Users write constraints in three dialects: conda (`1.6.*`, `1.6`, `=1.6`, `>=1.6,<2`),
PEP 440 (`>=2.1,<2.3`, `==2.1.*`, `~=2.1`) and pip local versions (`1.7.1+cu101`).
`parse_constraint` maps all of them onto PEP 440 clauses plus an optional local label,
which `packaging` judges (through `envbuild.core.specifiers`), so
the rest of envbuild compares versions one way only.

CUDA and driver versions and compute capabilities have their own small value objects in
`envbuild.core.values`.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

from envbuild.core import specifiers
from envbuild.core.values import CudaVersion

__all__ = [
    "Constraint",
    "parse_constraint",
    "parse_version",
    "cuda_from_local",
    "LocalLabel",
    "read_local_label",
    "cuda_to_local",
]

_OPERATORS = ("===", "==", "!=", "<=", ">=", "~=", "<", ">", "=")
_CU_LOCAL = re.compile(r"^cu(\d{2,4})$")


@functools.lru_cache(maxsize=4096)
def parse_version(text: str) -> Version:
    """A `Version`, or ValueError with the offending text."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"empty version {text!r}")
    try:
        return Version(text.strip())
    except InvalidVersion:
        raise ValueError(f"malformed version {text!r} (expected something like 2.1.2 or 12.1)") from None


@functools.lru_cache(maxsize=512)
def ordered_versions(texts: frozenset[str]) -> tuple[str, ...]:
    """`texts` oldest first. Memoised: the builds of a table share a few dozen Python sets,
    and a request on a Python most of them lack words a problem (with its range) for each."""
    return tuple(sorted(texts, key=parse_version))


def cuda_from_local(label: str) -> str:
    """The CUDA variant a pip local label names: `cu121` -> `12.1`, `cu92` -> `9.2`."""
    match = _CU_LOCAL.match(label.strip().lower())
    if not match:
        raise ValueError(f"{label!r} is not a CUDA wheel label (expected cuXYZ, e.g. cu121)")
    digits = match.group(1)
    return f"{int(digits[:-1])}.{digits[-1]}"


@dataclass(frozen=True)
class LocalLabel:
    """What a pip local label says about the build: `kind` is cuda | cpu | rocm | unknown
    (a label that names no accelerator, e.g. a git hash of a source or vendor build)."""

    kind: str
    cuda: str | None = None  # "12.1", or a major alone ("11") for `cuda11.cudnn86`
    cudnn: str | None = None  # "8.6"


def _digits_version(digits: str) -> str:
    """`121` -> `12.1`, `92` -> `9.2`: the last digit is the minor."""
    return f"{int(digits[:-1])}.{digits[-1]}"


def read_local_label(label: str) -> LocalLabel:
    """Read a pip local label of the common conventions: `cu121`, `cpu`, `rocm5.6`; anything
    else is `unknown`. (A framework's own labels are read by its plugin:
    `envbuild.frameworks.read_label`.)"""
    text = label.strip().lower()
    match = _CU_LOCAL.match(text)
    if match:
        return LocalLabel("cuda", cuda=_digits_version(match.group(1)))
    if text == "cpu":
        return LocalLabel("cpu")
    if text.startswith("rocm"):
        return LocalLabel("rocm")
    return LocalLabel("unknown")


def pypi_form(requirement: str) -> str:
    """`torch==2.5.1+cu124` -> `torch==2.5.1`: the untagged wheel PyPI serves."""
    return re.sub(r"(==\s*[^+,;\s]+)\+[A-Za-z0-9.]+", r"\1", requirement)


def cuda_to_local(cuda: CudaVersion) -> str:
    """`12.1` (or `12.1.1`) -> `cu121`."""
    if cuda.minor > 9:
        raise ValueError(f"CUDA {cuda} has no cuXYZ wheel label")
    return f"cu{cuda.major}{cuda.minor}"


@dataclass(frozen=True, eq=False)
class Constraint:
    """A parsed version constraint. `clauses` are its PEP 440 clauses as (operator,
    version) pairs, `("==", "2.1.*")`; `local` is the pip local label when one was
    written (`cu101` in `1.7.1+cu101`)."""

    text: str
    clauses: tuple[tuple[str, str], ...] = ()
    local: str | None = None

    @property
    def any(self) -> bool:
        return not self.clauses and self.local is None

    @property
    def exact(self) -> Version | None:
        """The single version pinned by `==X` (no wildcard), else None."""
        if len(self.clauses) == 1:
            op, version = self.clauses[0]
            if op in ("==", "===") and not version.endswith(".*"):
                return parse_version(version)
        return None

    @functools.cached_property
    def specifier(self):
        """The clauses as a packaging SpecifierSet (imported only when asked for)."""
        return SpecifierSet(self._pep440)

    def contains(self, version: str | Version) -> bool:
        memo = self._memo
        found = memo.get(version)
        if found is None:
            found = memo[version] = self._contains(version)
        return found

    def _contains(self, version: str | Version) -> bool:
        v = version if isinstance(version, Version) else parse_version(version)
        if self.local is not None and v.local is not None and v.local != self.local:
            return False
        # A pre-release matches only when the constraint itself names one.
        return specifiers.admits(self._pep440, str(v) if v.local is None else v.public, self._names_prerelease)

    @functools.cached_property
    def _pep440(self) -> str:
        return ",".join(op + version for op, version in self.clauses)

    @functools.cached_property
    def _memo(self) -> dict:
        # Constraints are shared through parse_constraint's cache; versions repeat a lot.
        return {}

    @functools.cached_property
    def _names_prerelease(self) -> bool:
        return any(parse_version(version.removesuffix(".*")).is_prerelease for _, version in self.clauses)

    def __str__(self) -> str:
        text = (specifiers.normal(self._pep440) if self.clauses else "") or "*"
        return f"{text}+{self.local}" if self.local else text


def _translate_clause(clause: str, original: str) -> tuple[tuple[str, str] | None, str | None]:
    """One comma-separated clause -> (PEP 440 (operator, version) or None, local label or None)."""
    op = next((o for o in _OPERATORS if clause.startswith(o)), "")
    version = clause[len(op):].strip()
    if not version:
        raise ValueError(f"malformed version constraint {original!r}: {clause!r} has no version")
    if "=" in version or " " in version:
        raise ValueError(
            f"malformed version constraint {original!r}: build strings are not accepted here "
            "(choose the CUDA variant with `cuda:` instead)"
        )
    local = None
    if "+" in version:
        version, local = version.split("+", 1)
        if op not in ("", "=", "==", "===") or not local:
            raise ValueError(f"malformed version constraint {original!r}: a +local label needs an exact version")
        op = "=="
    wildcard = version.endswith(".*") or version == "*"
    base = version[:-2] if version.endswith(".*") else version
    if version == "*":
        if op not in ("", "=", "=="):
            raise ValueError(f"malformed version constraint {original!r}")
        return None, local
    try:
        parsed = parse_version(base)
    except ValueError:
        raise ValueError(f"malformed version constraint {original!r}: {base!r} is not a version") from None
    if op in ("", "="):
        # conda: a bare or single-= version is a prefix match (`1.6` = `1.6.*`), unless
        # it names a pre/post/dev release, which only matches itself.
        if local is not None or parsed.is_prerelease or parsed.is_postrelease or parsed.is_devrelease:
            return ("==", base), local
        return ("==", f"{base}.*"), local
    if wildcard and op not in ("==", "!="):
        raise ValueError(f"malformed version constraint {original!r}: `{op}` cannot take a wildcard")
    return (op, version), local


@functools.lru_cache(maxsize=1024)
def parse_constraint(text: str | None) -> Constraint:
    """Parse a conda-style or PEP 440 constraint (None, "" and "*" mean any version)."""
    if text is None:
        return Constraint("*")
    original = str(text)
    cleaned = original.strip()
    if cleaned in ("", "*", "any"):
        return Constraint(original)
    if "|" in cleaned:
        raise ValueError(f"malformed version constraint {original!r}: alternatives with `|` are not supported")
    clauses, locals_ = [], set()
    for clause in cleaned.split(","):
        clause = clause.strip()
        if not clause:
            raise ValueError(f"malformed version constraint {original!r}: empty clause")
        pep, local = _translate_clause(clause, original)
        if pep:
            clauses.append(pep)
        if local:
            locals_.add(local)
    if len(locals_) > 1:
        raise ValueError(f"malformed version constraint {original!r}: more than one +local label")
    if clauses and specifiers.normal(",".join(op + version for op, version in clauses)) is None:
        raise ValueError(f"malformed version constraint {original!r}")
    return Constraint(original, tuple(clauses), next(iter(locals_), None))
