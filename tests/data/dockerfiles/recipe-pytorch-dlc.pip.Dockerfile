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
# - python3 must be the locked Python 3.12 (the pip environment is a venv over it)
# - the base must carry the CUDA 13.0 the stack was checked against
RUN found="$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')" \
    && if [ "$found" != "3.12" ]; then \
        echo "envbuild: error: base image 763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch:2.12.1-cu130-amzn2023: python3 is Python $found, the lock is for Python 3.12 (use a base image whose python3 is 3.12, or pin python: $found with a base image that has it, and lock again)" >&2; \
        exit 1; \
    fi \
    && cuda="${CUDA_VERSION:-}" \
    && if [ -z "$cuda" ] && [ -f /usr/local/cuda/version.json ]; then \
        cuda="$(sed -n 's/^ *"version" *: *"\([0-9.]*\)".*/\1/p' /usr/local/cuda/version.json)"; \
        cuda="${cuda%%[!0-9.]*}"; \
    fi \
    && case "$cuda" in \
        ""|13.0|13.0.*) ;; \
        *) echo "envbuild: error: base image 763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch:2.12.1-cu130-amzn2023: it carries CUDA $cuda, the stack was checked against CUDA 13.0 (state the base's CUDA with base_image.cuda or --base-fact cuda=X.Y, or use a base image with CUDA 13.0, and lock again)" >&2; \
           exit 1 ;; \
    esac
# The environment: a venv over the base's python3. Each layer of it is installed in a
# stage of its own below, from its part of the lock, so that a change to one package
# builds and pushes only its layer.
COPY envbuild/install.py envbuild/plan.json /tmp/envbuild/
RUN python3 /tmp/envbuild/install.py /tmp/envbuild/plan.json

# Layer frameworks: cupy-cuda12x 13.3.0
FROM install AS layer-frameworks
COPY envbuild/layers/frameworks/ /tmp/envbuild/layer/
RUN python3 /tmp/envbuild/install.py /tmp/envbuild/plan.json /tmp/envbuild/layer

# Layer dependencies: 2 pins: fastrlock 0.8.2, numpy 2.1.3
FROM install AS layer-dependencies
COPY envbuild/layers/dependencies/ /tmp/envbuild/layer/
RUN python3 /tmp/envbuild/install.py /tmp/envbuild/plan.json /tmp/envbuild/layer

# Layer package-1: einops 0.8.0
FROM install AS layer-package-1
COPY envbuild/layers/package-1/ /tmp/envbuild/layer/
RUN python3 /tmp/envbuild/install.py /tmp/envbuild/plan.json /tmp/envbuild/layer

FROM 763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch:2.12.1-cu130-amzn2023
COPY --from=install /opt/env /opt/env
COPY --from=layer-frameworks /tmp/envbuild/root/ /
COPY --from=layer-dependencies /tmp/envbuild/root/ /
COPY --from=layer-package-1 /tmp/envbuild/root/ /
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
      io.envbuild.installer="pip" \
      io.envbuild.platform="linux-64" \
      io.envbuild.driver="580.95.05" \
      io.envbuild.gpus="NVIDIA A100-80GB=8.0" \
      io.envbuild.base="763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch:2.12.1-cu130-amzn2023" \
      io.envbuild.prefix="/opt/env" \
      io.envbuild.probe="/opt/envbuild/probe.py" \
      io.envbuild.installed.envbuild-demo="1.0"
