# Rendered by envbuild VERSION for demo: cupy 13.3.0 (CUDA 12.1), CUDA 12.1, Python 3.11, conda on linux-64
# Base: 763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.3.0-gpu-py311-cu121-ubuntu20.04-ec2
# Why this base: dlc flavour: smallest dlc image with CUDA 12.1
#
# AWS Deep Learning Containers live in ECR; pulling the base needs
# `aws ecr get-login-password | docker login --username AWS --password-stdin <registry>`
# (or a pull-through mirror given with --registry-mirror). They run as root with their
# framework in the Python first on PATH; the installer runs with that Python and a pip
# environment is a venv over it, so the base's framework stays importable.
# Build stages keep the classic builder's image small: the installer, its wheels and the
# downloaded packages stay in the build stages.

FROM 763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.3.0-gpu-py311-cu121-ubuntu20.04-ec2 AS install
# The install stage runs as root to create the prefix; it is discarded, and the final stage
# keeps the base's own user.
# hadolint ignore=DL3002,DL3066
USER root
# Before anything is installed, the facts the stack relied on:
# - python3 must be the locked Python 3.11 (the pip environment is a venv over it)
# - the base must carry the CUDA 12.1 the stack was checked against
RUN found="$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')" \
    && if [ "$found" != "3.11" ]; then \
        echo "envbuild: error: base image 763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.3.0-gpu-py311-cu121-ubuntu20.04-ec2: python3 is Python $found, the lock is for Python 3.11 (use a base image whose python3 is 3.11, or pin python: $found with a base image that has it, and lock again)" >&2; \
        exit 1; \
    fi \
    && cuda="${CUDA_VERSION:-}" \
    && if [ -z "$cuda" ] && [ -f /usr/local/cuda/version.json ]; then \
        cuda="$(sed -n 's/^ *"version" *: *"\([0-9.]*\)".*/\1/p' /usr/local/cuda/version.json)"; \
        cuda="${cuda%%[!0-9.]*}"; \
    fi \
    && case "$cuda" in \
        ""|12.1|12.1.*) ;; \
        *) echo "envbuild: error: base image 763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.3.0-gpu-py311-cu121-ubuntu20.04-ec2: it carries CUDA $cuda, the stack was checked against CUDA 12.1 (state the base's CUDA with base_image.cuda or --base-fact cuda=X.Y, or use a base image with CUDA 12.1, and lock again)" >&2; \
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

FROM 763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.3.0-gpu-py311-cu121-ubuntu20.04-ec2
COPY --from=install /opt/env /opt/env
COPY --from=layer-frameworks /tmp/envbuild/root/ /
COPY --from=layer-dependencies /tmp/envbuild/root/ /
COPY --from=layer-package-1 /tmp/envbuild/root/ /
COPY envbuild/image/ /opt/envbuild/
ENV PATH=/opt/env/bin:$PATH \
    NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility \
    NVIDIA_REQUIRE_CUDA="cuda>=12.1 driver>=525.60.13"
LABEL org.opencontainers.image.title="demo" \
      org.opencontainers.image.description="GPU environment: cupy 13.3.0 (CUDA 12.1), CUDA 12.1, Python 3.11, conda on linux-64" \
      org.opencontainers.image.base.name="763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.3.0-gpu-py311-cu121-ubuntu20.04-ec2" \
      io.envbuild.version="VERSION" \
      io.envbuild.spec-hash="d21aef29cbd39f71b9d141fb277e6d59ee7b7c353cddf270ecf2facefcedfd3c" \
      io.envbuild.matrix-version="MATRIX-VERSION" \
      io.envbuild.frameworks="cupy==13.3.0+cuda12.1" \
      io.envbuild.cuda="12.1" \
      io.envbuild.python="3.11" \
      io.envbuild.installer="pip" \
      io.envbuild.platform="linux-64" \
      io.envbuild.driver="535.104.05" \
      io.envbuild.gpus="NVIDIA A100=8.0" \
      io.envbuild.base="763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.3.0-gpu-py311-cu121-ubuntu20.04-ec2" \
      io.envbuild.prefix="/opt/env" \
      io.envbuild.probe="/opt/envbuild/probe.py" \
      io.envbuild.installed.envbuild-demo="1.0"
