"""envbuild's image against a hand-written Dockerfile: size, build time, and the bytes a
one-package change pushes.

For each recipe (pytorch-official, jax, cupy) the spec gets a small pinned package
(einops, and for pytorch-official also transformers), on a stand-in base that states the
recipe's CUDA in its env as NVIDIA's images do (the services' Debian rootfs, python3 3.11,
with pip in it as framework and python images have). The pytorch-official stand-in also
carries the recipe's whole pip closure (torch, torchvision, torchaudio, triton, the
nvidia-* wheels and their dependencies) at the locked versions, as small stub wheels of
those names and versions: what the real image carries, without its gigabytes.

Both variants install the same locked pins from the same wheelhouse (`envbuild
wheelhouse`, the real files from PyPI):
- envbuild: `envbuild image --wheelhouse W` (the wheels travel in the build context);
- hand-written: `FROM base` and one `RUN pip install --no-cache-dir --no-index
  --find-links http://127.0.0.1:PORT/ <the pins>`, the wheelhouse served over HTTP to the
  build (host network), so that nothing but what pip installs enters the image.
Each run builds on a base no earlier build used (a label with the run's id), so no layer
comes from the cache, and pushes to a registry of its own (started here, removed after).
The change: einops 0.8.0 -> 0.8.1, built and pushed again by both; the bytes pushed are
read from the registry's manifests (the blobs the second image has that the first had not).

    python3 bench/bench_lean.py [--recipe jax] [--cache DIR] [--keep] [--runs N]
    (needs the services of scripts/services.sh, PyPI, docker-registry, and disk: the jax
    wheelhouse is 3 GB and its images about 11 GB)
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import docker
import requests
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
import image_support as support  # noqa: E402 - the tests' wheel maker

RECIPES = ("pytorch-official", "jax", "cupy")
EXTRAS = {"pytorch-official": ["einops==0.8.0", "transformers==4.57.1"], "jax": ["einops==0.8.0"],
          "cupy": ["einops==0.8.0"]}
CHANGE = ("einops==0.8.0", "einops==0.8.1")
# What each real base states about itself in its env (NVIDIA's variables; a devel image's
# for cupy, which compiles kernels with NVRTC on CUDA 12.2+).
BASE_ENV = {
    "pytorch-official": {"CUDA_VERSION": "12.8.1", "NV_CUDA_LIB_VERSION": "12.8.1-1", "PYTORCH_VERSION": "2.8.0"},
    "jax": {"CUDA_VERSION": "12.4.1", "NV_CUDA_LIB_VERSION": "12.4.1-1"},
    "cupy": {"CUDA_VERSION": "12.4.1", "NV_CUDA_LIB_VERSION": "12.4.1-1", "NV_CUDA_CUDART_DEV_VERSION": "12.4.127-1"},
}
LABEL = "io.envbuild.bench-run"


def services_base() -> str:
    value = os.environ.get("ENVBUILD_TEST_BASE_IMAGE")
    env = ROOT / ".services" / "env"
    if not value and env.is_file():
        value = next((line.split("=", 1)[1] for line in env.read_text().splitlines()
                      if line.startswith("ENVBUILD_TEST_BASE_IMAGE=")), None)
    if not value:
        raise SystemExit("start the services (scripts/services.sh up), or set ENVBUILD_TEST_BASE_IMAGE")
    return value.strip()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for(url: str, seconds: float = 30) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            requests.get(url, timeout=1)
            return
        except requests.RequestException:
            time.sleep(0.2)
    raise SystemExit(f"{url} did not answer")


def envbuild(*args, cwd: Path) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "envbuild", *map(str, args)], cwd=cwd, capture_output=True,
                          text=True)
    if proc.returncode:
        raise SystemExit(f"envbuild {' '.join(map(str, args))} failed:\n{proc.stderr[-3000:]}")
    return proc


def timed(func, *args, **kwargs):
    start = time.monotonic()
    value = func(*args, **kwargs)
    return value, time.monotonic() - start


def manifest(registry: str, ref: str) -> dict:
    name, tag = ref.rsplit(":", 1)
    path = name.split("/", 1)[1]
    answer = requests.get(f"http://{registry}/v2/{path}/manifests/{tag}", timeout=30,
                          headers={"Accept": "application/vnd.docker.distribution.manifest.v2+json"})
    answer.raise_for_status()
    return answer.json()


def blobs(registry: str, ref: str) -> dict[str, int]:
    return {layer["digest"]: layer["size"] for layer in manifest(registry, ref)["layers"]}


class Bench:
    def __init__(self, work: Path, cache: Path):
        self.work, self.cache = work, cache
        self.client = docker.from_env(timeout=3600)
        self.run = uuid.uuid4().hex[:10]
        self.processes: list[subprocess.Popen] = []

    # --- the registry and the wheel server this run starts ------------------------------------
    def start_registry(self) -> str:
        port = free_port()
        storage = self.work / "registry"
        config = self.work / "registry.yml"
        config.write_text(f"version: 0.1\nlog: {{level: error}}\nstorage:\n  filesystem: {{rootdirectory: {storage}}}\n"
                          f"http: {{addr: 127.0.0.1:{port}}}\n")
        self.processes.append(subprocess.Popen(["docker-registry", "serve", str(config)], stdout=subprocess.DEVNULL,
                                               stderr=subprocess.DEVNULL))
        wait_for(f"http://127.0.0.1:{port}/v2/")
        return f"127.0.0.1:{port}"

    def serve(self, folder: Path) -> str:
        port = free_port()
        self.processes.append(subprocess.Popen([sys.executable, "-m", "http.server", "--bind", "127.0.0.1", str(port),
                                                "--directory", str(folder)], stdout=subprocess.DEVNULL,
                                               stderr=subprocess.DEVNULL))
        wait_for(f"http://127.0.0.1:{port}/")
        return f"http://127.0.0.1:{port}/"

    def stop(self) -> None:
        for process in self.processes:
            process.terminate()
            process.wait(timeout=30)

    # --- images ----------------------------------------------------------------------------------
    def build(self, files: dict[str, bytes] | Path, tag: str, **options) -> float:
        """Build `tag` from `files` (one of them the Dockerfile) or a context folder; the
        seconds it took."""
        start = time.monotonic()
        if isinstance(files, Path):
            self.client.images.build(path=str(files), tag=tag, rm=True, forcerm=True, **options)
        else:
            support.build_image(self.client, tag, files, forcerm=True, **options)
        return time.monotonic() - start

    def push(self, ref: str) -> float:
        name, tag = ref.rsplit(":", 1)
        start = time.monotonic()
        for item in self.client.api.push(name, tag, stream=True, decode=True):
            if "error" in item:
                raise SystemExit(f"pushing {ref} failed: {item['error']}")
        return time.monotonic() - start

    def size(self, ref: str) -> int:
        return self.client.api.inspect_image(ref)["Size"]

    def remove_run_images(self) -> None:
        """Every image this run made carries its label (all are built on its bases). An
        image whose children are still there is refused, so the passes go on until one
        removes nothing."""
        while True:
            images = self.client.api.images(all=True, filters={"label": f"{LABEL}={self.run}"})
            removed = 0
            for image in sorted(images, key=lambda i: -i["Created"]):
                try:
                    self.client.api.remove_image(image["Id"], force=True)
                    removed += 1
                except docker.errors.APIError:  # a child not removed yet, or pruned with its child
                    pass
            if not images or not removed:
                return


def stub_wheels(folder: Path, pins: list[tuple[str, str]]) -> list[Path]:
    """A tiny wheel for each (name, version): the base's pip then lists them as installed."""
    return [support.make_wheel(folder, name.replace("-", "_"), version, f"VERSION = {version!r}\n")
            for name, version in pins]


def locked_pins(lock_dir: Path) -> list[tuple[str, str]]:
    from envbuild.dockerfile.locked import lock_entries

    text = (lock_dir / "requirements.lock").read_text()
    return [(name, version) for name, version, _ in lock_entries(text) if name and version]


def make_base(bench: Bench, recipe: str, registry: str, pip_wheel: Path, recipe_lock: Path | None) -> str:
    """The stand-in base of `recipe` for this run, pushed to the run's registry."""
    files = {f"w/{pip_wheel.name}": pip_wheel.read_bytes()}
    carried = ""
    if recipe_lock is not None:  # the framework image's pip closure, as stubs
        stubs = stub_wheels(bench.work / "stubs" / recipe, locked_pins(recipe_lock))
        files.update({f"w/{p.name}": p.read_bytes() for p in stubs})
        carried = " " + " ".join(f"{n}=={v}" for n, v in locked_pins(recipe_lock))
    env = " ".join(f'{k}="{v}"' for k, v in BASE_ENV[recipe].items())
    files["Dockerfile"] = (
        f"FROM {services_base()}\nLABEL {LABEL}={bench.run}\nENV {env}\nCOPY w/ /tmp/w/\n"
        f"RUN python3 /tmp/w/{pip_wheel.name}/pip install --no-cache-dir --no-index --find-links /tmp/w "
        f"--break-system-packages pip{carried} && rm -rf /tmp/w\n").encode()
    ref = f"{registry}/bench/{recipe}-base:{bench.run}"
    bench.build(files, ref)
    bench.push(ref)
    return ref


def write_spec(folder: Path, recipe: str, base: str, extras: list[str]) -> Path:
    spec = yaml.safe_load((ROOT / "recipes" / f"{recipe}.yaml").read_text())
    spec.pop("base", None)
    spec["base_image"] = base
    spec["packages"] = {"pip": extras}
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "spec.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def cold_builds(bench: Bench, work: Path, spec: Path, wheelhouse: Path, hand: bytes, runs: int) -> dict:
    """`runs` pairs of builds without the engine's cache, in turn: the context `envbuild
    dockerfile` writes (what `envbuild image` builds) and the hand-written Dockerfile. The
    median seconds of each, and the median of their ratio pair by pair (the machine's load
    drifts; a pair shares it)."""
    context = work / "cold-context"
    envbuild("dockerfile", spec, "--lock-dir", work / "lock", "--wheelhouse", wheelhouse, "-o", context, "-q", cwd=work)
    ours, theirs = [], []
    for i in range(runs):
        ours.append(bench.build(context, f"bench-cold-envbuild:{bench.run}-{i}", nocache=True))
        theirs.append(bench.build({"Dockerfile": hand}, f"bench-cold-hand:{bench.run}-{i}", nocache=True,
                                  network_mode="host"))
    return {"cold_runs": runs, "cold_envbuild_s": statistics.median(ours), "cold_hand_s": statistics.median(theirs),
            "cold_ratio": statistics.median(a / b for a, b in zip(ours, theirs))}


def measure(bench: Bench, recipe: str, registry: str, runs: int) -> dict:
    work = bench.work / recipe
    wheelhouse = bench.cache / f"wheelhouse-{recipe}"
    wheelhouse.mkdir(parents=True, exist_ok=True)
    pip_wheel = next(Path(os.environ.get("ENVBUILD_TEST_WHEELHOUSE", ROOT / ".services" / "wheelhouse")).glob(
        "pip-*.whl"))
    recipe_lock = None
    if recipe == "pytorch-official":  # the closure the real image carries: the recipe locked on its own base
        recipe_lock = work / "recipe-lock"
        envbuild("lock", ROOT / "recipes" / f"{recipe}.yaml", "-o", recipe_lock, cwd=ROOT)
    base = make_base(bench, recipe, registry, pip_wheel, recipe_lock)
    out = {"recipe": recipe, "base_bytes": bench.size(base)}

    # envbuild: lock, wheelhouse, build (timed), push (timed)
    spec = spec_a = write_spec(work / "a", recipe, base, EXTRAS[recipe])
    envbuild("lock", spec, "-o", work / "a" / "lock", cwd=work / "a")
    envbuild("wheelhouse", spec, "--lock-dir", work / "a" / "lock", "-o", wheelhouse, "-q", cwd=work / "a")
    image = ("image", spec, "--lock-dir", work / "a" / "lock", "--wheelhouse", wheelhouse,
             "--repository", f"{registry}/bench/{recipe}-envbuild", "--json", "-q")
    built, out["envbuild_build_s"] = timed(envbuild, *image, cwd=work / "a")
    ref = json.loads(built.stdout)["reference"]
    pushed, out["envbuild_push_s"] = timed(envbuild, *image, "--push", cwd=work / "a")
    first = json.loads(pushed.stdout)["sizes"]
    out["envbuild_image_bytes"] = first["image_bytes"]
    out["envbuild_added_bytes"] = first["added_bytes"]
    out["envbuild_layers"] = [(x["holds"], x["bytes"], x["compressed_bytes"]) for x in first["layers"]]
    out["envbuild_env_compressed"] = sum(x["compressed_bytes"] for x in first["layers"])

    # hand-written: the same pins from the same wheelhouse, one RUN
    pins = " ".join(f"{n}=={v}" for n, v in locked_pins(work / "a" / "lock"))
    url = bench.serve(wheelhouse)
    hand = f"{registry}/bench/{recipe}-hand:1"

    def dockerfile(pin_text: str) -> bytes:
        return (f"FROM {base}\nRUN pip install --no-cache-dir --no-index --find-links {url} --trusted-host 127.0.0.1 "
                f"--break-system-packages {pin_text}\n").encode()

    out["hand_build_s"] = bench.build({"Dockerfile": dockerfile(pins)}, hand, network_mode="host")
    out["hand_push_s"] = bench.push(hand)
    out["hand_image_bytes"] = bench.size(hand)
    out["hand_added_bytes"] = out["hand_image_bytes"] - out["base_bytes"]
    hand_blobs = blobs(registry, hand)
    out["hand_env_compressed"] = sum(list(hand_blobs.values())[len(manifest(registry, base)["layers"]):])

    # the change: one small pinned package to its next version, built and pushed again by both
    spec = write_spec(work / "b", recipe, base, [CHANGE[1] if x == CHANGE[0] else x for x in EXTRAS[recipe]])
    envbuild("lock", spec, "-o", work / "b" / "lock", cwd=work / "b")
    envbuild("wheelhouse", spec, "--lock-dir", work / "b" / "lock", "-o", wheelhouse, "-q", cwd=work / "b")
    changed, out["envbuild_change_s"] = timed(envbuild, "image", spec, "--lock-dir", work / "b" / "lock",
                                              "--wheelhouse", wheelhouse, "--repository",
                                              f"{registry}/bench/{recipe}-envbuild", "--json", "-q", "--push",
                                              cwd=work / "b")
    second = json.loads(changed.stdout)
    new = {d: n for d, n in blobs(registry, second["reference"]).items() if d not in blobs(registry, ref)}
    out["envbuild_change_pushed"] = sum(new.values())
    out["envbuild_change_pushed_reported"] = second["sizes"]["pushed_bytes"]
    out["envbuild_change_layers"] = [x["holds"] for x in second["sizes"]["layers"] if x["pushed"]]
    pins2 = " ".join(f"{n}=={v}" for n, v in locked_pins(work / "b" / "lock"))
    hand2 = f"{registry}/bench/{recipe}-hand:2"
    start = time.monotonic()
    bench.build({"Dockerfile": dockerfile(pins2)}, hand2, network_mode="host")
    bench.push(hand2)
    out["hand_change_s"] = time.monotonic() - start
    out["hand_change_pushed"] = sum(n for d, n in blobs(registry, hand2).items() if d not in hand_blobs)
    if runs:
        out.update(cold_builds(bench, work / "a", spec_a, wheelhouse, dockerfile(pins), runs))
    return out


def mb(n: int | None) -> str:
    return "?" if n is None else f"{n / 1e6:,.1f}"


def report(rows: list[dict]) -> None:
    print("| recipe | base MB | added MB: envbuild / hand-written (ratio) | build s: envbuild / hand-written "
          "| push s: envbuild / hand-written | env compressed MB: envbuild / hand-written "
          "| one-package change pushes MB: envbuild (share of env) / hand-written | change build+push s |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        ratio = r["envbuild_added_bytes"] / r["hand_added_bytes"] if r["hand_added_bytes"] else float("nan")
        share = r["envbuild_change_pushed"] / r["envbuild_env_compressed"]
        print(f"| {r['recipe']} | {mb(r['base_bytes'])} | {mb(r['envbuild_added_bytes'])} / {mb(r['hand_added_bytes'])} "
              f"({ratio:.3f}) | {r['envbuild_build_s']:.0f} / {r['hand_build_s']:.0f} "
              f"| {r['envbuild_push_s']:.0f} / {r['hand_push_s']:.0f} "
              f"| {mb(r['envbuild_env_compressed'])} / {mb(r['hand_env_compressed'])} "
              f"| {mb(r['envbuild_change_pushed'])} ({share:.1%}) / {mb(r['hand_change_pushed'])} "
              f"| {r['envbuild_change_s']:.0f} / {r['hand_change_s']:.0f} |")
    for r in rows:
        layers = ", ".join(f"{h} {mb(b)} MB ({mb(c)} compressed)" for h, b, c in r["envbuild_layers"])
        print(f"\n{r['recipe']}: envbuild's layers: {layers}; the change pushed the layers "
              f"{', '.join(r['envbuild_change_layers'])}: {r['envbuild_change_pushed_reported']} B as `image --json` "
              f"reports, {r['envbuild_change_pushed']} B of new blobs in the registry")
        if r.get("cold_runs"):
            print(f"{r['recipe']}: builds without the cache, medians of {r['cold_runs']} pairs: envbuild "
                  f"{r['cold_envbuild_s']:.1f} s, hand-written {r['cold_hand_s']:.1f} s, ratio {r['cold_ratio']:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--recipe", action="append", choices=RECIPES, help="repeatable; default: all three")
    parser.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "envbuild-bench",
                        help="where the wheelhouses are kept between runs")
    parser.add_argument("--keep", action="store_true", help="keep this run's images (default: removed)")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    parser.add_argument("--runs", type=int, default=0,
                        help="then time this many pairs of builds without the engine's cache (default: none)")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="envbuild-bench-lean-", dir=os.environ.get("TMPDIR")) as tmp:
        bench = Bench(Path(tmp), args.cache)
        try:
            registry = bench.start_registry()
            for recipe in args.recipe or RECIPES:
                print(f"{recipe}: measuring (load average {os.getloadavg()[0]:.1f})", file=sys.stderr, flush=True)
                rows.append(measure(bench, recipe, registry, args.runs))
                print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
        finally:
            bench.stop()
            if not args.keep:
                bench.remove_run_images()
            shutil.rmtree(Path(tmp) / "registry", ignore_errors=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
    report(rows)


if __name__ == "__main__":
    main()
