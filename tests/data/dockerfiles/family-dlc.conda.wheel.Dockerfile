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
# - the base must carry the CUDA 12.1 the stack was checked against
RUN cuda="${CUDA_VERSION:-}" \
    && if [ -z "$cuda" ] && [ -f /usr/local/cuda/version.json ]; then \
        cuda="$(sed -n 's/^ *"version" *: *"\([0-9.]*\)".*/\1/p' /usr/local/cuda/version.json)"; \
        cuda="${cuda%%[!0-9.]*}"; \
    fi \
    && case "$cuda" in \
        ""|12.1|12.1.*) ;; \
        *) echo "envbuild: error: base image 763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.3.0-gpu-py311-cu121-ubuntu20.04-ec2: it carries CUDA $cuda, the stack was checked against CUDA 12.1 (state the base's CUDA with base_image.cuda or --base-fact cuda=X.Y, or use a base image with CUDA 12.1, and lock again)" >&2; \
           exit 1 ;; \
    esac
COPY envbuild/ /tmp/envbuild/
RUN python3 /tmp/envbuild/install.py /tmp/envbuild/plan.json

FROM 763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.3.0-gpu-py311-cu121-ubuntu20.04-ec2
COPY --from=install /opt/env /opt/env
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
      io.envbuild.installer="conda" \
      io.envbuild.platform="linux-64" \
      io.envbuild.driver="535.104.05" \
      io.envbuild.gpus="NVIDIA A100=8.0" \
      io.envbuild.base="763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.3.0-gpu-py311-cu121-ubuntu20.04-ec2" \
      io.envbuild.prefix="/opt/env" \
      io.envbuild.probe="/opt/envbuild/probe.py" \
      io.envbuild.installed.envbuild-demo="1.0"
