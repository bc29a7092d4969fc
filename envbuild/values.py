"""Small immutable values the checks compare, parsed once where text enters envbuild.

Each value prints back as its canonical text (`str(CudaVersion.parse("12.4.1")) ==
"12.4.1"`) and orders the way the thing it names does: CUDA and driver versions and
compute capabilities numerically (`535.104.05 < 535.129.03`, `9.0 < 10.0`). The enums
are `str`-valued, so they compare equal to, hash like and serialise as their text
(JSON output does not change when a string becomes an enum member).

Nothing here imports `packaging`: these are parsed on the CLI's start-up path.
"""
from __future__ import annotations

import enum
import re
from dataclasses import dataclass

__all__ = [
    "major_minor",
    "CudaVersion",
    "DriverVersion",
    "ComputeCapability",
    "Installer",
    "Platform",
    "ConflictKind",
    "BaseFamily",
]


def major_minor(release) -> str:
    """`"X.Y"` of a release tuple (or anything with `.release`): (12, 1, 1) -> "12.1",
    (12,) -> "12.0". The one spelling of "major.minor" in envbuild."""
    release = getattr(release, "release", release)
    return f"{release[0]}.{release[1] if len(release) > 1 else 0}"


class _Ordered:
    """Equality, hash and order by `_key()` (a release padded with zeros: 12.4 == 12.4.0,
    as in packaging)."""

    __slots__ = ()

    def _key(self) -> tuple[int, ...]:
        raise NotImplementedError

    def __eq__(self, other) -> bool:
        return type(other) is type(self) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __lt__(self, other) -> bool:
        return self._key() < other._key()

    def __le__(self, other) -> bool:
        return self._key() <= other._key()

    def __gt__(self, other) -> bool:
        return self._key() > other._key()

    def __ge__(self, other) -> bool:
        return self._key() >= other._key()


def _padded(release: tuple[int, ...]) -> tuple[int, ...]:
    return release + (0,) * (3 - len(release))


_CUDA = re.compile(r"(\d{1,3})\.(\d{1,3})(?:\.(\d{1,4}))?")


@dataclass(frozen=True, eq=False)
class CudaVersion(_Ordered):
    """A CUDA toolkit version: `12.4` or `12.4.1` (a patch is kept only when written)."""

    major: int
    minor: int
    patch: int | None = None

    @classmethod
    def parse(cls, text: str) -> CudaVersion:
        match = _CUDA.fullmatch(str(text).strip())
        if not match:
            raise ValueError(f"malformed CUDA version {text!r} (expected something like 12.4 or 12.4.1)")
        major, minor, patch = match.groups()
        return cls(int(major), int(minor), int(patch) if patch is not None else None)

    @property
    def release(self) -> tuple[int, ...]:
        return (self.major, self.minor) if self.patch is None else (self.major, self.minor, self.patch)

    @property
    def major_minor(self) -> str:
        return f"{self.major}.{self.minor}"

    def _key(self) -> tuple[int, ...]:
        return _padded(self.release)

    def __str__(self) -> str:
        return ".".join(map(str, self.release))


_DRIVER = re.compile(r"[Rr]?(\d{2,4})(?:\.(\d{1,3}))?(?:\.(\d{1,3}))?")


@dataclass(frozen=True, eq=False)
class DriverVersion(_Ordered):
    """An NVIDIA driver version as nvidia-smi prints it: `450.36.06`, `535.104.05`, `581.57`;
    also a branch (`R470`, `470`). Parts compare as numbers (`06` is 6); the text keeps
    the zero padding NVIDIA writes."""

    text: str
    parts: tuple[int, ...]

    @classmethod
    def parse(cls, text: str) -> DriverVersion:
        cleaned = str(text).strip()
        match = _DRIVER.fullmatch(cleaned)
        if not match:
            raise ValueError(f"malformed driver version {text!r} (expected something like 535.104.05)")
        groups = [g for g in match.groups() if g is not None]
        return cls(".".join(groups), tuple(int(g) for g in groups))

    def _key(self) -> tuple[int, ...]:
        return _padded(self.parts)

    def __str__(self) -> str:
        return self.text


_CC_DOTTED = re.compile(r"(\d{1,2})\.(\d)")
_CC_DIGITS = re.compile(r"(\d{1,2})(\d)")


@dataclass(frozen=True, order=True)
class ComputeCapability:
    """A GPU's compute capability: `8.6`; also read from `sm_86`, `sm86`, `compute_86`,
    `sm_90a` (arch-specific) / `sm_100f` (family) and the number 86."""

    major: int
    minor: int

    @classmethod
    def parse(cls, text: str | int, digits_alone: bool = True) -> ComputeCapability:
        """`digits_alone=False` refuses a bare number ("86"), where text may be a GPU
        model's number instead ("3090", "970")."""
        if isinstance(text, int) and not isinstance(text, bool):
            text = str(text)
        raw = str(text).strip().lower()
        prefixed = False
        for prefix in ("sm_", "compute_", "sm"):
            if raw.startswith(prefix):
                raw, prefixed = raw[len(prefix):], True
                break
        raw = raw.rstrip("af")  # arch-specific (sm_90a) and family (sm_100f) suffixes
        match = _CC_DOTTED.fullmatch(raw)
        if match is None and (prefixed or digits_alone) and len(raw) in (2, 3):
            match = _CC_DIGITS.fullmatch(raw)
        if match is None:
            raise ValueError(f"malformed compute capability {text!r} (expected e.g. 8.6 or sm_86)")
        return cls(int(match.group(1)), int(match.group(2)))

    @property
    def sm(self) -> int:
        """86 for 8.6: the number in CUDA's `sm_86`."""
        return self.major * 10 + self.minor

    @property
    def sm_name(self) -> str:
        return f"sm_{self.sm}"

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"


class _Text(str, enum.Enum):
    """An enum whose members are their text: `str(m)`, f-strings and JSON give the value."""

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


class Installer(_Text):
    CONDA = "conda"
    PIP = "pip"


class Platform(_Text):
    LINUX_64 = "linux-64"
    LINUX_AARCH64 = "linux-aarch64"
    WIN_64 = "win-64"
    OSX_64 = "osx-64"
    OSX_ARM64 = "osx-arm64"

    @property
    def buildable(self) -> bool:
        """envbuild locks and builds images only for Linux; the others are checked only."""
        return self in (Platform.LINUX_64, Platform.LINUX_AARCH64)


class BaseFamily(_Text):
    """The base image families `base:` may name (besides `auto`)."""

    DLC = "dlc"
    PYTORCH = "pytorch"
    RAPIDS = "rapids"
    TENSORFLOW = "tensorflow"
    CUDA = "cuda"


class ConflictKind(_Text):
    """Every kind of conflict, in the order a resolution reports them: the ones that make
    every other answer moot come first."""

    PLATFORM_UNSUPPORTED = "platform_unsupported"
    DRIVER_TOO_OLD = "driver_too_old"
    FRAMEWORK_CUDA_MISMATCH = "framework_cuda_mismatch"
    GPU_ARCH_UNSUPPORTED = "gpu_arch_unsupported"
    PYTHON_UNSUPPORTED = "python_unsupported"
    CUDNN_MISMATCH = "cudnn_mismatch"
    BASE_IMAGE_CUDA_MISMATCH = "base_image_cuda_mismatch"
    LIBRARY_ABI = "library_abi"
    UNKNOWN_FACT = "unknown_fact"  # a conflict only with --strict: the matrix has no row to decide on
    GPU_MEMORY_INSUFFICIENT = "gpu_memory_insufficient"  # the target (or MIG slice) has less memory than asked

    @classmethod
    def rank(cls, kind: str) -> int:
        """Sort key of a kind; a kind that is not a conflict kind sorts last."""
        return _KIND_RANK.get(kind, len(_KIND_RANK))


_KIND_RANK = {k.value: i for i, k in enumerate(ConflictKind)}
