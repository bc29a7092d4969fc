# Rendered by envbuild VERSION for pytorch-official-l4: pytorch 2.8.0 (CUDA 12.8), CUDA 12.8, cuDNN 9.10.2.21, Python 3.11, pip on linux-64
# Base: pytorch/pytorch:2.8.0-cuda12.8-cudnn9-runtime
# Why this base: pytorch image with CUDA 12.8 matching the pytorch 2.8.0 build; runtime: the smallest flavour with the CUDA libraries the frameworks load
#
# pytorch/pytorch images carry PyTorch in the conda environment at /opt/conda, whose
# python3 is first on PATH; the installer runs with it. A pip environment is a venv over
# that Python with its site-packages visible, so the base's torch stays importable.
# Build stages keep the classic builder's image small: the installer, its wheels and the
# downloaded packages stay in the build stages.

FROM pytorch/pytorch:2.8.0-cuda12.8-cudnn9-runtime AS install
# The install stage runs as root to create the prefix; it is discarded, and the final stage
# keeps the base's own user.
# hadolint ignore=DL3002,DL3066
USER root
# Before anything is installed, the facts the stack relied on:
# - the base must carry the CUDA 12.8 the stack was checked against
RUN cuda="${CUDA_VERSION:-}" \
    && if [ -z "$cuda" ] && [ -f /usr/local/cuda/version.json ]; then \
        cuda="$(sed -n 's/^ *"version" *: *"\([0-9.]*\)".*/\1/p' /usr/local/cuda/version.json)"; \
        cuda="${cuda%%[!0-9.]*}"; \
    fi \
    && case "$cuda" in \
        ""|12.8|12.8.*) ;; \
        *) echo "envbuild: error: base image pytorch/pytorch:2.8.0-cuda12.8-cudnn9-runtime: it carries CUDA $cuda, the stack was checked against CUDA 12.8 (state the base's CUDA with base_image.cuda or --base-fact cuda=X.Y, or use a base image with CUDA 12.8, and lock again)" >&2; \
           exit 1 ;; \
    esac
COPY envbuild/ /tmp/envbuild/
RUN python3 /tmp/envbuild/install.py /tmp/envbuild/plan.json

FROM pytorch/pytorch:2.8.0-cuda12.8-cudnn9-runtime
COPY --from=install /opt/env /opt/env
COPY envbuild/image/ /opt/envbuild/
ENV PATH=/opt/env/bin:$PATH \
    NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility \
    NVIDIA_REQUIRE_CUDA="cuda>=12.8 driver>=525.60.13"
LABEL org.opencontainers.image.title="pytorch-official-l4" \
      org.opencontainers.image.description="GPU environment: pytorch 2.8.0 (CUDA 12.8), CUDA 12.8, cuDNN 9.10.2.21, Python 3.11, pip on linux-64" \
      org.opencontainers.image.base.name="pytorch/pytorch:2.8.0-cuda12.8-cudnn9-runtime" \
      io.envbuild.version="VERSION" \
      io.envbuild.spec-hash="d72a3180d7b64f20e7b25f8ccec9f80e9fab4820ab7b5c6b1c91821c3f124922" \
      io.envbuild.matrix-version="MATRIX-VERSION" \
      io.envbuild.frameworks="pytorch==2.8.0+cuda12.8" \
      io.envbuild.cuda="12.8" \
      io.envbuild.cudnn="9.10.2.21" \
      io.envbuild.python="3.11" \
      io.envbuild.installer="conda" \
      io.envbuild.platform="linux-64" \
      io.envbuild.driver="570.124.06" \
      io.envbuild.gpus="NVIDIA L4=8.9" \
      io.envbuild.base="pytorch/pytorch:2.8.0-cuda12.8-cudnn9-runtime" \
      io.envbuild.prefix="/opt/env" \
      io.envbuild.probe="/opt/envbuild/probe.py" \
      io.envbuild.installed.envbuild-demo="1.0"
