"""The grammar of each value that reaches a job definition, a script or a generated module.

One validator per kind of field, used at every door: the spec, the fleet file and the
`export` / `verify` flags call the same ones, so a value is checked once, where it enters,
by the rules of the system that will read it (Slurm, Kubernetes, AWS Batch, Docker,
Python). Each takes the value as read (text; a number or mapping where the field is one)
and `where` (file:line:col, or the flag), and returns the canonical value or raises one
`UserError` saying what is wrong, where, and how to fix it.

Lengths are checked before any pattern, and every pattern is applied with re.fullmatch
(`$` would let a final newline through), so no value is searched at length.
"""
from __future__ import annotations

import keyword
import re
import shlex
from typing import Any

from envbuild.infra.errors import UserError

MAX_TEXT = 256  # a name, a queue, a region: anything longer is a mistake
MAX_GPUS = 128  # GPUs one job asks for (one node; NVL72 racks have 72)
MIN_MEMORY_MIB = 4  # AWS Batch's floor, and far below any GPU job's need
MAX_MEMORY_MIB = 64 * 1024 * 1024  # 64 TiB of host memory
MAX_TIME_S = 365 * 86400


def control_character(text: str) -> str | None:
    """The first character of `text` that is not printable (newline, tab, NUL, ESC, U+2028
    ...), escaped for a message; None when there is none."""
    bad = next((c for c in text if not c.isprintable()), None)
    return None if bad is None else bad.encode("unicode_escape").decode()


def kind_of(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, (list, tuple)):
        return "a list"
    if value is None:
        return "empty (null)"
    return f"a {type(value).__name__}"


def shown(value: Any) -> str:
    """A value as a message shows it: short scalars as written, anything else by its kind."""
    if isinstance(value, (str, int, float)) and len(repr(value)) <= 40:
        return repr(value)
    return kind_of(value)


def text(value: Any, where: str, what: str, *, limit: int = MAX_TEXT) -> str:
    """One line of printable text, at most `limit` characters, not blank."""
    if not isinstance(value, str):
        raise UserError(f"{what} must be a string, not {kind_of(value)}", where=where, hint='quote it: "..."')
    if len(value) > limit:
        raise UserError(f"{what} is {len(value)} characters long", where=where, hint=f"at most {limit}")
    bad = control_character(value)
    if bad is not None:
        raise UserError(f"{what} holds the control character {bad}", where=where,
                        hint="remove it (names and values are single-line text)")
    if not value.strip():
        raise UserError(f"{what} is empty", where=where, hint="remove the key or give a value")
    return value


def _grammar(value: Any, where: str, what: str, pattern: str, hint: str, *, limit: int = MAX_TEXT) -> str:
    value = text(value, where, what, limit=limit)
    if not re.fullmatch(pattern, value):
        raise UserError(f"malformed {what} {value!r}", where=where, hint=hint)
    return value


def choice(value: Any, where: str, what: str, choices: tuple[str, ...], hint: str | None = None) -> str:
    value = text(value, where, what, limit=64)
    if value not in choices:
        raise UserError(f"unknown {what} {value!r}", where=where, hint=hint or f"one of: {', '.join(choices)}")
    return value


def count(value: Any, where: str, what: str, *, maximum: int) -> int:
    """A whole number from 1 to `maximum`: an int, or its ASCII digits (a flag, a YAML
    scalar as written). Not a boolean, a float, 1e23 or full-width digits."""
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 6:
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= maximum:
        raise UserError(f"{what} must be a whole number from 1 to {maximum}, not {shown(value)}", where=where)
    return value


def gpu_count(value: Any, where: str, what: str = "gpus") -> int:
    return count(value, where, what, maximum=MAX_GPUS)


# --- names ------------------------------------------------------------------------------------
DNS_LABEL = r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
_DNS_SUBDOMAIN = rf"{DNS_LABEL}(?:\.{DNS_LABEL})*"


def dns_label(value: Any, where: str, what: str) -> str:
    """A DNS-1123 label: Kubernetes names and namespaces, job names everywhere."""
    return _grammar(value, where, what, DNS_LABEL, "lowercase letters, digits and -, at most 63, "
                    "starting and ending with a letter or digit", limit=63)


def python_identifier(value: str, where: str, what: str, *, taken: tuple[str, ...] = ()) -> str:
    """A name a generated module defines: an ASCII identifier, not a keyword, and not one
    of the names the module itself uses (`taken`)."""
    if not (value.isascii() and value.isidentifier()) or keyword.iskeyword(value):
        raise UserError(f"{what} {value!r} is not a Python name", where=where,
                        hint="start with a letter; not a keyword like class or import")
    if value in taken:
        raise UserError(f"{what} {value!r} would hide the module's own {value}", where=where,
                        hint="choose another name")
    return value


# --- Slurm ------------------------------------------------------------------------------------
_SLURM_NAME = r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}"


def slurm_name(value: Any, where: str, what: str) -> str:
    """An account or QOS name as sacctmgr shows it."""
    return _grammar(value, where, what, _SLURM_NAME, "letters, digits, _ . - as `sacctmgr show` prints it")


def slurm_partitions(value: Any, where: str, what: str = "partition") -> str:
    """A partition, or a comma-separated list of them (sbatch takes either)."""
    return _grammar(value, where, what, rf"{_SLURM_NAME}(?:,{_SLURM_NAME})*",
                    "a partition name as sinfo prints it, or several separated by commas")


def gres_type(value: Any, where: str, what: str = "gres_type") -> str:
    """A GPU type of gres.conf (`Type=`): gives --gres=gpu:<type>:<n>."""
    return _grammar(value, where, what, r"[A-Za-z0-9_][A-Za-z0-9_.+-]{0,63}",
                    "the Type= of the node's gres.conf, e.g. a100 or 1g.10gb")


_TIME_HINT = ("a positive limit as sbatch --time reads it: minutes (90), minutes:seconds (30:00), "
              "hours:minutes:seconds (02:00:00), days-hours[:minutes[:seconds]] (1-12, 1-00:00:00)")


def slurm_time(value: Any, where: str, what: str = "time limit") -> int:
    """A time limit in seconds, read as sbatch --time reads it: `90` is 90 minutes, `30:00`
    30 minutes, `1:30:00` an hour and a half, `1-12` a day and a half. Zero (no limit to
    Slurm) and UNLIMITED are refused: Kubernetes and AWS Batch need a limit."""
    value = text(value, where, what, limit=32)
    days, sep, rest = value.partition("-")
    if not sep:
        days, rest = "0", value
    parts = rest.split(":")
    numbers = [days, *parts]
    if len(parts) > 3 or not all(p.isascii() and p.isdigit() and len(p) <= 6 for p in numbers):
        raise UserError(f"malformed {what} {value!r}", where=where, hint=_TIME_HINT)
    d, *rest_numbers = (int(p) for p in numbers)
    if sep:  # days-hours[:minutes[:seconds]]
        h, m, s = (rest_numbers + [0, 0])[:3]
        ok = h < 24 and m < 60 and s < 60
    elif len(parts) == 3:  # hours:minutes:seconds
        h, m, s = rest_numbers
        ok = m < 60 and s < 60
    else:  # minutes[:seconds]
        h, (m, s) = 0, (rest_numbers + [0])[:2]
        ok = len(parts) == 1 or s < 60
    if not ok:
        raise UserError(f"malformed {what} {value!r}: a field is out of range", where=where, hint=_TIME_HINT)
    seconds = ((d * 24 + h) * 60 + m) * 60 + s
    if not 0 < seconds <= MAX_TIME_S:
        raise UserError(f"{what} {value!r} must be more than zero and at most 365 days", where=where, hint=_TIME_HINT)
    return seconds


def slurm_time_text(seconds: int) -> str:
    """Seconds as sbatch's days-hours:minutes:seconds (or hours:minutes:seconds)."""
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    clock = f"{hours:02d}:{minutes:02d}:{secs:02d}"
    return f"{days}-{clock}" if days else clock


# --- memory -----------------------------------------------------------------------------------
_MEMORY = re.compile(r"(\d{1,9}) ?(?:([KMGT])(?:i?B)?)?", re.IGNORECASE)
_KIB = {"k": 1, "m": 1024, "g": 1024**2, "t": 1024**3}


def memory_mib(value: Any, where: str, what: str, *, bare_unit: str) -> int:
    """Host memory in MiB from `16G`, `16GiB`, `16GB`, `512M`, `1T` or a bare number in
    `bare_unit` (`M` where Slurm's --mem reads it, `G` for envbuild's --mem). Units are
    binary, as Slurm counts them; the size must be at least 4 MiB."""
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    value = text(value, where, what, limit=32)
    match = _MEMORY.fullmatch(value)
    if not match:
        raise UserError(f"malformed {what} {value!r}", where=where,
                        hint="a whole size with a unit: 16G, 512M, 1T (or 16GiB, 16GB)")
    unit = (match.group(2) or bare_unit).lower()
    mib = -(-int(match.group(1)) * _KIB[unit] // 1024)  # whole MiB, rounded up
    if not MIN_MEMORY_MIB <= mib <= MAX_MEMORY_MIB:
        raise UserError(f"{what} {value!r} is out of range", where=where, hint="from 4M to 64T")
    return mib


def memory_text(mib: int, *, binary_suffix: bool) -> str:
    """`16Gi` / `512Mi` (Kubernetes quantities) or `16G` / `512M` (Slurm)."""
    suffix = "i" if binary_suffix else ""
    return f"{mib // 1024}G{suffix}" if mib % 1024 == 0 else f"{mib}M{suffix}"


# --- GPUs -------------------------------------------------------------------------------------
# NVIDIA's MIG device names ("MIG Device Names", "Supported MIG Profiles" of the MIG user
# guide): [<c>c.]<g>g.<m>gb, with +me / +me.all / -me (media extensions) or +gfx.
_MIG = r"(?:\d{1,2}c\.)?\d{1,2}g\.\d{1,3}gb(?:\+me(?:\.all)?|-me|\+gfx)?"


def mig_profile(value: Any, where: str) -> str:
    """A MIG profile in NVIDIA's spelling: `1G.10GB`, `MIG 1g.10gb` and `mig-1g.10gb` are
    all `1g.10gb`."""
    value = text(value, where, "MIG profile", limit=40).strip()
    name = value.lower().removeprefix("mig ").removeprefix("mig-")
    if not re.fullmatch(_MIG, name):
        raise UserError(f"malformed MIG profile {value!r}", where=where,
                        hint="write it as NVIDIA names it: <slices>g.<memory>gb, e.g. 3g.40gb")
    return name


# --- image references -------------------------------------------------------------------------
# Docker's reference grammar (distribution/reference): [registry[:port]/]path[:tag][@digest].
# The first component is a registry only when it has a dot or a port or is localhost, as
# Docker reads it; path components are lowercase. Digests are lowercase hex, as registries
# write them.
_REGISTRY = r"(?:(?:localhost|[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+|\[[0-9A-Fa-f:]+\])(?::\d+)?|[A-Za-z0-9-]+:\d+)"
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_TAG = r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}"
_DIGEST = r"[a-z][a-z0-9]*(?:[-_+.][a-z][a-z0-9]*)*:[0-9a-f]{32,128}"
IMAGE_REF = (rf"(?P<name>(?:(?P<registry>{_REGISTRY})/)?(?P<path>{_COMPONENT}(?:/{_COMPONENT})*))"
             rf"(?::(?P<tag>{_TAG}))?(?:@(?P<digest>{_DIGEST}))?")
MAX_IMAGE_NAME = 255  # Docker's limit on a repository name


def image_ref(value: Any, where: str, *, tag: bool | None = None, what: str = "image reference") -> str:
    """An image reference by Docker's grammar. `tag=True`: it must name a tag or digest;
    `tag=False`: a repository, without either; None: either."""
    value = text(value, where, what, limit=MAX_IMAGE_NAME + 200)
    match = re.fullmatch(IMAGE_REF, value)
    if not match:
        raise UserError(f"malformed {what} {value!r}", where=where, hint="write e.g. nvidia/cuda:12.4.1-runtime-ubuntu22.04")
    if len(match.group("name")) > MAX_IMAGE_NAME:
        raise UserError(f"{what} names a repository of {len(match.group('name'))} characters", where=where,
                        hint=f"Docker allows at most {MAX_IMAGE_NAME}")
    has_tag = bool(match.group("tag") or match.group("digest"))
    if tag and not has_tag:
        raise UserError(f"image {value!r} has no tag", where=where, hint="name the tag, e.g. IMAGE:TAG, so builds repeat")
    if tag is False and has_tag:
        raise UserError(f"repository {value!r} must not carry a tag", where=where, hint="envbuild chooses the tag")
    return value


# --- Kubernetes -------------------------------------------------------------------------------
_LABEL_NAME = r"[A-Za-z0-9](?:[A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?"
LABEL_KEY = rf"(?:{_DNS_SUBDOMAIN}/)?{_LABEL_NAME}"
LABEL_VALUE = rf"(?:{_LABEL_NAME})?"
TOLERATION_KEYS = ("key", "operator", "value", "effect", "tolerationSeconds")
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def label_key(value: Any, where: str, what: str = "label key") -> str:
    value = text(value, where, what, limit=253 + 1 + 63)
    prefix, _, name = value.rpartition("/")
    if not re.fullmatch(LABEL_KEY, value) or len(prefix) > 253 or len(name) > 63:
        raise UserError(f"malformed {what} {value!r}", where=where,
                        hint="[prefix/]name: a DNS subdomain, then up to 63 letters, digits, - _ .")
    return value


def label_value(value: Any, where: str, what: str = "label value") -> str:
    if not isinstance(value, str):
        raise UserError(f"{what} must be one label value, not {kind_of(value)}", where=where,
                        hint="write a single value; a node selector matches one value per label")
    bad = control_character(value)
    if bad is not None or len(value) > 63 or not re.fullmatch(LABEL_VALUE, value):
        raise UserError(f"malformed {what} {value[:80]!r}", where=where,
                        hint="up to 63 letters, digits, - _ ., starting and ending with a letter or digit")
    return value


def node_selector(value: Any, where: str) -> dict[str, str]:
    """Node labels to match: a mapping of label key to one value (numbers and booleans as
    written in the file, e.g. `"true"`)."""
    if not isinstance(value, dict):
        raise UserError(f"node_selector must be a mapping of label to value, not {kind_of(value)}", where=where,
                        hint="write e.g. {nvidia.com/gpu.product: NVIDIA-A100-SXM4-80GB}")
    return {label_key(k, where, "node_selector label"): label_value(v, where, f"node_selector[{k!r}]")
            for k, v in value.items()}


def tolerations(value: Any, where: str) -> list[dict[str, Any]]:
    """Pod tolerations, as in a pod spec: a list of {key, operator, value, effect,
    tolerationSeconds} mappings, checked as the API server checks them."""
    if not isinstance(value, list):
        raise UserError(f"tolerations must be a list, not {kind_of(value)}", where=where,
                        hint="write e.g. [{key: dedicated, operator: Equal, value: gpu, effect: NoSchedule}]")
    out = []
    for i, item in enumerate(value):
        what = f"tolerations[{i}]"
        if not isinstance(item, dict):
            raise UserError(f"{what} must be a mapping, not {shown(item)}", where=where,
                            hint=f"keys: {', '.join(TOLERATION_KEYS)}")
        unknown = [k for k in item if k not in TOLERATION_KEYS]
        if unknown:
            raise UserError(f"unknown key {str(unknown[0])[:40]!r} in {what}", where=where, hint=f"keys: {', '.join(TOLERATION_KEYS)}")
        entry: dict[str, Any] = {}
        operator = choice(item.get("operator", "Equal"), where, f"{what}.operator", ("Exists", "Equal"))
        if item.get("key") not in (None, ""):
            entry["key"] = label_key(item["key"], where, f"{what}.key")
        elif operator != "Exists":
            raise UserError(f"{what} has no key", where=where, hint="an empty key needs operator: Exists")
        entry["operator"] = operator
        if item.get("value") not in (None, ""):
            if operator == "Exists":
                raise UserError(f"{what} has a value with operator Exists", where=where, hint="drop the value, or use Equal")
            entry["value"] = label_value(item["value"], where, f"{what}.value")
        if item.get("effect") not in (None, ""):
            entry["effect"] = choice(item["effect"], where, f"{what}.effect", TAINT_EFFECTS)
        if "tolerationSeconds" in item:
            if entry.get("effect") != "NoExecute":
                raise UserError(f"{what}.tolerationSeconds needs effect NoExecute", where=where)
            seconds = item["tolerationSeconds"]
            if isinstance(seconds, str) and seconds.isascii() and seconds.isdigit() and len(seconds) <= 9:
                seconds = int(seconds)
            if isinstance(seconds, bool) or not isinstance(seconds, int) or not 0 <= seconds <= 10**9:
                raise UserError(f"{what}.tolerationSeconds must be a whole number of seconds", where=where)
            entry["tolerationSeconds"] = seconds
        out.append(entry)
    return out


# --- AWS --------------------------------------------------------------------------------------
_AWS_NAME = r"[A-Za-z0-9_-]{1,128}"


def batch_queue(value: Any, where: str, what: str = "job queue") -> str:
    """An AWS Batch job queue: its name or its ARN."""
    return _grammar(value, where, what, rf"{_AWS_NAME}|arn:aws[a-z-]*:batch:[a-z0-9-]+:\d{{12}}:job-queue/{_AWS_NAME}",
                    "the queue's name (letters, digits, - _) or its ARN", limit=300)


def cloud_region(value: Any, where: str, what: str = "region") -> str:
    return _grammar(value, where, what, r"[a-z]{2,}(?:-[a-z0-9]+){1,3}", "a cloud region, e.g. us-east-1", limit=40)


def plain_name(value: Any, where: str, what: str) -> str:
    """A name other services define (a Coiled workspace, a Flyte project or domain)."""
    return _grammar(value, where, what, r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}", "letters, digits, - _ .")


# --- CI runners -------------------------------------------------------------------------------
MAX_RUNNER_LABELS = 16


def runner_labels(value: Any, where: str, what: str = "runner_labels") -> tuple[str, ...]:
    """The labels (GitHub Actions `runs-on`) or tags (GitLab CI `tags`) of the self-hosted
    CI runners that carry a target's GPU: a list of plain names, as both systems take them.
    The pipelines hold them as YAML strings, never inside a shell line."""
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value:
        raise UserError(f"{what} must be a list of runner labels, not {shown(value)}", where=where,
                        hint="write e.g. [self-hosted, linux, gpu-a100]")
    if len(value) > MAX_RUNNER_LABELS:
        raise UserError(f"{what} has {len(value)} labels", where=where, hint=f"at most {MAX_RUNNER_LABELS}")
    labels = tuple(_grammar(v, where, f"{what}[{i}]", r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}",
                            "letters, digits, - _ ., as the runner was registered with", limit=100)
                   for i, v in enumerate(value))
    return tuple(dict.fromkeys(labels))


# --- the workload -----------------------------------------------------------------------------
def command_argv(value: Any, where: str) -> tuple[str, ...]:
    """A command line split into its arguments as a POSIX shell splits it, without running
    a shell: each argument then reaches every job definition as one element."""
    value = text(value, where, "the command", limit=8192)
    try:
        argv = shlex.split(value)
    except ValueError as exc:  # shlex's words: "No closing quotation", "No escaped character"
        raise UserError(f"cannot split the command: {str(exc).lower()}", where=where,
                        hint="close the quote, as a shell would need; quote an argument that holds one, "
                             "e.g. --command \"echo 'a \\\"b'\"") from None
    if not argv:
        raise UserError("the command is empty", where=where, hint="give a program and its arguments")
    return tuple(argv)

