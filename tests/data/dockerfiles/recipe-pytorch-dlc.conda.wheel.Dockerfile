# Rendered by envbuild VERSION for pytorch-dlc-a100: pytorch 2.12.1 (CUDA 13.0), CUDA 13.0, cuDNN 9.20.0.48, Python 3.12, pip on linux-64
# Base: 763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch:2.12.1-cu130-amzn2023
# Why this base: dlc image with CUDA 13.0 matching the pytorch 2.12.1 build; the framework image as published
#
# AWS Deep Learning Containers live in ECR; pulling the base needs
# `aws ecr get-login-password | docker login --username AWS --password-stdin <registry>`
# (or a pull-through mirror given with --registry-mirror). They run as root with their
# framework in the Python first on PATH; the installer runs with that Python and a pip
# environment is a venv over it, so the base's framework stays importable.
# Build stages keep the classic builder's image small: the installer, its wheels and the
# downloaded packages stay in the build stages.

FROM 763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch:2.12.1-cu130-amzn2023 AS install
# The install stage runs as root to create the prefix; it is discarded, and the final stage
# keeps the base's own user.
# hadolint ignore=DL3002,DL3066
USER root
# Before anything is installed, the facts the stack relied on:
# - the base must carry the CUDA 13.0 the stack was checked against
RUN cuda="${CUDA_VERSION:-}" \
    && if [ -z "$cuda" ] && [ -f /usr/local/cuda/version.json ]; then \
        cuda="$(sed -n 's/^ *"version" *: *"\([0-9.]*\)".*/\1/p' /usr/local/cuda/version.json)"; \
        cuda="${cuda%%[!0-9.]*}"; \
    fi \
    && case "$cuda" in \
        ""|13.0|13.0.*) ;; \
        *) echo "envbuild: error: base image 763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch:2.12.1-cu130-amzn2023: it carries CUDA $cuda, the stack was checked against CUDA 13.0 (state the base's CUDA with base_image.cuda or --base-fact cuda=X.Y, or use a base image with CUDA 13.0, and lock again)" >&2; \
           exit 1 ;; \
    esac
COPY envbuild/ /tmp/envbuild/
RUN python3 /tmp/envbuild/install.py /tmp/envbuild/plan.json

FROM 763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch:2.12.1-cu130-amzn2023
COPY --from=install /opt/env /opt/env
COPY envbuild/image/ /opt/envbuild/
ENV PATH=/opt/env/bin:$PATH \
    NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility \
    NVIDIA_REQUIRE_CUDA="cuda>=13.0"
LABEL org.opencontainers.image.title="pytorch-dlc-a100" \
      org.opencontainers.image.description="GPU environment: pytorch 2.12.1 (CUDA 13.0), CUDA 13.0, cuDNN 9.20.0.48, Python 3.12, pip on linux-64" \
      org.opencontainers.image.base.name="763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch:2.12.1-cu130-amzn2023" \
      io.envbuild.version="VERSION" \
      io.envbuild.spec-hash="4d821fdc62c2b31a1d9829d63df11e4034d4be3ce6b6fca254a112c1caaf99c4" \
      io.envbuild.matrix-version="MATRIX-VERSION" \
      io.envbuild.frameworks="pytorch==2.12.1+cuda13.0" \
      io.envbuild.cuda="13.0" \
      io.envbuild.cudnn="9.20.0.48" \
      io.envbuild.python="3.12" \
      io.envbuild.installer="conda" \
      io.envbuild.platform="linux-64" \
      io.envbuild.driver="580.95.05" \
      io.envbuild.gpus="NVIDIA A100-80GB=8.0" \
      io.envbuild.base="763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch:2.12.1-cu130-amzn2023" \
      io.envbuild.prefix="/opt/env" \
      io.envbuild.probe="/opt/envbuild/probe.py" \
      io.envbuild.installed.envbuild-demo="1.0"
