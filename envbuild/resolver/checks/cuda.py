"""The CUDA links of a build: the variant the request pins, and the floor of the CUDA
libraries the build states."""
from __future__ import annotations

from envbuild.core.values import ConflictKind
from envbuild.frameworks.build import Build
from envbuild.resolver.context import fact
from envbuild.resolver.problem import Hints, Problem

# A build of another variant than the pinned one; `complete` words it once it knows the
# variants the release has (`_word_variant`): only the nearest build's is ever read.
OTHER_VARIANT = Hints(other_variant=True)


def cuda_variant(b: Build, pin) -> list[Problem]:
    if pin is None or pin.matches(b.cuda):
        return []
    if not (b.bundles_runtime or b.ranged) and pin.minor is not None and b.cuda_major >= 11 and pin.major == b.cuda_major:
        # The build loads the system CUDA, built for one minor: from 11.0 on every minor of
        # that major shares its sonames (TensorFlow 2.13, built for 11.8, runs on 11.7).
        return []
    return [Problem(ConflictKind.FRAMEWORK_CUDA_MISMATCH, "", framework=b.framework, hints=OTHER_VARIANT)]


def cuda_floor(b: Build) -> list[Problem]:
    """The CUDA libraries of the environment must be at least as new as the minor the
    build states as its floor (JAX checks cuSOLVER, cuFFT, cuBLAS, ... at start-up)."""
    if b.cuda_min is None or b.cuda >= b.cuda_min:
        return []
    return [Problem(ConflictKind.LIBRARY_ABI,
                    f"{b.framework} {b.version} ({b.variant}) needs the CUDA {b.cuda_major} libraries (cuSOLVER, "
                    f"cuSPARSE, cuFFT, ...) of {b.cuda_min} or newer (its stated floor; JAX checks the library "
                    f"versions when it starts); CUDA {b.cuda} is older, so CUDA must move to >= {b.cuda_min} (and no "
                    f"older CUDA on LD_LIBRARY_PATH may shadow the libraries pip installs)",
                    (fact(f"{b.framework} {b.version}: CUDA {b.cuda_major} floor {b.cuda_min}", b.row),),
                    framework=b.framework)]
