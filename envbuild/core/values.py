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
import functools

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


class _Value:
    """Immutable; equality, hash and order by `_key`, a tuple of ints made once (these are
    dictionary keys in the resolver's memos). Plain classes with __slots__, not
    dataclasses: this module is imported on every CLI start."""

    __slots__ = ("_key", "_hash")

    def __setattr__(self, name, value):
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __eq__(self, other) -> bool:
        return type(other) is type(self) and self._key == other._key

    def __hash__(self) -> int:
        return self._hash

    def _keyed(self, key: tuple[int, ...]) -> None:
        object.__setattr__(self, "_key", key)
        object.__setattr__(self, "_hash", hash(key))

    def __lt__(self, other) -> bool:
        return self._key < other._key

    def __le__(self, other) -> bool:
        return self._key <= other._key

    def __gt__(self, other) -> bool:
        return self._key > other._key

    def __ge__(self, other) -> bool:
        return self._key >= other._key

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self)!r})"

    def __reduce__(self):
        # copied and pickled as its text: `__setattr__` refuses the slot-by-slot state they would restore
        return type(self).parse, (str(self),)


def _padded(release: tuple[int, ...]) -> tuple[int, ...]:
    return release + (0,) * (3 - len(release))


def _numbers(text: str, sizes: tuple[int, ...]) -> tuple[int, ...] | None:
    """Dot-separated decimal parts, part i at most sizes[i] digits; None when malformed."""
    parts = text.split(".")
    if len(parts) > len(sizes) or not all(p.isascii() and p.isdigit() and len(p) <= n for p, n in zip(parts, sizes)):
        return None
    return tuple(int(p) for p in parts)


class CudaVersion(_Value):
    """A CUDA toolkit version: `12.4` or `12.4.1` (a patch is kept only when written).
    Orders as packaging does: 12.4 == 12.4.0 < 12.4.1 < 12.10."""

    __slots__ = ("major", "minor", "patch")

    def __init__(self, major: int, minor: int, patch: int | None = None):
        object.__setattr__(self, "major", major)
        object.__setattr__(self, "minor", minor)
        object.__setattr__(self, "patch", patch)
        self._keyed(_padded(self.release))

    @classmethod
    @functools.lru_cache(maxsize=1024)  # the matrices' few hundred texts, parsed once per process
    def parse(cls, text: str) -> CudaVersion:
        found = _numbers(str(text).strip(), (3, 3, 4))
        if found is None or len(found) < 2:
            raise ValueError(f"malformed CUDA version {text!r} (expected something like 12.4 or 12.4.1)")
        return cls(*found)

    @property
    def release(self) -> tuple[int, ...]:
        return (self.major, self.minor) if self.patch is None else (self.major, self.minor, self.patch)

    @property
    def major_minor(self) -> str:
        return f"{self.major}.{self.minor}"

    @property
    def minor_version(self) -> CudaVersion:
        """The major.minor as a value (12.4.1 -> 12.4): what tables keyed by CUDA minor hold."""
        return self if self.patch is None else CudaVersion(self.major, self.minor)

    def __str__(self) -> str:
        return ".".join(map(str, self.release))


class DriverVersion(_Value):
    """An NVIDIA driver version as nvidia-smi prints it: `450.36.06`, `535.104.05`, `581.57`;
    also a branch (`R470`, `470`). Parts compare as numbers (`06` is 6); the text keeps
    the zero padding NVIDIA writes."""

    __slots__ = ("text", "parts")

    def __init__(self, text: str, parts: tuple[int, ...]):
        object.__setattr__(self, "text", text)
        object.__setattr__(self, "parts", parts)
        self._keyed(_padded(parts))

    @classmethod
    def parse(cls, text: str) -> DriverVersion:
        cleaned = str(text).strip()
        if cleaned[:1] in ("R", "r"):
            cleaned = cleaned[1:]
        found = _numbers(cleaned, (4, 3, 3))
        if found is None or found[0] < 10 or len(cleaned.split(".")[0]) < 2:
            raise ValueError(f"malformed driver version {text!r} (expected something like 535.104.05)")
        return cls(cleaned, found)

    def __str__(self) -> str:
        return self.text


class ComputeCapability(_Value):
    """A GPU's compute capability: `8.6`; also read from `sm_86`, `sm86`, `compute_86`,
    `sm_90a` (arch-specific) / `sm_100f` (family) and the number 86."""

    __slots__ = ("major", "minor")

    def __init__(self, major: int, minor: int):
        object.__setattr__(self, "major", major)
        object.__setattr__(self, "minor", minor)
        self._keyed((major, minor))

    @classmethod
    def parse(cls, text: str | int, digits_alone: bool = True) -> ComputeCapability:
        """`digits_alone=False` refuses a bare number ("86"), where text may be a GPU
        model's number instead ("3090", "970")."""
        raw = str(text).strip().lower()
        prefixed = raw.startswith(("sm", "compute_"))
        raw = raw.removeprefix("compute_").removeprefix("sm").removeprefix("_")
        raw = raw.rstrip("af")  # arch-specific (sm_90a) and family (sm_100f) suffixes
        found = _numbers(raw, (2, 1))
        if found is not None and len(found) == 2:
            return cls(*found)
        if raw.isascii() and raw.isdigit() and (prefixed or digits_alone) and len(raw) in (2, 3):
            return cls(int(raw[:-1]), int(raw[-1]))
        raise ValueError(f"malformed compute capability {text!r} (expected e.g. 8.6 or sm_86)")

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
    def linux(self) -> bool:
        return self in (Platform.LINUX_64, Platform.LINUX_AARCH64)

    @property
    def buildable(self) -> bool:
        """envbuild locks and builds images only for Linux; the others are checked only."""
        return self.linux


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
    NOT_LOCKABLE = "not_lockable"  # the lock proof found the build's pip requirement does not lock
    UNKNOWN_FACT = "unknown_fact"  # a conflict only with --strict: the matrix has no row to decide on
    GPU_MEMORY_INSUFFICIENT = "gpu_memory_insufficient"  # the target (or MIG slice) has less memory than asked
    # Kinds that are only ever warnings, after the conflicts:
    PTX_JIT = "ptx_jit"  # no binary for the GPU: the driver JIT-compiles the build's PTX
    MINOR_VERSION_COMPAT = "minor_version_compat"  # the driver runs the CUDA through minor-version compatibility
    IMAGE_BUILD = "image_build"  # a host request whose image could not be built as asked
    GPU_MEMORY_UNKNOWN = "gpu_memory_unknown"  # a fleet target that does not state its GPU memory

    @property
    def conflict(self) -> bool:
        """Can a problem of this kind be a conflict (not only a warning)?"""
        return self not in _WARNING_ONLY

    @classmethod
    def rank(cls, kind: str) -> int:
        """Sort key of a kind; a kind that is not a conflict kind sorts last."""
        return _KIND_RANK.get(kind, len(_KIND_RANK))


_WARNING_ONLY = frozenset({ConflictKind.PTX_JIT, ConflictKind.MINOR_VERSION_COMPAT, ConflictKind.IMAGE_BUILD,
                           ConflictKind.GPU_MEMORY_UNKNOWN})
_KIND_RANK = {k.value: i for i, k in enumerate(ConflictKind) if k.conflict}
