"""`envbuild init`: write a commented starter spec that resolves as it is."""
from __future__ import annotations

import json
import re
from pathlib import Path

from envbuild.hostenv import hostinfo
from envbuild.infra import atomic
from envbuild.infra.errors import EnvironmentProblem, UserError
from envbuild.output.jsonout import emit
from envbuild.spec.cli_args import SPEC_NAMES

# Used without --host: a common data-center target, so the file resolves out of the box.
EXAMPLE_TARGET = {"driver": "550.54.15", "gpus": ["A100"]}

TEMPLATE = """\
# envbuild spec: what environment you want and where it will run.
# Reference: docs/spec.md. Check it with `envbuild resolve {path}`.
name: {name}

# Frameworks and their version constraints (null = any). Also: tensorflow, jax, cupy, rapids.
frameworks:
  pytorch: "2.*"

# Left out, envbuild picks the CUDA, Python and installer that fit the target below.
# cuda: "12.4"
# python: "3.11"
# installer: conda          # conda | pip

# The machine the environment will run on: the driver as `nvidia-smi` prints it, and the
# GPU models (or compute capabilities such as "8.6"). {target_note}
target:
  driver: "{driver}"
  gpus: [{gpus}]
  platform: {platform}

# Base image family for `envbuild dockerfile` and `envbuild image`: auto | cuda | pytorch |
# tensorflow | rapids | dlc (or base_image: IMAGE:TAG). Left out, `resolve` judges the stack as it
# runs on the machine above; naming one (or image:) makes it judge the image build instead.
# base: auto

# Extra packages and environment variables for the image.
# packages: {{conda: [numpy], pip: ["einops==0.7.0"]}}
# env: {{OMP_NUM_THREADS: "4"}}

# Where `envbuild image` tags and pushes (envbuild chooses the tag).
# image: {{repository: registry.example.com/team/{name}}}
"""


def configure(parser) -> None:
    parser.add_argument("-o", "--output", type=Path, default=Path("envbuild.yaml"), metavar="FILE",
                        help="where to write the spec (default: envbuild.yaml)")
    parser.add_argument("--host", action="store_true",
                        help="target this machine: its NVIDIA driver and GPUs (needs nvidia-smi or NVML)")
    parser.add_argument("--name", default=None, help="environment name (default: the output file's folder name)")
    parser.add_argument("--force", action="store_true", help="replace an existing file")
    parser.add_argument("--json", action="store_true", help="print the outcome as JSON (schema/init.schema.json)")


def run(args) -> int:
    path = args.output
    if path.is_file() and not args.force:  # a device or pipe (-o /dev/stdout) is written through
        raise UserError("already exists", where=str(path), hint="pass --force to replace it, or -o another file")
    driver, gpus, note = EXAMPLE_TARGET["driver"], list(EXAMPLE_TARGET["gpus"]), \
        "These are an example: put your machine's here (`envbuild init --host` does it on that machine)."
    if args.host:
        try:
            host = hostinfo.detect(require_driver=True, check_docker=False)
        except EnvironmentProblem as exc:
            raise EnvironmentProblem(exc.message, where="--host",
                                     hint="run `envbuild init` without --host and write the target machine's "
                                          "driver and GPUs into the file") from None
        driver = host.driver
        gpus = list(dict.fromkeys(name for name, _ in host.gpus)) or gpus
        note = "Read from this host by `envbuild init --host`."
    raw_name = args.name or path.resolve().parent.name or "my-env"
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", raw_name).strip("-.") or "my-env"
    text = TEMPLATE.format(path=path.name, name=name, target_note=note, driver=driver,
                           gpus=", ".join(json.dumps(g) for g in gpus), platform="linux-64")
    atomic.write_output(path, text)
    if args.json:
        emit({"verdict": "ok", "path": str(path), "from_host": bool(args.host),
              "target": {"driver": driver, "gpus": gpus, "platform": "linux-64"}})
    else:
        found = path.name in SPEC_NAMES and path.resolve().parent == Path.cwd().resolve()  # what resolve finds
        print(f"wrote {path}; next: `envbuild resolve{'' if found else ' ' + str(path)}`")
    return 0
