"""Does this environment really run on this GPU, and how well?

The probe runs inside an image (or on a host) with nothing but the Python standard
library plus whatever GPU libraries are installed there, and reports every check as
pass / fail / skip / warn with details and, when something is wrong, a one-line
likely cause and fix. It is one standalone file on purpose: envbuild copies it into
the container it verifies, and it also runs as `python -m envbuild.verify.probe`.
envbuild itself uses only the names listed in envbuild/verify/probe_api.py, and only
through that module: rename one of those and the host must follow; anything else here
may change freely.

    python3 probe.py [--json] [--static] [--no-perf] [--expect FILE]
                     [--expect-sm 80,90] [--expect-cuda 12.4] [--facts FILE]

Checks, in groups:
  env.*        NVIDIA_VISIBLE_DEVICES, NVIDIA_DRIVER_CAPABILITIES, CUDA_VISIBLE_DEVICES
  static.*     libraries present, CUDA labels/env consistent, CUDA headers for NVRTC,
               framework build's CUDA variant and compiled architectures (no GPU needed)
  gpu.*        nvidia-smi (or NVML), CUDA driver initialisation, driver vs image CUDA
  cupy.*       devices, elementwise kernel, reduction, RawKernel (NVRTC), cuBLAS, allocation
  perf.*       device-to-device copy bandwidth, GEMM fp32/tf32/bf16 against the GPU's peak
  torch.* tensorflow.* jax.* cudf.*   the frameworks that are installed

Each framework (and the performance measurement) runs in a child process, so that a
library that crashes or grabs all GPU memory cannot take the report down with it.
Facts the probe cannot know by itself (peak figures, minor-version driver floors) come
from `--facts` / ENVBUILD_PROBE_INPUT (the runner passes them from envbuild's matrices)
or, when the probe sits inside an envbuild checkout and PyYAML is importable, from the
bundled `matrices/`. Keep this file importable on Python 3.6: old CUDA images ship it.
"""
import argparse
import ctypes
import importlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time

PROBE_VERSION = 1
STATUSES = ("pass", "fail", "skip", "warn")
NO_GPU = "no GPU visible"
PERF_WARN_FRACTION = 0.5  # below half of the published peak: warn (never fail: clouds throttle)
CHILD_TIMEOUT_S = 240
SMI_FIELDS = ("index", "name", "uuid", "driver_version", "memory.total", "compute_cap", "pci.bus_id")
GROUP_MODULES = (("cupy", "cupy"), ("torch", "torch"), ("tensorflow", "tensorflow"), ("jax", "jax"), ("cudf", "cudf"))


# --- results -------------------------------------------------------------------------------
_CLOCK = [time.monotonic()]  # when the previous check of this process was judged


def check(name, status, details="", cause=None, fix=None, required=True, data=None):
    """One check result: the unit of the JSON report and of the JUnit file. `time_s` is
    the time since the previous check of the same process, i.e. the work this one judged."""
    assert status in STATUSES, status
    now = time.monotonic()
    result = {"name": name, "status": status, "required": bool(required), "details": details,
              "cause": cause, "fix": fix, "time_s": round(now - _CLOCK[0], 3)}
    _CLOCK[0] = now
    if data:
        result["data"] = data
    return result


def failed_from_error(name, exc_text, what, required=True, context=None):
    """A failed check whose cause and fix come from a recognised failure signature."""
    sig = recognise_failure(exc_text, context)
    first = first_line(exc_text)
    if sig:
        return check(name, "fail", "%s: %s" % (what, first), "%s (%s)" % (sig["cause"], sig["name"]),
                     sig["fix"], required, {"signature": sig["name"], "code": sig["code"]})
    return check(name, "fail", "%s: %s" % (what, first), "unrecognised error", "see details", required)


def first_line(text, limit=300):
    """The line of an error's text that says what went wrong, at most `limit` characters."""
    lines = [ln.strip() for ln in str(text).strip().splitlines() if ln.strip()]
    # CuPy's NVRTC errors put the useful line ("cannot open source file ...") last
    interesting = [ln for ln in lines if re.search(r"error|cannot|failed|not", ln, re.I)]
    line = (interesting[-1] if interesting else (lines[-1] if lines else "")) if len(lines) > 1 else (lines[0] if lines else "")
    return line[:limit]


# --- known failure signatures ----------------------------------------------------------------
# (name, CUDA error code or None, patterns, cause, fix). The fix may name {cuda} and {flavour}.
SIGNATURES = (
    ("insufficient_driver", 35,
     (r"cudaErrorInsufficientDriver", r"CUDA_ERROR_INSUFFICIENT_DRIVER",
      r"driver version is insufficient for CUDA runtime version", r"NVIDIA driver on your system is too old"),
     "the host's NVIDIA driver is older than the CUDA runtime in the image",
     "upgrade the host driver to one that supports CUDA {cuda}, or use an image built for an older CUDA"),
    ("no_kernel_image", 209,
     (r"cudaErrorNoKernelImageForDevice", r"CUDA_ERROR_NO_BINARY_FOR_GPU",
      r"no kernel image is available for execution on the device"),
     "the library was not compiled for this GPU's architecture and has no usable PTX",
     "install a build whose compiled architectures include this GPU (or newer PTX), or target this GPU when resolving"),
    ("unsupported_ptx", 222,
     (r"cudaErrorUnsupportedPtxVersion", r"CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
      r"PTX was compiled with an unsupported toolchain"),
     "PTX produced by a newer toolchain (NVRTC/nvcc) than the host driver can JIT-compile",
     "upgrade the host driver, or pin the NVRTC/CUDA runtime packages to the CUDA the driver supports"),
    ("compat_not_supported", 804,
     (r"cudaErrorCompatNotSupportedOnDevice", r"CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE",
      r"forward compatibility was attempted on non supported HW"),
     "the image uses CUDA forward compatibility (cuda-compat), which works only on data-center GPUs",
     "upgrade the host driver to one that supports CUDA {cuda} natively, or use an image for an older CUDA"),
    ("system_driver_mismatch", 803,
     (r"cudaErrorSystemDriverMismatch", r"CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
      r"system has unsupported display driver / cuda driver combination"),
     "the CUDA user-space driver (libcuda) does not match the kernel driver",
     "remove a libcuda.so copied into the image (or a stale cuda-compat) so the host's driver libraries are used"),
    ("nvrtc_headers_missing", None,
     (r"cannot open source file \"?(vector_types|cuda_fp16|cuda_runtime|cuda_bf16)\.h",
      r"could not open source file \"?(vector_types|cuda_fp16)\.h"),
     "NVRTC could not find the CUDA runtime headers, which CuPy kernels need on CUDA >= 12.2",
     "use the devel image flavour, or add the headers (apt cuda-cudart-dev-{cuda_dash}, pip nvidia-cuda-runtime-cu{major}, conda cuda-cudart-dev)"),
    ("nvrtc_missing", None,
     (r"libnvrtc[^\s:]*: cannot open shared object file", r"failed to load libnvrtc", r"CuPy failed to load libnvrtc",
      r"libnvrtc.*(not found|No such file)"),
     "the NVRTC runtime compiler library (libnvrtc) is not in the image",
     "use the runtime or devel image flavour (base has no NVRTC), or install nvidia-cuda-nvrtc-cu{major} / cuda-nvrtc"),
    ("cublas_missing", None,
     (r"libcublas[^\s:]*: cannot open shared object file", r"failed to load libcublas", r"CuPy failed to load libcublas"),
     "the cuBLAS library is not in the image",
     "use the runtime or devel image flavour (base has no cuBLAS), or install nvidia-cublas-cu{major} / libcublas"),
    ("driver_library_missing", None,
     (r"libcuda\.so[^\s:]*: cannot open shared object file", r"CUDA driver library (is )?not found",
      r"libnvidia-ml\.so[^\s:]*: cannot open", r"Found no NVIDIA driver on your system"),
     "the NVIDIA driver libraries are not mounted into the container",
     "run with a GPU (docker --gpus all, or CDI --device nvidia.com/gpu=all) and NVIDIA_DRIVER_CAPABILITIES=compute,utility"),
    ("kernel_cache_unwritable", None,
     (r"PermissionError.*(\.cupy|kernel_cache)", r"Permission denied.*(\.cupy|kernel_cache)"),
     "CuPy cannot write its kernel cache (HOME not writable for this user)",
     "set CUPY_CACHE_DIR to a writable folder, or CUPY_CACHE_IN_MEMORY=1"),
    ("no_device", 100,
     (r"cudaErrorNoDevice", r"CUDA_ERROR_NO_DEVICE", r"no CUDA-capable device is detected", r"No devices were found",
      r"ErrorNoDevice"),
     "no GPU is visible to CUDA", "run with a GPU (docker --gpus all) and check CUDA_VISIBLE_DEVICES / NVIDIA_VISIBLE_DEVICES"),
    ("out_of_memory", 2,
     (r"cudaErrorMemoryAllocation", r"CUDA_ERROR_OUT_OF_MEMORY", r"out of memory", r"OutOfMemoryError"),
     "the GPU ran out of memory (another process, or a framework that pre-allocates, holds it)",
     "free the GPU, or set XLA_PYTHON_CLIENT_PREALLOCATE=false / TF_FORCE_GPU_ALLOW_GROWTH=true"),
    ("arch_not_in_build", None,
     (r"with CUDA capability sm_\d+ is not compatible with the current PyTorch installation",),
     "the framework build has no kernels for this GPU's architecture",
     "install a build whose compiled architectures include this GPU (see `envbuild resolve` with this GPU as target)"),
    ("requirement_unsatisfied", None,
     (r"unsatisfied condition: cuda>=",),
     "the container runtime refused to start the image: the host driver is older than the image's NVIDIA_REQUIRE_CUDA",
     "upgrade the host driver, or build the image for an older CUDA"),
    ("no_gpu_runtime", None,
     (r"could not select device driver \"\" with capabilities: \[\[gpu\]\]", r"unknown or invalid runtime name: nvidia"),
     "Docker has no NVIDIA container runtime (or CDI) to give the container a GPU",
     "install the NVIDIA Container Toolkit and run `nvidia-ctk runtime configure --runtime=docker` (or generate a CDI spec)"),
)


def recognise_failure(text, context=None):
    """Name the known failure in an error text: {name, code, cause, fix} or None."""
    text = str(text or "")
    context = context or {}
    cuda = context.get("cuda") or "the image's CUDA"
    major = cuda.split(".")[0] if cuda[:1].isdigit() else "XX"
    cuda_dash = "-".join(cuda.split(".")[:2]) if cuda[:1].isdigit() else "X-Y"
    for name, code, patterns, cause, fix in SIGNATURES:
        if any(re.search(p, text, re.I) for p in patterns):
            return {"name": name, "code": code, "cause": cause,
                    "fix": fix.format(cuda=cuda, major=major, cuda_dash=cuda_dash)}
    code = re.search(r"(?:error|code|returned)(?:\s+code)?[ :=(]+(\d{2,3})\b", text, re.I)
    if code:
        for name, number, _, cause, fix in SIGNATURES:
            if number == int(code.group(1)):
                return {"name": name, "code": number, "cause": cause,
                        "fix": fix.format(cuda=cuda, major=major, cuda_dash=cuda_dash)}
    return None


# --- versions ---------------------------------------------------------------------------------
def version_tuple(text):
    """'12.4.1' -> (12, 4, 1); '535.104.05' -> (535, 104, 5); None/garbage -> None."""
    if text is None:
        return None
    parts = re.findall(r"\d+", str(text).split("+")[0])
    return tuple(int(p) for p in parts) if parts else None


def major_minor(text):
    v = version_tuple(text)
    if not v:
        return None
    return "%d.%d" % (v[0], v[1] if len(v) > 1 else 0)


def cuda_from_int(value):
    """CUDA's integer encoding (1000*major + 10*minor) -> '12.4'."""
    try:
        value = int(value)
    except (TypeError, ValueError):
        return None
    if value <= 0:
        return None
    return "%d.%d" % (value // 1000, (value % 1000) // 10)


def parse_require_cuda(value):
    """NVIDIA_REQUIRE_CUDA ('cuda>=12.4 brand=tesla,driver>=470,driver<471 ...'): the
    minimum CUDA of its first `cuda>=` constraint, and the forward-compatibility driver
    branches it allows (spaces OR the clauses, commas AND within one)."""
    if not value:
        return None, []
    cuda = None
    branches = []
    for clause in value.split():
        for term in clause.split(","):
            m = re.match(r"cuda>=\s*([\d.]+)$", term.strip())
            if m and cuda is None:
                cuda = major_minor(m.group(1))
            m = re.match(r"driver>=\s*(\d+)", term.strip())
            if m and "brand=" in clause:
                branches.append(int(m.group(1)))
    return cuda, sorted(set(branches))


# --- nvidia-smi -----------------------------------------------------------------------------
def smi_invalid_field(output):
    """The field an older nvidia-smi rejected ('Field "compute_cap" is not a valid field to query.')."""
    m = re.search(r'Field "([^"]+)" is not a valid field to query', output or "")
    return m.group(1) if m else None


def parse_smi_csv(text, fields=SMI_FIELDS):
    """Rows of `nvidia-smi --query-gpu=... --format=csv,noheader,nounits` as dicts with
    typed values: index int, memory_mib int, compute_capability '9.0' or None."""
    gpus = []
    for line in (text or "").splitlines():
        if not line.strip():
            continue
        values = [v.strip() for v in line.split(",")]
        if len(values) != len(fields):
            raise ValueError("unexpected nvidia-smi line (%d values for %d fields): %r" % (len(values), len(fields), line))
        row = dict(zip(fields, values))
        unknown = ("[N/A]", "N/A", "[Not Supported]", "")
        cc = row.get("compute_cap")
        mem = row.get("memory.total")
        gpus.append({
            "index": int(row["index"]) if row.get("index", "").isdigit() else len(gpus),
            "name": row.get("name"),
            "uuid": row.get("uuid") if row.get("uuid") not in unknown else None,
            "driver": row.get("driver_version") if row.get("driver_version") not in unknown else None,
            "memory_mib": int(float(mem)) if mem not in unknown and mem is not None else None,
            "compute_capability": cc if cc not in unknown and cc is not None else None,
            "pci_bus_id": row.get("pci.bus_id") if row.get("pci.bus_id") not in unknown else None,
        })
    return gpus


def parse_smi_header(text):
    """Driver version and the newest CUDA the driver supports, from plain `nvidia-smi`
    ('Driver Version: 535.104.05   CUDA Version: 12.2') or `nvidia-smi -q`."""
    driver = re.search(r"Driver Version\s*:\s*([\d.]+)", text or "")
    cuda = re.search(r"CUDA Version\s*:\s*([\d.]+)", text or "")
    return {"driver": driver.group(1) if driver else None, "max_cuda": cuda.group(1) if cuda else None}


def _run(cmd, timeout=30):
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=timeout)
    return proc.returncode, proc.stdout, proc.stderr


def query_nvidia_smi(run=_run, binary=None):
    """Driver, max CUDA and GPUs from nvidia-smi. Falls back to a query without
    compute_cap on drivers that lack the field, and to NVML for what is missing.
    Returns {"ok", "driver", "max_cuda", "gpus", "error", "source", "missing_fields"}."""
    binary = binary or shutil.which("nvidia-smi")
    info = {"ok": False, "driver": None, "max_cuda": None, "gpus": [], "error": None, "source": "nvidia-smi",
            "missing_fields": []}
    if not binary:
        info["error"] = "nvidia-smi not found"
        return info
    fields = list(SMI_FIELDS)
    try:
        for _ in range(3):
            rc, out, err = run([binary, "--query-gpu=" + ",".join(fields), "--format=csv,noheader,nounits"])
            bad = smi_invalid_field(out + err)
            if rc != 0 and bad and bad in fields and bad != "index":
                fields.remove(bad)
                info["missing_fields"].append(bad)
                continue
            break
        if rc != 0:
            info["error"] = first_line(out + err) or ("nvidia-smi exited with %d" % rc)
            info["exit_code"] = rc
            return info
        info["gpus"] = parse_smi_csv(out, fields)
        rc, out, err = run([binary])
        header = parse_smi_header(out)
        info["driver"] = header["driver"] or (info["gpus"][0]["driver"] if info["gpus"] else None)
        info["max_cuda"] = header["max_cuda"]
        info["ok"] = bool(info["gpus"])
        if not info["gpus"]:
            info["error"] = "nvidia-smi lists no GPU"
    except (OSError, subprocess.SubprocessError, ValueError) as exc:
        info["error"] = "%s: %s" % (type(exc).__name__, exc)
    return info


# --- NVML through ctypes (no pynvml needed) ---------------------------------------------------
class _NvmlMemory(ctypes.Structure):
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]


def query_nvml(library="libnvidia-ml.so.1"):
    """The same facts as query_nvidia_smi, read from NVML, which is backwards compatible
    where nvidia-smi's output is not (and knows compute capability on old drivers)."""
    info = {"ok": False, "driver": None, "max_cuda": None, "gpus": [], "error": None, "source": "nvml"}
    try:
        nvml = ctypes.CDLL(library)
    except OSError as exc:
        info["error"] = str(exc)
        return info
    init = getattr(nvml, "nvmlInit_v2", None) or nvml.nvmlInit
    rc = init()
    if rc != 0:
        info["error"] = "nvmlInit failed with NVML error %d" % rc
        return info
    try:
        buf = ctypes.create_string_buffer(96)
        if nvml.nvmlSystemGetDriverVersion(buf, 96) == 0:
            info["driver"] = buf.value.decode()
        value = ctypes.c_int()
        get_cuda = getattr(nvml, "nvmlSystemGetCudaDriverVersion_v2", None) or nvml.nvmlSystemGetCudaDriverVersion
        if get_cuda(ctypes.byref(value)) == 0:
            info["max_cuda"] = cuda_from_int(value.value)
        count = ctypes.c_uint()
        get_count = getattr(nvml, "nvmlDeviceGetCount_v2", None) or nvml.nvmlDeviceGetCount
        if get_count(ctypes.byref(count)) != 0:
            info["error"] = "nvmlDeviceGetCount failed"
            return info
        get_handle = getattr(nvml, "nvmlDeviceGetHandleByIndex_v2", None) or nvml.nvmlDeviceGetHandleByIndex
        for i in range(count.value):
            handle = ctypes.c_void_p()
            if get_handle(i, ctypes.byref(handle)) != 0:
                continue
            gpu = {"index": i, "name": None, "uuid": None, "driver": info["driver"], "memory_mib": None,
                   "compute_capability": None, "pci_bus_id": None}
            if nvml.nvmlDeviceGetName(handle, buf, 96) == 0:
                gpu["name"] = buf.value.decode()
            if nvml.nvmlDeviceGetUUID(handle, buf, 96) == 0:
                gpu["uuid"] = buf.value.decode()
            mem = _NvmlMemory()
            if nvml.nvmlDeviceGetMemoryInfo(handle, ctypes.byref(mem)) == 0:
                gpu["memory_mib"] = int(mem.total // (1024 * 1024))
            major, minor = ctypes.c_int(), ctypes.c_int()
            if nvml.nvmlDeviceGetCudaComputeCapability(handle, ctypes.byref(major), ctypes.byref(minor)) == 0:
                gpu["compute_capability"] = "%d.%d" % (major.value, minor.value)
            info["gpus"].append(gpu)
        info["ok"] = bool(info["gpus"])
        if not info["gpus"]:
            info["error"] = "NVML lists no GPU"
    finally:
        nvml.nvmlShutdown()
    return info


def query_gpus(run=_run):
    """nvidia-smi first (what users know), NVML to fill in what it lacks or when it is absent."""
    smi = query_nvidia_smi(run)
    if smi["ok"] and all(g["compute_capability"] for g in smi["gpus"]) and smi["max_cuda"]:
        return smi
    nvml = query_nvml()
    if smi["ok"] and nvml["ok"]:
        by_uuid = {g["uuid"]: g for g in nvml["gpus"]}
        for i, gpu in enumerate(smi["gpus"]):
            other = by_uuid.get(gpu["uuid"]) or (nvml["gpus"][i] if i < len(nvml["gpus"]) else {})
            gpu["compute_capability"] = gpu["compute_capability"] or other.get("compute_capability")
        smi["max_cuda"] = smi["max_cuda"] or nvml["max_cuda"]
        smi["source"] = "nvidia-smi+nvml"
        return smi
    if not smi["ok"] and nvml["ok"]:
        nvml["smi_error"] = smi["error"]
        return nvml
    smi["nvml_error"] = nvml["error"]
    return smi


# --- CUDA driver API through ctypes -----------------------------------------------------------
def cuda_driver_init(library="libcuda.so.1"):
    """cuInit + cuDeviceGetCount + cuDriverGetVersion without any Python GPU library:
    this is where 35 / 100 / 803 / 804 show up first."""
    try:
        cuda = ctypes.CDLL(library)
    except OSError as exc:
        return {"ok": False, "code": None, "error": "%s" % exc}
    version = ctypes.c_int()
    cuda.cuDriverGetVersion(ctypes.byref(version))
    rc = cuda.cuInit(0)
    result = {"ok": rc == 0, "code": rc, "driver_cuda": cuda_from_int(version.value), "error": None, "devices": 0}
    if rc != 0:
        name = ctypes.c_char_p()
        if cuda.cuGetErrorName(rc, ctypes.byref(name)) == 0 and name.value:
            result["error"] = "%s (%d)" % (name.value.decode(), rc)
        else:
            result["error"] = "cuInit returned %d" % rc
        return result
    count = ctypes.c_int()
    cuda.cuDeviceGetCount(ctypes.byref(count))
    result["devices"] = count.value
    result["ok"] = count.value > 0
    if count.value == 0:
        result["error"] = "CUDA_ERROR_NO_DEVICE: no CUDA-capable device is detected"
    return result


# --- driver vs the image's CUDA ---------------------------------------------------------------
def judge_driver_cuda(image_cuda, driver, driver_max_cuda, floors=None, compat_driver=None, datacenter=None):
    """Can a driver that supports CUDA `driver_max_cuda` run CUDA `image_cuda`?
    `floors` maps a CUDA major ('12') to the minimum driver of its minor-version
    compatibility; `compat_driver` is the CUDA of a cuda-compat (forward compatibility)
    package in the image. Returns (status, details, cause, fix)."""
    image = version_tuple(major_minor(image_cuda)) if image_cuda else None
    have = version_tuple(major_minor(driver_max_cuda)) if driver_max_cuda else None
    if not image:
        return "skip", "the image's CUDA is unknown (no label, NVIDIA_REQUIRE_CUDA or CUDA_VERSION)", None, None
    if not have:
        return "fail", NO_GPU + ": the driver's CUDA version could not be read", "no NVIDIA driver visible", \
            "run with a GPU (docker --gpus all) and NVIDIA_DRIVER_CAPABILITIES including utility"
    said = "driver %s supports CUDA up to %d.%d; the image needs CUDA %d.%d" % (driver or "?", have[0], have[1], image[0], image[1])
    if have >= image:
        return "pass", said, None, None
    floor = (floors or {}).get(str(image[0]))
    fix = "upgrade the host driver to one that supports CUDA %d.%d, or build the image for CUDA <= %d.%d" % (
        image[0], image[1], have[0], have[1])
    if have[0] == image[0] and image[0] >= 11:
        if floor and driver and version_tuple(driver) < version_tuple(floor):
            return "fail", said + "; minor-version compatibility needs driver >= %s" % floor, \
                "insufficient driver (error 35)", fix
        note = " (floor %s)" % floor if floor else ""
        return "warn", said + "; runs through minor-version compatibility%s: no PTX JIT of newer code, " \
            "no features of the newer minor" % note, "driver older than the image's CUDA minor", fix
    if compat_driver and version_tuple(major_minor(compat_driver)) >= image:
        if datacenter is False:
            return "fail", said + "; the image's cuda-compat package works only on data-center GPUs", \
                "forward compatibility unsupported on this GPU (error 804)", fix
        return "warn", said + "; relies on forward compatibility (cuda-compat %s), data-center GPUs only" % compat_driver, \
            "driver older than the image's CUDA", fix
    return "fail", said, "insufficient driver (error 35)", fix


def compat_package_cuda():
    """CUDA version of a forward-compatibility libcuda shipped in the image, if any."""
    for root in ("/usr/local/cuda/compat",) + tuple("/usr/local/cuda-%s/compat" % v for v in _cuda_dirs()):
        try:
            names = os.listdir(root)
        except OSError:
            continue
        if any(n.startswith("libcuda.so") for n in names):
            m = re.search(r"cuda-(\d+\.\d+)", os.path.realpath(root))
            return m.group(1) if m else "present"
    return None


def _cuda_dirs():
    try:
        return [n[5:] for n in os.listdir("/usr/local") if re.match(r"cuda-\d+\.\d+$", n)]
    except OSError:
        return []


# --- compiled architectures -------------------------------------------------------------------
def sm_of(cc):
    """'8.6' / '86' / 'sm_86' -> 86 (as int); None when unreadable."""
    text = str(cc).lower().replace("sm_", "").replace("compute_", "")
    if "." in text:
        major, minor = text.split(".", 1)
        return int(major) * 10 + int(re.sub(r"\D.*", "", minor) or 0) if major.isdigit() else None
    digits = re.sub(r"[a-z]+$", "", text)
    return int(digits) if digits.isdigit() else None


def judge_archs(arch_list, target_sm):
    """Does a build compiled for `arch_list` ('sm_80', 'compute_90', ...) run on a GPU of
    compute capability `target_sm` (86)? SASS runs on the same major at an equal or
    higher minor; PTX is JIT-compiled on equal or newer GPUs (slow first start).
    Returns (status, how): pass 'sass sm_86' / warn 'ptx compute_80' / fail 'none'."""
    sass = sorted(s for s in (sm_of(a) for a in arch_list if a.lower().startswith("sm_")) if s)
    ptx = sorted(s for s in (sm_of(a) for a in arch_list if a.lower().startswith("compute_")) if s)
    if target_sm in sass:
        return "pass", "sass sm_%d" % target_sm
    same_major = [s for s in sass if s // 10 == target_sm // 10 and s <= target_sm]
    if same_major:
        return "pass", "sass sm_%d (binary compatible within the major)" % same_major[-1]
    usable_ptx = [p for p in ptx if p <= target_sm]
    if usable_ptx:
        return "warn", "ptx compute_%d (JIT-compiled at first use: slow start, possibly slower kernels)" % usable_ptx[-1]
    return "fail", "none"


def tf_arch_list(caps):
    """TensorFlow's build_info names `compute_80` for SASS *and* PTX of 8.0 (its .bazelrc
    convention), unlike torch's `compute_80` = PTX only: spell both out for judge_archs."""
    out = []
    for cap in caps:
        cap = str(cap).strip()
        if cap.lower().startswith("compute_"):
            out.append("sm_" + cap[len("compute_"):])
        out.append(cap)
    return out


# --- peaks ------------------------------------------------------------------------------------
def _norm_name(name):
    text = re.sub(r"[^a-z0-9]+", " ", str(name).lower())
    text = re.sub(r"\b(nvidia|tesla|geforce)\b", " ", text)
    return " ".join(text.split())


def find_peak(gpu_name, peaks):
    """The peak row for a GPU as nvidia-smi names it ('NVIDIA H100 80GB HBM3'): exact
    match of the normalised name against each row's gpu name and aliases."""
    wanted = _norm_name(gpu_name)
    for row in peaks or ():
        names = [row.get("gpu")] + list(row.get("names") or ())
        if wanted in (_norm_name(n) for n in names if n):
            return row
    # "NVIDIA H100 NVL" -> the "NVIDIA H100" row: the device's words start with the row's
    tokens = wanted.split()
    for row in peaks or ():
        model = _norm_name(row.get("gpu") or "").split()
        if model and tokens[:len(model)] == model:
            return row
    return None


def judge_perf(measured, peak, unit, what):
    """Measured value against the published peak: pass at or above half, warn below."""
    if measured is None:
        return "skip", "%s: not measured" % what, None, None
    if not peak:
        return "pass", "%s: %.1f %s (no published peak for this GPU; fraction not judged)" % (what, measured, unit), None, None
    frac = measured / peak
    details = "%s: %.1f %s = %.0f%% of the %.1f %s peak" % (what, measured, unit, 100 * frac, peak, unit)
    if frac < PERF_WARN_FRACTION:
        return "warn", details, "below %d%% of peak: throttled/shared GPU, low clocks or a slow code path" % (
            100 * PERF_WARN_FRACTION), "check `nvidia-smi -q -d CLOCK,PERFORMANCE` and other processes on the GPU"
    return "pass", details, None, None


# --- inputs: expectations, facts, labels ------------------------------------------------------
LABEL_PREFIXES = ("org.envbuild.", "io.envbuild.", "dev.envbuild.", "envbuild.")


def label_value(labels, key):
    for prefix in LABEL_PREFIXES:
        if prefix + key in (labels or {}):
            return labels[prefix + key]
    return None


def image_cuda_sources(labels, environ):
    """Every place the image states its CUDA: {source: 'major.minor'}."""
    found = {}
    label = label_value(labels, "cuda")
    if label:
        found["label"] = major_minor(label)
    req, _ = parse_require_cuda(environ.get("NVIDIA_REQUIRE_CUDA"))
    if req:
        found["NVIDIA_REQUIRE_CUDA"] = req
    if environ.get("CUDA_VERSION"):
        found["CUDA_VERSION"] = major_minor(environ["CUDA_VERSION"])
    return found


def expect_from_labels(labels):
    """Expectations written by envbuild into the image's labels: target GPUs
    ('NVIDIA A100=8.0,8.6') and frameworks ('pytorch==2.1.2+cuda12.1 cupy==13.0.0+cuda12.2')."""
    expect = {}
    gpus = label_value(labels, "gpus")
    if gpus:
        ccs = [item.rsplit("=", 1)[-1].strip() for item in gpus.split(",") if item.strip()]
        expect["sms"] = sorted(set(str(sm_of(cc)) for cc in ccs if sm_of(cc)), key=int)
    frameworks = label_value(labels, "frameworks")
    if frameworks:
        expect["frameworks"] = {}
        for item in frameworks.split():
            m = re.match(r"([A-Za-z0-9_.-]+)==([^+\s]+)(?:\+cuda([\d.]+))?$", item)
            if m:
                expect["frameworks"][m.group(1)] = {"version": m.group(2), "cuda": m.group(3)}
    return expect


def _read_json_arg(value):
    """A JSON document given inline, as @FILE or as a path."""
    if value is None:
        return None
    text = value
    if value.startswith("@") or os.path.exists(value):
        with open(value.lstrip("@")) as fh:
            text = fh.read()
    return json.loads(text)


def bundled_facts():
    """Peaks, GPU aliases, minor-version floors from envbuild's matrices, when this file
    sits in an envbuild checkout or install (as envbuild/verify/probe.py) and PyYAML is
    importable; else {}."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for folder in (os.path.join(package, "data", "matrices"), os.path.join(os.path.dirname(package), "matrices")):
        if os.path.exists(os.path.join(folder, "gpu_peak.yaml")):
            try:
                import yaml
            except ImportError:
                return {}
            return facts_from_matrices(folder, yaml.safe_load)
    return {}


def facts_from_matrices(folder, load):
    def read(name, key):
        try:
            with open(os.path.join(folder, name)) as fh:
                return (load(fh) or {}).get(key) or []
        except (OSError, ValueError):
            return []

    gpus = {g.get("name"): g for g in read("gpus.yaml", "gpus")}
    peaks = []
    for row in read("gpu_peak.yaml", "peaks"):
        gpu = gpus.get(row.get("gpu")) or {}
        peaks.append(dict(row, names=list(gpu.get("aliases") or ())))
    floors = {str(r.get("major")): r.get("floor_linux") for r in read("cuda_driver.yaml", "minor_version_compatibility")
              if r.get("floor_linux")}
    datacenter = [name for name, g in gpus.items() if g.get("datacenter")]
    aliases = {name: list(g.get("aliases") or ()) for name, g in gpus.items()}
    return {"peaks": peaks, "minor_compat_floors": floors, "datacenter_gpus": datacenter, "gpu_aliases": aliases}


def load_inputs(args):
    """Expectations, facts and image labels from the command line and ENVBUILD_PROBE_INPUT."""
    data = {}
    env_input = os.environ.get("ENVBUILD_PROBE_INPUT")
    if env_input:
        data = _read_json_arg(env_input) or {}
    labels = dict(data.get("labels") or {})
    labels.update(_read_json_arg(args.labels) or {})
    expect = expect_from_labels(labels)
    expect.update(data.get("expect") or {})
    expect.update(_read_json_arg(args.expect) or {})
    if args.expect_sm:
        expect["sms"] = [s.strip() for s in args.expect_sm.split(",") if s.strip()]
    if args.expect_cuda:
        expect["cuda"] = args.expect_cuda
    facts = data.get("facts") or _read_json_arg(args.facts) or bundled_facts()
    return {"expect": expect, "facts": facts, "labels": labels}


# --- environment and static checks (no GPU needed) ---------------------------------------------
def env_checks(environ):
    checks = []
    value = environ.get("NVIDIA_VISIBLE_DEVICES")
    if value is None:
        checks.append(check("env.NVIDIA_VISIBLE_DEVICES", "pass", "not set: the container runtime decides "
                            "(docker --gpus / CDI set it at run time)", required=False))
    elif value.strip().lower() in ("", "void", "none"):
        checks.append(check("env.NVIDIA_VISIBLE_DEVICES", "warn", "%r: the NVIDIA runtime passes no GPU" % value,
                            "NVIDIA_VISIBLE_DEVICES hides every GPU", "set NVIDIA_VISIBLE_DEVICES=all (or GPU indices/UUIDs)",
                            required=False))
    else:
        checks.append(check("env.NVIDIA_VISIBLE_DEVICES", "pass", repr(value), required=False))
    value = environ.get("NVIDIA_DRIVER_CAPABILITIES")
    caps = set(c.strip().lower() for c in (value or "").split(",") if c.strip())
    if value is None or not caps:
        checks.append(check("env.NVIDIA_DRIVER_CAPABILITIES", "pass", "not set: the runtime's default (compute,utility)",
                            required=False))
    elif "all" in caps or {"compute", "utility"} <= caps:
        checks.append(check("env.NVIDIA_DRIVER_CAPABILITIES", "pass", repr(value), required=False))
    else:
        missing = sorted({"compute", "utility"} - caps)
        what = {"compute": "the CUDA driver library (libcuda)", "utility": "nvidia-smi and NVML"}
        checks.append(check("env.NVIDIA_DRIVER_CAPABILITIES", "warn", "%r lacks %s" % (value, ", ".join(missing)),
                            "%s will not be mounted" % " and ".join(what[m] for m in missing),
                            "set NVIDIA_DRIVER_CAPABILITIES=compute,utility", required=False))
    value = environ.get("CUDA_VISIBLE_DEVICES")
    if value is None:
        checks.append(check("env.CUDA_VISIBLE_DEVICES", "pass", "not set: CUDA sees every GPU passed in", required=False))
    elif value.strip() in ("", "-1", "NoDevFiles"):
        checks.append(check("env.CUDA_VISIBLE_DEVICES", "warn", "%r hides every GPU from CUDA" % value,
                            "CUDA_VISIBLE_DEVICES is empty or -1", "unset CUDA_VISIBLE_DEVICES or list GPU indices",
                            required=False))
    else:
        checks.append(check("env.CUDA_VISIBLE_DEVICES", "pass", "%r: CUDA sees only these GPUs" % value, required=False))
    return checks


FRAMEWORK_MODULES = {"pytorch": "torch", "torch": "torch", "tensorflow": "tensorflow", "jax": "jax",
                     "rapids": "cudf", "cudf": "cudf", "cupy": "cupy"}
SHARED_LIBRARIES = ("cudart", "nvrtc", "cublas", "cudnn")


def module_present(module):
    try:
        import importlib.util
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def distribution_version(*names):
    try:
        from importlib import metadata
    except ImportError:  # Python < 3.8
        return None
    for name in names:
        try:
            return metadata.version(name)
        except Exception:
            continue
    return None


def cupy_distribution():
    """('cupy-cuda12x', '13.3.0') for the installed CuPy wheel / conda package, or (None, None)."""
    for name in ("cupy-cuda13x", "cupy-cuda12x", "cupy-cuda11x", "cupy"):
        version = distribution_version(name)
        if version:
            return name, version
    return None, None


def find_shared_library(name):
    """Where the dynamic loader (or a pip nvidia-* wheel) would find lib<name>."""
    import ctypes.util
    found = ctypes.util.find_library(name)
    if found:
        return found
    for folder in sys.path:
        nvidia = os.path.join(folder, "nvidia")
        if os.path.isdir(nvidia):
            for sub in os.listdir(nvidia):
                lib = os.path.join(nvidia, sub, "lib")
                if os.path.isdir(lib) and any(f.startswith("lib%s.so" % name) for f in os.listdir(lib)):
                    return os.path.join(lib, "lib%s.so" % name)
    return None


def environment_cudart(environ):
    """(major.minor, path) of the CUDA runtime the environment itself installs, which its
    frameworks load before the system's: a pip wheel's libcudart (nvidia/cuda_runtime,
    nvidia/cu13), else the conda prefix's; (None, None) when it carries none. The version is
    asked of the library (cudaRuntimeGetVersion needs no GPU and no driver)."""
    import glob
    candidates = []
    for folder in sys.path:
        for sub in ("cuda_runtime", "cu13"):
            candidates += sorted(glob.glob(os.path.join(folder, "nvidia", sub, "lib", "libcudart.so*")))
    for prefix in (sys.prefix, environ.get("CONDA_PREFIX")):
        if prefix and os.path.isdir(os.path.join(prefix, "conda-meta")):
            candidates += sorted(glob.glob(os.path.join(prefix, "lib", "libcudart.so*")))
    for path in candidates:
        found = cudart_version(path)
        if found:
            return found, path
    return None, None


def cudart_version(path):
    """'12.4' from the libcudart at `path`, or None when it does not load."""
    try:
        lib = ctypes.CDLL(path)
        value = ctypes.c_int()
        if lib.cudaRuntimeGetVersion(ctypes.byref(value)) != 0:
            return None
    except (OSError, AttributeError):
        return None
    return cuda_from_int(value.value)


def static_checks(environ, inputs, gpus_hint=None):
    expect, labels = inputs["expect"], inputs["labels"]
    checks = [check("static.python", "pass", "Python %s at %s" % (platform.python_version(), sys.executable),
                    required=False)]
    present = {}
    for _, module in GROUP_MODULES + (("numpy", "numpy"),):
        present[module] = module_present(module)
    libs = {name: find_shared_library(name) for name in SHARED_LIBRARIES}
    expected = sorted(set(FRAMEWORK_MODULES.get(n, n) for n in (expect.get("frameworks") or {})))
    missing = [m for m in expected if not present.get(m)]
    found = ", ".join(m for m in sorted(present) if present[m]) or "none"
    lib_text = ", ".join("lib%s" % n for n in SHARED_LIBRARIES if libs[n]) or "none found by the loader"
    data = {"modules": present, "libraries": libs}
    if missing:
        checks.append(check("static.libraries", "fail", "expected %s not importable (found: %s)" % (", ".join(missing), found),
                            "the environment lacks a framework the spec asks for",
                            "rebuild the image from the lockfile; check the install step's log", data=data))
    else:
        checks.append(check("static.libraries", "pass", "Python packages: %s; CUDA libraries: %s" % (found, lib_text), data=data))

    sources = image_cuda_sources(labels, environ)
    if expect.get("cuda"):
        sources["expected"] = major_minor(expect["cuda"])
    runtime, runtime_path = environment_cudart(environ)
    if runtime:
        # the environment's own CUDA runtime is what its frameworks load: the label must name
        # it, and the base image's CUDA_VERSION (its system toolkit) is reported, not compared
        sources["libcudart"] = runtime
    compared = dict((k, v) for k, v in sources.items() if not (runtime and k == "CUDA_VERSION"))
    distinct = sorted(set(v for v in compared.values() if v), key=version_tuple)
    said = ", ".join("%s %s" % (k, v) for k, v in sorted(compared.items()))
    if runtime and "CUDA_VERSION" in sources:
        said += " (the base image's system CUDA_VERSION %s is not what the environment loads)" % sources["CUDA_VERSION"]
    if runtime_path:
        sources["libcudart_path"] = runtime_path
    if not sources:
        checks.append(check("static.cuda_labels", "skip", "the image states no CUDA version (no envbuild label, "
                            "NVIDIA_REQUIRE_CUDA or CUDA_VERSION)", required=False))
    elif len(distinct) > 1 and runtime and len(set(v for k, v in compared.items() if k != "libcudart")) == 1:
        checks.append(check("static.cuda_labels", "fail", "CUDA versions disagree: " + said,
                            "the image's labels name another CUDA than the runtime library its environment installs "
                            "(%s)" % runtime_path,
                            "rebuild the image with envbuild, whose labels name the CUDA its lock installs",
                            data=sources))
    elif len(distinct) > 1:
        checks.append(check("static.cuda_labels", "fail", "CUDA versions disagree: " + said,
                            "the image's metadata and its contents were made from different specs",
                            "rebuild the image with envbuild so labels and NVIDIA_REQUIRE_CUDA come from one resolution",
                            data=sources))
    else:
        checks.append(check("static.cuda_labels", "pass", said, data=sources))

    image_cuda = distinct[-1] if distinct else None
    if present.get("cupy") or "cupy" in expected:
        checks.append(nvrtc_headers_check(image_cuda, environ))
    return checks, image_cuda


def cuda_include_dirs(environ):
    dirs = []
    for var in ("CUDA_PATH", "CUDA_HOME", "CONDA_PREFIX"):
        if environ.get(var):
            dirs += [os.path.join(environ[var], "include"), os.path.join(environ[var], "targets", "x86_64-linux", "include"),
                     os.path.join(environ[var], "targets", "sbsa-linux", "include")]
    dirs += ["/usr/local/cuda/include"] + ["/usr/local/cuda-%s/include" % v for v in _cuda_dirs()]
    dirs += [os.path.join(sys.prefix, "include"), os.path.join(sys.prefix, "targets", "x86_64-linux", "include"),
             "/usr/include"]
    for folder in sys.path:  # pip nvidia-cuda-runtime-cuXX wheels
        dirs += [os.path.join(folder, "nvidia", "cuda_runtime", "include"), os.path.join(folder, "nvidia", "cu13", "include")]
    return dirs


def nvrtc_headers_check(image_cuda, environ):
    """CuPy compiles every kernel with NVRTC; from CUDA 12.2 on that needs the CUDA runtime
    headers (vector_types.h), which runtime and base images do not have."""
    name, version = cupy_distribution()
    cuda = image_cuda
    m = re.match(r"cupy-cuda(\d+)x$", name or "")
    if not cuda and m:
        cuda = "%s.0" % m.group(1)  # only the major is known from the wheel name
    where = next((d for d in cuda_include_dirs(environ) if os.path.exists(os.path.join(d, "vector_types.h"))), None)
    if where:
        return check("static.nvrtc_headers", "pass", "CUDA headers for NVRTC found in %s" % where)
    v = version_tuple(cuda)
    if not v:
        return check("static.nvrtc_headers", "warn", "no CUDA headers found and the CUDA version is unknown",
                     "CuPy kernels need the CUDA runtime headers on CUDA >= 12.2",
                     "use the devel image flavour or add cuda-cudart-dev", required=False)
    if v[:2] < (12, 2) and not (m and int(m.group(1)) >= 13):
        return check("static.nvrtc_headers", "pass", "CUDA %s: NVRTC needs no separate headers before 12.2" % cuda)
    sig = recognise_failure('cannot open source file "vector_types.h"', {"cuda": major_minor(cuda)})
    return check("static.nvrtc_headers", "fail", "CuPy (%s %s) on CUDA %s and no vector_types.h in the image" % (
        name or "cupy", version or "", major_minor(cuda)), sig["cause"], sig["fix"], data={"signature": sig["name"]})


# --- GPU checks in the parent (no GPU library needed) ------------------------------------------
def gpu_checks(inputs, image_cuda, environ, run=_run):
    """nvidia-smi/NVML, cuInit, driver vs image CUDA. Returns (checks, context for children)."""
    info = query_gpus(run)
    checks = []
    gpus = info["gpus"]
    listing = "; ".join("%s: %s (cc %s, %s MiB)" % (g["index"], g["name"], g["compute_capability"] or "?",
                                                    g["memory_mib"] if g["memory_mib"] is not None else "?") for g in gpus)
    data = {"driver": info["driver"], "max_cuda": info["max_cuda"], "gpus": gpus, "source": info["source"]}
    if info["ok"] and info["source"].startswith("nvidia-smi"):
        note = ""
        if info.get("missing_fields"):
            note = " (this nvidia-smi has no %s field; %s)" % (", ".join(info["missing_fields"]),
                                                              "read from NVML" if all(g["compute_capability"] for g in gpus)
                                                              else "compute capability unknown here")
        checks.append(check("gpu.nvidia_smi", "pass", "driver %s, CUDA up to %s, %d GPU(s): %s%s" % (
            info["driver"], info["max_cuda"], len(gpus), listing, note), data=data))
    elif info["ok"]:
        checks.append(check("gpu.nvidia_smi", "warn", "nvidia-smi unusable (%s); NVML: driver %s, CUDA up to %s, %s" % (
            info.get("smi_error"), info["driver"], info["max_cuda"], listing),
            "nvidia-smi is not mounted into the container", "add utility to NVIDIA_DRIVER_CAPABILITIES", data=data))
    else:
        error = info["error"] or "unknown error"
        checks.append(check("gpu.nvidia_smi", "fail", "%s: %s" % (NO_GPU, error),
                            "no NVIDIA driver or GPU is visible here (nvidia-smi exit %s)" % info.get("exit_code", "-"),
                            "run with a GPU (docker --gpus all, or --device nvidia.com/gpu=all) and "
                            "NVIDIA_DRIVER_CAPABILITIES=compute,utility", data=data))

    init = cuda_driver_init()
    context = {"cuda": image_cuda}
    if init["ok"]:
        checks.append(check("gpu.cuda_init", "pass", "cuInit ok: %d device(s), driver API CUDA %s" % (
            init["devices"], init["driver_cuda"]), data=init))
    elif init["code"] is None:
        checks.append(check("gpu.cuda_init", "fail", "%s: %s" % (NO_GPU, init["error"]),
                            "the NVIDIA driver library libcuda.so.1 is not present (driver_library_missing)",
                            "run with a GPU (docker --gpus all) and NVIDIA_DRIVER_CAPABILITIES including compute", data=init))
    else:
        what = NO_GPU if init["code"] == 100 or init.get("devices") == 0 and init["code"] == 0 else "cuInit failed"
        checks.append(failed_from_error("gpu.cuda_init", init["error"], what, context=context))

    compat = compat_package_cuda()
    facts = inputs["facts"] or {}
    names = [g["name"] for g in gpus]
    dc = None
    if names and facts.get("datacenter_gpus") is not None:
        known = [n for n in names if _is_named(n, facts.get("datacenter_gpus"), facts.get("gpu_aliases"))]
        dc = bool(known) if known else None
    max_cuda = info["max_cuda"] or (init.get("driver_cuda") if init.get("code") == 0 else None)
    status, details, cause, fix = judge_driver_cuda(image_cuda, info["driver"], max_cuda,
                                                    facts.get("minor_compat_floors"), compat, dc)
    checks.append(check("gpu.driver_cuda", status, details, cause, fix,
                        data={"image_cuda": image_cuda, "driver_max_cuda": max_cuda, "compat_package": compat}))
    visible = bool(info["ok"] or init["ok"])
    present = bool(info["ok"] or init["code"] is not None)
    return checks, {"gpus": gpus, "gpu_visible": visible, "gpu_present": present, "driver": info["driver"],
                    "driver_max_cuda": max_cuda}


def _is_named(name, candidates, aliases):
    wanted = _norm_name(name)
    for cand in candidates or ():
        if wanted in [_norm_name(n) for n in [cand] + list((aliases or {}).get(cand) or ())]:
            return True
    return False


# --- children: one process per GPU library -----------------------------------------------------
def _median(values):
    values = sorted(values)
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2.0


def _no_gpu(name, required=True):
    return check(name, "fail", NO_GPU, "no GPU is passed to this environment",
                 "run with a GPU (docker --gpus all) on a host with the NVIDIA driver", required)


def child_cupy(ctx):
    names = ("cupy.devices", "cupy.elementwise", "cupy.reduction", "cupy.rawkernel", "cupy.cublas", "cupy.allocation")
    context = {"cuda": ctx.get("image_cuda")}
    try:
        import numpy as np
        import cupy as cp
    except Exception as exc:  # noqa: BLE001 - any import failure is the finding
        return [failed_from_error("cupy.devices", "%s: %s" % (type(exc).__name__, exc), "import cupy", context=context)]
    if ctx["static"]:
        return []
    if not ctx["gpu_present"]:
        return [_no_gpu(n) for n in names]
    checks = []
    try:
        count = cp.cuda.runtime.getDeviceCount()
        runtime = cuda_from_int(cp.cuda.runtime.runtimeGetVersion())
        driver = cuda_from_int(cp.cuda.runtime.driverGetVersion())
        try:
            local = cuda_from_int(cp.cuda.get_local_runtime_version())
        except Exception:  # noqa: BLE001 - older CuPy or no local runtime: informative only
            local = None
    except Exception as exc:  # noqa: BLE001
        text = "%s: %s" % (type(exc).__name__, exc)
        first = failed_from_error("cupy.devices", text, NO_GPU if "NoDevice" in text else "CUDA runtime", context=context)
        return [first] + [check(n, "fail", "not run: " + first["details"], first["cause"], first["fix"]) for n in names[1:]]
    context["cuda"] = runtime or context["cuda"]
    devices = []
    for i in range(count):
        props = cp.cuda.runtime.getDeviceProperties(i)
        name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
        devices.append({"index": i, "name": name, "compute_capability": "%d.%d" % (props["major"], props["minor"])})
    details = "%d device(s) [%s]; CuPy %s built with CUDA runtime %s%s, driver supports CUDA %s" % (
        count, ", ".join("%s sm_%s" % (d["name"], d["compute_capability"].replace(".", "")) for d in devices),
        cp.__version__, runtime, " (local %s)" % local if local and local != runtime else "", driver)
    if count == 0:
        return [check("cupy.devices", "fail", NO_GPU, "CUDA sees no device", "check CUDA_VISIBLE_DEVICES")] + \
            [_no_gpu(n) for n in names[1:]]
    if version_tuple(runtime) and version_tuple(driver) and version_tuple(runtime)[:1] > version_tuple(driver)[:1]:
        checks.append(check("cupy.devices", "fail", details, "CuPy's CUDA major is newer than the driver's "
                            "(insufficient_driver)", recognise_failure("cudaErrorInsufficientDriver", context)["fix"],
                            data={"devices": devices}))
    else:
        checks.append(check("cupy.devices", "pass", details, data={"devices": devices, "runtime": runtime, "driver": driver}))

    def on_devices(name, what, fn):
        results = []
        try:
            for d in devices:
                with cp.cuda.Device(d["index"]):
                    results.append(fn())
                    cp.cuda.Device().synchronize()
        except Exception as exc:  # noqa: BLE001 - the failure is the result
            checks.append(failed_from_error(name, "%s: %s" % (type(exc).__name__, exc), what, context=context))
            return
        bad = [r for r in results if r is not True]
        if bad:
            checks.append(check(name, "fail", "%s: wrong result (%s)" % (what, bad[0]), "the GPU computed a wrong value",
                                "check the GPU's health (dcgmi diag -r 2) and the driver"))
        else:
            checks.append(check(name, "pass", "%s on %d device(s)" % (what, len(devices))))

    def elementwise():
        k = cp.ElementwiseKernel("float32 x", "float32 y", "y = x * 2.0f + 1.0f", "envbuild_affine")
        x = np.arange(4096, dtype=np.float32)
        return bool(np.array_equal(cp.asnumpy(k(cp.asarray(x))), x * 2 + 1)) or "elementwise mismatch"

    def reduction():
        n = 1 << 20
        total = float(cp.arange(n, dtype=cp.float64).sum())
        return total == n * (n - 1) / 2.0 or "sum %r != %r" % (total, n * (n - 1) / 2.0)

    source = r'''
#include <cuda_fp16.h>
extern "C" __global__ void envbuild_half_roundtrip(const float* x, float* y, int n) {
    int i = blockDim.x * blockIdx.x + threadIdx.x;
    if (i < n) { y[i] = __half2float(__float2half(x[i])) + 1.0f; }
}'''

    def rawkernel():
        kernel = cp.RawKernel(source, "envbuild_half_roundtrip")
        n = 1024
        x = cp.asarray(np.arange(n, dtype=np.float32) * 0.5)
        y = cp.empty(n, dtype=cp.float32)
        kernel(((n + 255) // 256,), (256,), (x, y, cp.int32(n)))
        return bool(np.array_equal(cp.asnumpy(y), np.arange(n, dtype=np.float32) * 0.5 + 1)) or "kernel output mismatch"

    def cublas():
        rng = np.random.default_rng(0) if hasattr(np.random, "default_rng") else np.random
        a = rng.random((512, 512)).astype(np.float32)
        b = rng.random((512, 512)).astype(np.float32)
        got = cp.asnumpy(cp.matmul(cp.asarray(a), cp.asarray(b)))
        ref = a @ b
        err = float(np.max(np.abs(got - ref)) / np.max(np.abs(ref)))
        return err < 1e-4 or "relative error %.2e" % err

    def allocation():
        free, total = cp.cuda.Device().mem_info
        nbytes = int(min(2 << 30, free // 4))
        buf = cp.empty(nbytes, dtype=cp.uint8)
        buf.data.memset_async(0x5A, nbytes)
        tail = cp.asnumpy(buf[-64:])
        del buf
        cp.get_default_memory_pool().free_all_blocks()
        return bool((tail == 0x5A).all()) or "memset read back wrong"

    on_devices("cupy.elementwise", "ElementwiseKernel (NVRTC)", elementwise)
    on_devices("cupy.reduction", "sum of 2^20 float64", reduction)
    on_devices("cupy.rawkernel", "RawKernel with cuda_fp16.h (NVRTC)", rawkernel)
    on_devices("cupy.cublas", "cuBLAS 512x512 SGEMM vs NumPy", cublas)
    free, total = cp.cuda.Device(0).mem_info
    on_devices("cupy.allocation", "allocate, fill and read back %.1f GiB" % (min(2 << 30, free // 4) / 2.0 ** 30), allocation)
    return checks


def _expected_framework(ctx, *names):
    frameworks = (ctx.get("expect") or {}).get("frameworks") or {}
    for name in names:
        if name in frameworks:
            return frameworks[name] or {}
    return None


def _cuda_variant_check(name, label, version, built_cuda, expected, ctx):
    """Framework build's CUDA variant vs the expected one; a CPU-only build is a failure."""
    if not built_cuda:
        return check(name, "fail", "%s %s is a CPU-only build" % (label, version),
                     "the installer picked a CPU build (a silent fallback)",
                     "pin the GPU variant (pip +cuXYZ wheel from the CUDA index, conda pytorch-cuda / cuda-version)")
    want = (expected or {}).get("cuda")
    details = "%s %s built for CUDA %s" % (label, version, built_cuda)
    if want and major_minor(want) != major_minor(built_cuda):
        return check(name, "fail", details + ", expected CUDA %s" % major_minor(want),
                     "the installed build is not the CUDA variant the spec resolved to",
                     "rebuild from the lockfile; check that the CUDA variant is pinned")
    want_version = (expected or {}).get("version")
    if want_version and str(version).split("+")[0] != str(want_version).split("+")[0]:
        return check(name, "fail", details + ", expected version %s" % want_version,
                     "the installed version is not the one the spec resolved to", "rebuild from the lockfile")
    have = version_tuple(major_minor(ctx.get("driver_max_cuda")))
    if have and version_tuple(major_minor(built_cuda)) > have and not ctx["static"]:
        if version_tuple(built_cuda)[0] != have[0]:
            return check(name, "fail", details + "; the driver supports only CUDA %s" % ctx["driver_max_cuda"],
                         "insufficient driver (error 35)", "upgrade the host driver or use a build for CUDA <= %s" %
                         ctx["driver_max_cuda"])
        details += "; driver supports CUDA %s (minor-version compatibility)" % ctx["driver_max_cuda"]
    return check(name, "pass", details + (" = expected" if want else ""))


def _arch_check(name, label, arch_list, ctx):
    sms = [(s, sm_of(s)) for s in ((ctx.get("expect") or {}).get("sms") or [])]
    if not arch_list:
        return check(name, "skip", "%s reports no compiled architectures" % label, required=False)
    if not sms:
        return check(name, "pass", "compiled for %s (no target GPUs given)" % " ".join(arch_list))
    verdicts = [(s, judge_archs(arch_list, v)) for s, v in sms if v]
    bad = [s for s, (st, _) in verdicts if st == "fail"]
    slow = [s for s, (st, _) in verdicts if st == "warn"]
    details = "; ".join("sm_%s: %s" % (sm_of(s), how) for s, (_, how) in verdicts) + " [compiled: %s]" % " ".join(arch_list)
    if bad:
        sig = recognise_failure("no kernel image is available for execution on the device")
        return check(name, "fail", details, "%s has no kernels for sm_%s (no_kernel_image, error 209 at run time)" % (
            label, ", sm_".join(str(sm_of(s)) for s in bad)), sig["fix"])
    if slow:
        return check(name, "warn", details, "PTX JIT fallback for sm_%s" % ", sm_".join(str(sm_of(s)) for s in slow),
                     "prefer a build with SASS for the target GPUs", required=False)
    return check(name, "pass", details)


def _torch_version_file():
    """torch's version and CUDA variant read from torch/version.py: importing torch costs seconds."""
    try:
        import importlib.util
        spec = importlib.util.find_spec("torch")
        folder = list(spec.submodule_search_locations or [])[0]
        with open(os.path.join(folder, "version.py")) as fh:
            text = fh.read()
    except Exception:  # noqa: BLE001 - fall back to importing torch
        return None
    version = re.search(r"^__version__\s*=\s*['\"]([^'\"]+)", text, re.M)
    cuda = re.search(r"^cuda\s*(?::[^=]+)?=\s*(None|['\"]([^'\"]*)['\"])", text, re.M)
    if not version or not cuda:
        return None
    return version.group(1), cuda.group(2)


_ARCH_FLAGS = re.compile(rb"\x00((?:(?:sm|compute)_\d+[af]? )*(?:sm|compute)_\d+[af]?)\x00")


def _torch_arch_list_file():
    """The list torch.cuda.get_arch_list() returns is a string constant compiled into
    libtorch_python (CUDA_ARCH_FLAGS); reading it from the file avoids importing torch."""
    try:
        import importlib.util
        spec = importlib.util.find_spec("torch")
        folder = list(spec.submodule_search_locations or [])[0]
        with open(os.path.join(folder, "lib", "libtorch_python.so"), "rb") as fh:
            found = _ARCH_FLAGS.search(fh.read())
        return found.group(1).decode().split() if found else None
    except Exception:  # noqa: BLE001 - fall back to importing torch
        return None


def child_torch(ctx):
    import warnings
    quick = _torch_version_file() if ctx["static"] else None
    if quick:
        checks = [_cuda_variant_check("torch.build", "torch", quick[0], quick[1],
                                      _expected_framework(ctx, "pytorch", "torch"), ctx)]
        if not (ctx.get("expect") or {}).get("sms"):
            return checks + [check("torch.archs", "skip", "no target GPUs given (--expect-sm)", required=False)]
        archs = _torch_arch_list_file() if quick[1] else []
        if archs is not None:
            return checks + [_arch_check("torch.archs", "torch", archs, ctx)]
    try:
        import torch
    except Exception as exc:  # noqa: BLE001
        return [failed_from_error("torch.build", "%s: %s" % (type(exc).__name__, exc), "import torch")]
    checks = [_cuda_variant_check("torch.build", "torch", torch.__version__, torch.version.cuda,
                                  _expected_framework(ctx, "pytorch", "torch"), ctx)]
    try:
        archs = torch._C._cuda_getArchFlags().split() if torch.version.cuda else []
    except Exception:  # noqa: BLE001 - private API; absent in some builds
        archs = []
    checks.append(_arch_check("torch.archs", "torch", archs, ctx))
    if ctx["static"]:
        return checks
    if not ctx["gpu_present"]:
        return checks + [_no_gpu("torch.cuda")]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            available = torch.cuda.is_available()
            count = torch.cuda.device_count() if available else 0
        except Exception as exc:  # noqa: BLE001
            return checks + [failed_from_error("torch.cuda", "%s: %s" % (type(exc).__name__, exc), "torch.cuda")]
    said = " ".join(str(w.message) for w in caught)
    if not available or count == 0:
        sig = recognise_failure(said)
        if sig:
            return checks + [failed_from_error("torch.cuda", said, "torch.cuda.is_available() is False")]
        return checks + [check("torch.cuda", "fail", "torch.cuda.is_available() is False" + (": " + said[:200] if said else ""),
                               "torch cannot initialise CUDA", "see the torch.build check and gpu.cuda_init")]
    problems, notes = [], []
    arch_list = torch.cuda.get_arch_list()
    try:
        for i in range(count):
            major, minor = torch.cuda.get_device_capability(i)
            status, how = judge_archs(arch_list, major * 10 + minor)
            notes.append("%s sm_%d%d: %s" % (torch.cuda.get_device_name(i), major, minor, how))
            if status == "fail":
                problems.append(("no_kernel_image", notes[-1]))
            a = torch.arange(256 * 256, dtype=torch.float32).reshape(256, 256) / 65536.0
            got = (a.to("cuda:%d" % i) @ a.to("cuda:%d" % i)).cpu()
            err = float((got - a @ a).abs().max() / (a @ a).abs().max())
            if err > 1e-2:
                problems.append(("wrong_result", "device %d matmul relative error %.2e" % (i, err)))
    except Exception as exc:  # noqa: BLE001
        return checks + [failed_from_error("torch.cuda", "%s: %s" % (type(exc).__name__, exc), "torch GPU matmul")]
    details = "%d device(s): %s; 256x256 matmul matches CPU" % (count, "; ".join(notes))
    if problems:
        kind, what = problems[0]
        sig = recognise_failure("no kernel image is available" if kind == "no_kernel_image" else "")
        return checks + [check("torch.cuda", "fail", details, what, sig["fix"] if sig else "check the GPU's health")]
    ptx = [n for n in notes if "ptx" in n]
    if ptx:
        return checks + [check("torch.cuda", "warn", details, "PTX JIT fallback: " + "; ".join(ptx),
                               "prefer a build with SASS for this GPU", required=False)]
    return checks + [check("torch.cuda", "pass", details)]


def child_tensorflow(ctx):
    try:
        import tensorflow as tf
    except Exception as exc:  # noqa: BLE001
        return [failed_from_error("tensorflow.build", "%s: %s" % (type(exc).__name__, exc), "import tensorflow")]
    try:
        info = dict(tf.sysconfig.get_build_info())
    except Exception:  # noqa: BLE001
        info = {}
    built = info.get("cuda_version") if info.get("is_cuda_build", tf.test.is_built_with_cuda()) else None
    checks = [_cuda_variant_check("tensorflow.build", "tensorflow", tf.__version__, built,
                                  _expected_framework(ctx, "tensorflow"), ctx)]
    checks.append(_arch_check("tensorflow.archs", "tensorflow",
                              tf_arch_list(info.get("cuda_compute_capabilities") or []), ctx))
    if ctx["static"]:
        return checks
    if not ctx["gpu_present"]:
        return checks + [_no_gpu("tensorflow.gpu")]
    try:
        gpus = tf.config.list_physical_devices("GPU")
        if not gpus:
            return checks + [check("tensorflow.gpu", "fail", "list_physical_devices('GPU') is empty",
                                   "TensorFlow cannot load its CUDA libraries or sees no GPU",
                                   "install tensorflow[and-cuda] (pip) or use a TensorFlow GPU base image")]
        with tf.device("/GPU:0"):
            x = tf.ones((64, 64))
            total = float(tf.reduce_sum(tf.matmul(x, x)))
        if total != 64.0 ** 3:
            return checks + [check("tensorflow.gpu", "fail", "matmul on /GPU:0 gave %r" % total, "wrong result",
                                   "check the GPU's health")]
    except Exception as exc:  # noqa: BLE001
        return checks + [failed_from_error("tensorflow.gpu", "%s: %s" % (type(exc).__name__, exc), "tensorflow GPU")]
    return checks + [check("tensorflow.gpu", "pass", "%d GPU(s); 64x64 matmul on /GPU:0 correct" % len(gpus))]


def child_jax(ctx):
    # the static part reads package metadata only: importing jax costs seconds
    plugins = [m for m in ("jax_cuda13_plugin", "jax_cuda12_plugin", "jax_cuda11_plugin") if module_present(m)]
    checks = [check("jax.build", "pass" if plugins else "fail",
                    "jax %s, CUDA plugin: %s" % (distribution_version("jax") or "?", ", ".join(plugins) or "none"),
                    None if plugins else "a CPU-only jaxlib is installed (JAX falls back to CPU silently)",
                    None if plugins else "install jax[cudaXX] matching the image's CUDA major")]
    if ctx["static"]:
        return checks
    try:
        import jax
    except Exception as exc:  # noqa: BLE001
        return checks + [failed_from_error("jax.gpu", "%s: %s" % (type(exc).__name__, exc), "import jax")]
    if not ctx["gpu_present"]:
        return checks + [_no_gpu("jax.gpu")]
    try:
        backend = jax.default_backend()
        if backend != "gpu":
            return checks + [check("jax.gpu", "fail", "jax.default_backend() is %r" % backend,
                                   "JAX fell back to CPU", "install jax[cudaXX] and check the CUDA libraries it needs")]
        import jax.numpy as jnp
        total = float(jnp.sum(jnp.ones((64, 64)) @ jnp.ones((64, 64))))
    except Exception as exc:  # noqa: BLE001
        return checks + [failed_from_error("jax.gpu", "%s: %s" % (type(exc).__name__, exc), "jax GPU")]
    status = "pass" if total == 64.0 ** 3 else "fail"
    return checks + [check("jax.gpu", status, "default backend gpu, %d device(s); matmul %s" % (
        len(jax.devices()), "correct" if status == "pass" else "wrong: %r" % total))]


def child_cudf(ctx):
    try:
        import cudf
    except Exception as exc:  # noqa: BLE001
        return [failed_from_error("cudf.groupby", "%s: %s" % (type(exc).__name__, exc), "import cudf")]
    if ctx["static"]:
        return [check("cudf.build", "pass", "cudf %s importable" % cudf.__version__)]
    if not ctx["gpu_present"]:
        return [_no_gpu("cudf.groupby")]
    try:
        df = cudf.DataFrame({"k": [1, 1, 2, 2, 2], "v": [1.0, 2.0, 3.0, 4.0, 5.0]})
        got = df.groupby("k")["v"].sum().sort_index().to_pandas().tolist()
    except Exception as exc:  # noqa: BLE001
        return [failed_from_error("cudf.groupby", "%s: %s" % (type(exc).__name__, exc), "cudf groupby")]
    ok = got == [3.0, 12.0]
    return [check("cudf.groupby", "pass" if ok else "fail", "groupby-sum %s" % ("correct" if ok else "wrong: %r" % got),
                  None if ok else "wrong result", None if ok else "check the GPU's health")]


# --- performance ------------------------------------------------------------------------------
PERF_NAMES = ("perf.d2d_bandwidth", "perf.gemm_fp32", "perf.gemm_tf32", "perf.gemm_bf16")
PERF_REPEATS = 5


def _time_calls(fn, make_event, elapsed_s, sync):
    """Median seconds per call of fn over PERF_REPEATS timed runs (CUDA events), after a
    warm-up; each run repeats fn enough times to last ~20 ms."""
    fn()
    sync()
    start, end = make_event(), make_event()
    start.record()
    fn()
    end.record()
    end.synchronize()
    inner = max(1, min(200, int(0.02 / max(elapsed_s(start, end), 1e-7))))
    times = []
    for _ in range(PERF_REPEATS):
        start.record()
        for _ in range(inner):
            fn()
        end.record()
        end.synchronize()
        times.append(elapsed_s(start, end) / inner)
    return _median(times)


class _TorchPerf(object):
    label = "torch"

    def __init__(self, torch):
        self.t = torch

    def devices(self):
        t = self.t
        return [(i, t.cuda.get_device_name(i), "%d.%d" % t.cuda.get_device_capability(i)) for i in range(t.cuda.device_count())]

    def free_bytes(self, i):
        return self.t.cuda.mem_get_info(i)[0]

    def measure(self, i, fn):
        t = self.t
        with t.cuda.device(i):
            return _time_calls(fn, lambda: t.cuda.Event(enable_timing=True), lambda s, e: s.elapsed_time(e) / 1e3,
                               t.cuda.synchronize)

    def copy_op(self, i, nbytes):
        src = self.t.empty(nbytes, dtype=self.t.uint8, device="cuda:%d" % i).fill_(7)
        dst = self.t.empty_like(src)
        return lambda: dst.copy_(src)

    def gemm_op(self, i, n, kind):
        t = self.t
        dtype = t.bfloat16 if kind == "bf16" else t.float32
        t.set_float32_matmul_precision("high" if kind == "tf32" else "highest")
        a = t.randn(n, n, device="cuda:%d" % i, dtype=dtype)
        b = t.randn(n, n, device="cuda:%d" % i, dtype=dtype)
        out = t.empty(n, n, device="cuda:%d" % i, dtype=dtype)
        return lambda: t.matmul(a, b, out=out), "%s, random normal input" % dtype

    def release(self):
        self.t.set_float32_matmul_precision("highest")
        self.t.cuda.empty_cache()


class _CupyPerf(object):
    label = "cupy"

    def __init__(self, cp):
        import numpy
        self.cp, self.np = cp, numpy

    def devices(self):
        cp = self.cp
        out = []
        for i in range(cp.cuda.runtime.getDeviceCount()):
            props = cp.cuda.runtime.getDeviceProperties(i)
            name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
            out.append((i, name, "%d.%d" % (props["major"], props["minor"])))
        return out

    def free_bytes(self, i):
        return self.cp.cuda.Device(i).mem_info[0]

    def measure(self, i, fn):
        cp = self.cp
        with cp.cuda.Device(i):
            return _time_calls(fn, cp.cuda.Event, lambda s, e: cp.cuda.get_elapsed_time(s, e) / 1e3,
                               cp.cuda.Device().synchronize)

    def copy_op(self, i, nbytes):
        cp = self.cp
        with cp.cuda.Device(i):
            src = cp.empty(nbytes, dtype=cp.uint8)
            src.data.memset_async(7, nbytes)
            dst = cp.empty_like(src)
        return lambda: dst.data.copy_from_device_async(src.data, nbytes)

    def gemm_op(self, i, n, kind):
        cp, np = self.cp, self.np
        # CuPy has no bfloat16: the half-precision tensor-core figure is measured in float16,
        # whose dense peak equals bfloat16's on the GPUs that have both.
        dtype = np.float16 if kind == "bf16" else np.float32
        linalg = _cupy_linalg(cp)
        if kind in ("tf32", "fp32"):
            if linalg is None or not hasattr(linalg, "COMPUTE_TYPE_TF32"):
                if kind == "tf32":
                    return None, "this CuPy offers no TF32 switch"
            else:
                linalg.set_compute_type(np.float32, linalg.COMPUTE_TYPE_TF32 if kind == "tf32" else linalg.COMPUTE_TYPE_DEFAULT)
        rng = np.random.default_rng(0)
        host = rng.standard_normal((n, n), dtype=np.float32).astype(dtype)
        with cp.cuda.Device(i):
            a, b = cp.asarray(host), cp.asarray(host.T.copy())
            out = cp.empty((n, n), dtype=dtype)
        return lambda: cp.matmul(a, b, out=out), "%s, random normal input" % np.dtype(dtype).name

    def release(self):
        linalg = _cupy_linalg(self.cp)
        if linalg is not None and hasattr(linalg, "COMPUTE_TYPE_DEFAULT"):
            linalg.set_compute_type(self.np.float32, linalg.COMPUTE_TYPE_DEFAULT)
        self.cp.get_default_memory_pool().free_all_blocks()


def _cupy_linalg(cp):
    try:
        return importlib.import_module("cupy._core._routines_linalg")
    except ImportError:
        return None


def _perf_backend():
    """torch when it can use the GPU (bfloat16, TF32 switch), else CuPy; None when neither."""
    errors = []
    if module_present("torch"):
        try:
            import torch
            if torch.cuda.is_available() and torch.cuda.device_count() > 0:
                return _TorchPerf(torch), errors
            errors.append("torch: CUDA not available")
        except Exception as exc:  # noqa: BLE001
            errors.append("torch: %s" % exc)
    if module_present("cupy"):
        try:
            import cupy
            if cupy.cuda.runtime.getDeviceCount() > 0:
                return _CupyPerf(cupy), errors
        except Exception as exc:  # noqa: BLE001
            errors.append("cupy: %s" % first_line(str(exc)))
    return None, errors


def child_perf(ctx):
    if not ctx["gpu_present"]:
        return [_no_gpu(n, required=False) for n in PERF_NAMES]
    backend, errors = _PERF_WARM[0] if _PERF_WARM else _perf_backend()
    if backend is None:
        return [check(n, "skip", "no GPU library can use the GPU here (%s)" % ("; ".join(errors) or "neither torch nor CuPy"),
                      required=False) for n in PERF_NAMES]
    peaks = (ctx.get("facts") or {}).get("peaks") or []
    per_check = dict((n, []) for n in PERF_NAMES)
    for i, name, cc in backend.devices()[:8]:
        peak = find_peak(name, peaks) or {}
        free = backend.free_bytes(i)
        nbytes = int(min(1 << 30, free // 4)) & ~0xFFFFF
        n = 8192 if free > (4 << 30) else 4096
        plan = (("perf.d2d_bandwidth", None, "memory_bandwidth_gbs"), ("perf.gemm_fp32", "fp32", "fp32_tflops"),
                ("perf.gemm_tf32", "tf32", "tf32_tflops"), ("perf.gemm_bf16", "bf16", "bf16_tflops"))
        for check_name, kind, peak_key in plan:
            entry = {"device": i, "gpu": name, "compute_capability": cc, "backend": backend.label,
                     "peak": peak.get(peak_key), "peak_source": peak.get("source")}
            try:
                if kind in ("tf32", "bf16") and sm_of(cc) < 80:
                    entry.update(status="skip", details="device %d %s: %s needs compute capability 8.0+" % (i, name, kind))
                elif kind is None:
                    seconds = backend.measure(i, backend.copy_op(i, nbytes))
                    entry["measured"] = 2.0 * nbytes / seconds / 1e9  # bytes read + bytes written
                    entry["unit"] = "GB/s"
                    what = "device %d %s copy of %d MiB (read+write)" % (i, name, nbytes >> 20)
                else:
                    op, how = backend.gemm_op(i, n, kind)
                    if op is None:
                        entry.update(status="skip", details="device %d %s: %s" % (i, name, how))
                    else:
                        entry["measured"] = 2.0 * n ** 3 / backend.measure(i, op) / 1e12
                        entry["unit"] = "TFLOP/s"
                        what = "device %d %s %dx%d GEMM %s" % (i, name, n, n, how)
                if "measured" in entry:
                    st, details, cause, fix = judge_perf(entry["measured"], entry["peak"], entry["unit"], what)
                    entry.update(status=st, details=details, cause=cause, fix=fix,
                                 fraction=(entry["measured"] / entry["peak"]) if entry["peak"] else None)
            except Exception as exc:  # noqa: BLE001 - a broken measurement is reported, not raised
                sig = recognise_failure(str(exc))
                entry.update(status="warn", details="device %d %s: measurement failed: %s" % (i, name, first_line(str(exc))),
                             cause=sig["cause"] if sig else "measurement failed", fix=sig["fix"] if sig else None)
            finally:
                backend.release()
            per_check[check_name].append(entry)
    checks = []
    order = ("fail", "warn", "pass", "skip")
    for check_name in PERF_NAMES:
        entries = per_check[check_name]
        if not entries:
            checks.append(check(check_name, "skip", "no device measured", required=False))
            continue
        worst = min(entries, key=lambda e: order.index(e["status"]))
        data = [dict((k, v) for k, v in e.items() if k not in ("details", "cause", "fix")) for e in entries]
        checks.append(check(check_name, worst["status"], "; ".join(e["details"] for e in entries) +
                            " (median of %d runs, %s)" % (PERF_REPEATS, backend.label),
                            worst.get("cause"), worst.get("fix"), required=False, data={"devices": data}))
    return checks


_PERF_WARM = []
CHILDREN = {"cupy": child_cupy, "torch": child_torch, "tensorflow": child_tensorflow, "jax": child_jax,
            "cudf": child_cudf, "perf": child_perf}
MARKER = "ENVBUILD-PROBE-RESULT:"


def child_main(group):
    if group == "perf":
        # import torch/CuPy and create the CUDA context while the other checks run; the
        # measurement itself starts only when the parent sends the context (they are done)
        _PERF_WARM.append(_perf_backend())
    ctx = json.loads(sys.stdin.read() or "{}")
    try:
        checks = CHILDREN[group](ctx)
    except Exception as exc:  # noqa: BLE001 - a bug or an odd library must still yield a result
        checks = [failed_from_error("%s.process" % group, "%s: %s" % (type(exc).__name__, exc), "%s checks raised" % group)]
    sys.stdout.write("\n" + MARKER + json.dumps(checks) + "\n")
    sys.stdout.flush()
    return 0


def _child_env():
    env = dict(os.environ)
    env.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # JAX would take 75% of GPU memory
    env.setdefault("TF_FORCE_GPU_ALLOW_GROWTH", "true")  # TensorFlow would take all of it
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    return env


def start_child(group, ctx):
    proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--child", group], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, env=_child_env())
    return proc, json.dumps(ctx)


def finish_child(group, proc, payload, timeout):
    try:
        out, err = proc.communicate(payload, timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return [check("%s.process" % group, "fail", "the %s checks did not finish within %d s" % (group, timeout),
                      "a hung GPU call (driver, JIT compilation, or a busy GPU)", "rerun; check `nvidia-smi` for stuck processes")]
    for line in reversed(out.splitlines()):
        if line.startswith(MARKER):
            return json.loads(line[len(MARKER):])
    how = "signal %d" % -proc.returncode if proc.returncode < 0 else "exit code %d" % proc.returncode
    return [failed_from_error("%s.process" % group, (err or out)[-2000:] or how, "the %s checks crashed (%s)" % (group, how))]


# --- the report -------------------------------------------------------------------------------
GROUP_ORDER = ("env", "static", "gpu", "cupy", "torch", "tensorflow", "jax", "cudf", "perf")


def run_probe(args, run=_run):
    started = time.time()
    _CLOCK[0] = time.monotonic()
    environ = dict(os.environ)
    inputs = load_inputs(args)
    checks = env_checks(environ)
    more, image_cuda = static_checks(environ, inputs)
    checks += more
    ctx = {"static": bool(args.static), "expect": inputs["expect"], "facts": inputs["facts"], "image_cuda": image_cuda,
           "gpus": [], "gpu_visible": False, "gpu_present": False, "driver": None, "driver_max_cuda": None}
    if not args.static:
        more, gpu_ctx = gpu_checks(inputs, image_cuda, environ, run)
        checks += more
        ctx.update(gpu_ctx)
    perf = None
    if not args.static and not args.no_perf and ctx["gpu_present"]:
        perf = start_child("perf", ctx)  # warms up now, measures once the others are done
    running = []
    for group, module in GROUP_MODULES:
        if module_present(module):
            running.append((group,) + start_child(group, ctx))
            if args.serial:
                checks += finish_child(*(running.pop() + (args.timeout,)))
        else:
            checks.append(check("cupy.devices" if group == "cupy" else "%s.build" % group, "skip",
                                "%s is not installed" % module, required=False))
    for group, proc, payload in running:
        checks += finish_child(group, proc, payload, args.timeout)
    if not args.static and not args.no_perf:
        if perf is not None:
            checks += finish_child("perf", perf[0], perf[1], args.timeout)
        else:
            checks += child_perf(ctx)
    checks.sort(key=lambda c: GROUP_ORDER.index(c["name"].split(".")[0]) if c["name"].split(".")[0] in GROUP_ORDER else 99)
    counts = dict((s, sum(1 for c in checks if c["status"] == s)) for s in STATUSES)
    failed = [c["name"] for c in checks if c["status"] == "fail" and c["required"]]
    return {
        "verdict": "fail" if failed else "pass",
        "probe_version": PROBE_VERSION,
        "mode": "static" if args.static else "full",
        "host": platform.node(),
        "python": platform.python_version(),
        "image_cuda": image_cuda,
        "driver": ctx["driver"],
        "driver_max_cuda": ctx["driver_max_cuda"],
        "gpus": ctx["gpus"],
        "expect": inputs["expect"],
        "checks": checks,
        "summary": dict(counts, ok=not failed, failed_required=failed),
        "elapsed_s": round(time.time() - started, 2),
    }


def format_text(report):
    """The report for a terminal. A cause and fix that explain several checks (no GPU
    visible fails every GPU check) are printed once, under the first of them, with the
    names of the checks they explain."""
    s = report["summary"]
    lines = ["envbuild probe (%s, Python %s): %d pass, %d fail, %d warn, %d skip in %.1f s" % (
        report["mode"], report["python"], s["pass"], s["fail"], s["warn"], s["skip"], report["elapsed_s"])]
    explained = {}  # (cause, fix) -> the names of the failed or warning checks it explains
    for c in report["checks"]:
        if c["status"] in ("fail", "warn") and (c.get("cause") or c.get("fix")):
            explained.setdefault((c.get("cause"), c.get("fix")), []).append(c["name"])
    for c in report["checks"]:
        optional = " [not required]" if c["status"] == "fail" and not c["required"] else ""
        lines.append("  %-5s %-30s %s%s" % (c["status"].upper(), c["name"], c["details"], optional))
        names = explained.get((c.get("cause"), c.get("fix"))) if c["status"] in ("fail", "warn") else None
        if not names or names[0] != c["name"]:
            continue  # no cause, or one already printed under the first check it explains
        if c.get("cause"):
            lines.append("        cause: %s" % c["cause"])
        if c.get("fix"):
            lines.append("        fix:   %s" % c["fix"])
        if len(names) > 1:
            lines.append("        explains %d checks: %s" % (len(names), ", ".join(names)))
    if s["ok"]:
        verdict = "PASS" + (" (static checks only: the GPU checks did not run)" if report["mode"] == "static" else "")
    else:
        verdict = "FAIL (required checks failed: %s)" % ", ".join(s["failed_required"])
    lines.append("verdict: %s" % verdict)
    return "\n".join(lines)


def build_parser():
    parser = argparse.ArgumentParser(prog="probe", description="Check that this environment runs on this GPU.")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--output", metavar="FILE", help="also write the JSON report to FILE")
    parser.add_argument("--static", action="store_true", help="only the checks that need no GPU")
    parser.add_argument("--no-perf", action="store_true", help="skip the bandwidth and GEMM measurements")
    parser.add_argument("--expect", metavar="JSON|FILE", help="expectations: cuda, sms, frameworks{name: {version, cuda}}")
    parser.add_argument("--expect-sm", metavar="80,90", help="target GPUs' compute capabilities")
    parser.add_argument("--expect-cuda", metavar="X.Y", help="the CUDA the image should have")
    parser.add_argument("--facts", metavar="JSON|FILE", help="peaks, minor-version floors, data-center GPUs")
    parser.add_argument("--labels", metavar="JSON|FILE", help="the image's labels (the runner passes them)")
    parser.add_argument("--serial", action="store_true", help="run the library checks one after another")
    parser.add_argument("--timeout", type=int, default=CHILD_TIMEOUT_S, help="seconds per library (default %(default)s)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    return parser


def main(argv=None):
    args = build_parser().parse_args(argv)
    if args.child:
        return child_main(args.child)
    try:
        report = run_probe(args)
    except (ValueError, OSError) as exc:  # bad --expect/--facts/--labels input
        sys.stderr.write("probe: error: %s\n" % exc)
        return 2
    text = json.dumps(report, indent=2, sort_keys=False)
    if args.output:
        tmp = args.output + ".tmp"
        with open(tmp, "w") as fh:
            fh.write(text + "\n")
        os.replace(tmp, args.output)
    sys.stdout.write((text if args.json else format_text(report)) + "\n")
    return 0 if report["summary"]["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
