# Rendered by envbuild VERSION for demo: cupy 13.3.0 (CUDA 12.1), CUDA 12.1, Python 3.11, conda on linux-64
# Base: pytorch/pytorch:2.3.1-cuda12.1-cudnn8-runtime
# Why this base: runtime flavour: smallest pytorch image with CUDA 12.1
#
# pytorch/pytorch images carry PyTorch in the conda environment at /opt/conda, whose
# python3 is first on PATH; the installer runs with it. A pip environment is a venv over
# that Python with its site-packages visible, so the base's torch stays importable.
# Build stages keep the classic builder's image small: the installer, its wheels and the
# downloaded packages stay in the build stages.

FROM pytorch/pytorch:2.3.1-cuda12.1-cudnn8-runtime AS install
# The install stage runs as root to create the prefix; it is discarded, and the final stage
# keeps the base's own user.
# hadolint ignore=DL3002,DL3066
USER root
# Before anything is installed, the facts the stack relied on:
# - python3 must be the locked Python 3.11 (the pip environment is a venv over it)
# - the base must carry the CUDA 12.1 the stack was checked against
RUN found="$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')" \
    && if [ "$found" != "3.11" ]; then \
        echo "envbuild: error: base image pytorch/pytorch:2.3.1-cuda12.1-cudnn8-runtime: python3 is Python $found, the lock is for Python 3.11 (use a base image whose python3 is 3.11, or pin python: $found with a base image that has it, and lock again)" >&2; \
        exit 1; \
    fi \
    && cuda="${CUDA_VERSION:-}" \
    && if [ -z "$cuda" ] && [ -f /usr/local/cuda/version.json ]; then \
        cuda="$(sed -n 's/^ *"version" *: *"\([0-9.]*\)".*/\1/p' /usr/local/cuda/version.json)"; \
        cuda="${cuda%%[!0-9.]*}"; \
    fi \
    && case "$cuda" in \
        ""|12.1|12.1.*) ;; \
        *) echo "envbuild: error: base image pytorch/pytorch:2.3.1-cuda12.1-cudnn8-runtime: it carries CUDA $cuda, the stack was checked against CUDA 12.1 (state the base's CUDA with base_image.cuda or --base-fact cuda=X.Y, or use a base image with CUDA 12.1, and lock again)" >&2; \
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

FROM pytorch/pytorch:2.3.1-cuda12.1-cudnn8-runtime
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
      org.opencontainers.image.base.name="pytorch/pytorch:2.3.1-cuda12.1-cudnn8-runtime" \
      io.envbuild.version="VERSION" \
      io.envbuild.spec-hash="95a0fb668cd648c1e9362478c9cde0818c96c327bcaa2a7b2b88abc69d3ffab2" \
      io.envbuild.matrix-version="MATRIX-VERSION" \
      io.envbuild.frameworks="cupy==13.3.0+cuda12.1" \
      io.envbuild.cuda="12.1" \
      io.envbuild.python="3.11" \
      io.envbuild.installer="pip" \
      io.envbuild.platform="linux-64" \
      io.envbuild.driver="535.104.05" \
      io.envbuild.gpus="NVIDIA A100=8.0" \
      io.envbuild.base="pytorch/pytorch:2.3.1-cuda12.1-cudnn8-runtime" \
      io.envbuild.prefix="/opt/env" \
      io.envbuild.probe="/opt/envbuild/probe.py" \
      io.envbuild.installed.envbuild-demo="1.0"
