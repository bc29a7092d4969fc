# Rendered by envbuild VERSION for demo: cupy 13.3.0 (CUDA 12.2), CUDA 12.2, Python 3.11, conda on linux-64
# Base: tensorflow/tensorflow:2.15.0-gpu
# Why this base: tensorflow flavour: smallest tensorflow image with CUDA 12.2
#
# tensorflow/tensorflow GPU images install TensorFlow with pip into the system Python
# (/usr/bin/python3). A pip environment is a venv over that Python with its
# site-packages visible, so the base's TensorFlow stays importable.
# Build stages keep the classic builder's image small: the installer, its wheels and the
# downloaded packages stay in the build stages.

FROM tensorflow/tensorflow:2.15.0-gpu AS install
# The install stage runs as root to create the prefix; it is discarded, and the final stage
# keeps the base's own user.
# hadolint ignore=DL3002,DL3066
USER root
# Before anything is installed, the facts the stack relied on:
# - the base must carry the CUDA 12.2 the stack was checked against
RUN cuda="${CUDA_VERSION:-}" \
    && if [ -z "$cuda" ] && [ -f /usr/local/cuda/version.json ]; then \
        cuda="$(sed -n 's/^ *"version" *: *"\([0-9.]*\)".*/\1/p' /usr/local/cuda/version.json)"; \
        cuda="${cuda%%[!0-9.]*}"; \
    fi \
    && case "$cuda" in \
        ""|12.2|12.2.*) ;; \
        *) echo "envbuild: error: base image tensorflow/tensorflow:2.15.0-gpu: it carries CUDA $cuda, the stack was checked against CUDA 12.2 (state the base's CUDA with base_image.cuda or --base-fact cuda=X.Y, or use a base image with CUDA 12.2, and lock again)" >&2; \
           exit 1 ;; \
    esac
COPY envbuild/ /tmp/envbuild/
RUN python3 /tmp/envbuild/install.py /tmp/envbuild/plan.json

FROM tensorflow/tensorflow:2.15.0-gpu
COPY --from=install /opt/env /opt/env
COPY envbuild/image/ /opt/envbuild/
ENV PATH=/opt/env/bin:$PATH \
    NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility \
    NVIDIA_REQUIRE_CUDA="cuda>=12.2 driver>=525.60.13"
LABEL org.opencontainers.image.title="demo" \
      org.opencontainers.image.description="GPU environment: cupy 13.3.0 (CUDA 12.2), CUDA 12.2, Python 3.11, conda on linux-64" \
      org.opencontainers.image.base.name="tensorflow/tensorflow:2.15.0-gpu" \
      io.envbuild.version="VERSION" \
      io.envbuild.spec-hash="e78bc614401f22dd977c19ad60efa883362cdfa81576bb365b58c6496eb1911b" \
      io.envbuild.matrix-version="MATRIX-VERSION" \
      io.envbuild.frameworks="cupy==13.3.0+cuda12.2" \
      io.envbuild.cuda="12.2" \
      io.envbuild.python="3.11" \
      io.envbuild.installer="conda" \
      io.envbuild.platform="linux-64" \
      io.envbuild.driver="535.104.05" \
      io.envbuild.gpus="NVIDIA A100=8.0" \
      io.envbuild.base="tensorflow/tensorflow:2.15.0-gpu" \
      io.envbuild.prefix="/opt/env" \
      io.envbuild.probe="/opt/envbuild/probe.py" \
      io.envbuild.installed.envbuild-demo="1.0"
