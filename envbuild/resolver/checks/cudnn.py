"""The cuDNN links: the cuDNN asked for against the one the build was compiled with (or
needs at least), and against the one a jaxlib label (`+cuda11.cudnn86`) names."""
from __future__ import annotations

from envbuild import frameworks
from envbuild.core.model import Fact
from envbuild.core.values import ConflictKind
from envbuild.core.versions import parse_version
from envbuild.frameworks.build import Build
from envbuild.resolver.context import fact
from envbuild.resolver.problem import Hints, Problem
from envbuild.resolver.request import Request


def cudnn(b: Build, req: Request) -> list[Problem]:
    if req.cudnn is None:
        return []
    want = req.cudnn
    if b.cudnn_min:
        low = parse_version(b.cudnn_min).release
        if tuple(want[:2]) < tuple(low[:2]):
            return [Problem(ConflictKind.CUDNN_MISMATCH,
                            f"{b.framework} {b.version} needs cuDNN >= {b.cudnn_min}; you asked for cuDNN "
                            f"{_text(want)}, so cuDNN must move up or {b.framework} down",
                            (fact(f"{b.framework} {b.version}: cudnn_min {b.cudnn_min}", b.row),),
                            framework=b.framework, hints=Hints(cudnn=b.cudnn_min))]
        return []
    if b.cudnn:
        built = parse_version(b.cudnn).release
        same_major = want[0] == built[0]
        minor_ok = len(want) < 2 or len(built) < 2 or want[1] >= built[1]
        if not (same_major and minor_ok):
            return [Problem(ConflictKind.CUDNN_MISMATCH,
                            f"{b.label} was compiled with cuDNN {b.cudnn} and loads only cuDNN {built[0]}.x with "
                            f"a minor >= {built[1] if len(built) > 1 else 0}; you asked for cuDNN "
                            f"{_text(want)}, so cuDNN or the {b.framework} build must move",
                            (fact(f"{b.label}: cudnn {b.cudnn}", b.row),), framework=b.framework,
                            hints=Hints(cudnn=b.cudnn))]
    return []


def label_cudnn(framework: str, req: Request, pin) -> list[Problem]:
    """jaxlib's `+cuda11.cudnn86` names the cuDNN the wheel was compiled with: the runtime
    cuDNN must be that major with a minor at least as new."""
    if pin is None or req.cudnn is None or not pin.text.startswith("+"):
        return []
    built = frameworks.read_label(pin.text[1:]).cudnn
    if built is None:
        return []
    b = parse_version(built).release
    want = tuple(req.cudnn)
    if want[0] == b[0] and want[1:2] >= b[1:2]:
        return []
    return [Problem(ConflictKind.CUDNN_MISMATCH,
                    f"the {framework} {pin.text} wheel was compiled with cuDNN {built} and loads only cuDNN {b[0]}.x "
                    f"with a minor >= {b[1] if len(b) > 1 else 0}; you asked for cuDNN {_text(want)}, so cuDNN or "
                    f"the wheel's cuDNN variant must move",
                    (Fact(f"the +{pin.text[1:]} label names cuDNN {built}", "the wheel's local version label"),),
                    framework=framework, hints=Hints(cudnn=built))]


def _text(release: tuple[int, ...]) -> str:
    return ".".join(map(str, release))
