# Rendered by envbuild VERSION for demo: cupy 13.3.0 (CUDA 12.4), CUDA 12.4, Python 3.11, conda on linux-64
# Base: registry.example.com/acme/ml-base:2024.1
# Why this base: runtime flavour: smallest custom image with CUDA 12.4
#
# The base is an image outside envbuild's catalog; the facts the stack was checked
# against (above) were stated in the spec or read from the image. The installer runs
# with its python3, and a pip environment is a venv over that Python with its
# site-packages visible, so what the base carries stays importable. The first build
# step checks the Python and CUDA those facts named.
# Build stages keep the classic builder's image small: the installer, its wheels and the
# downloaded packages stay in the build stages.

FROM registry.example.com/acme/ml-base:2024.1 AS install
# The install stage runs as root to create the prefix; it is discarded, and the final stage
# keeps the base's own user.
# hadolint ignore=DL3002,DL3066
USER root
# Before anything is installed, the facts the stack relied on:
# - the base must carry the CUDA 12.4 the stack was checked against
RUN cuda="${CUDA_VERSION:-}" \
    && if [ -z "$cuda" ] && [ -f /usr/local/cuda/version.json ]; then \
        cuda="$(sed -n 's/^ *"version" *: *"\([0-9.]*\)".*/\1/p' /usr/local/cuda/version.json)"; \
        cuda="${cuda%%[!0-9.]*}"; \
    fi \
    && case "$cuda" in \
        ""|12.4|12.4.*) ;; \
        *) echo "envbuild: error: base image registry.example.com/acme/ml-base:2024.1: it carries CUDA $cuda, the stack was checked against CUDA 12.4 (state the base's CUDA with base_image.cuda or --base-fact cuda=X.Y, or use a base image with CUDA 12.4, and lock again)" >&2; \
           exit 1 ;; \
    esac
COPY envbuild/ /tmp/envbuild/
RUN python3 /tmp/envbuild/install.py /tmp/envbuild/plan.json

FROM registry.example.com/acme/ml-base:2024.1
COPY --from=install /opt/env /opt/env
COPY envbuild/image/ /opt/envbuild/
ENV PATH=/opt/env/bin:$PATH \
    NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility \
    NVIDIA_REQUIRE_CUDA="cuda>=12.4 driver>=525.60.13"
LABEL org.opencontainers.image.title="demo" \
      org.opencontainers.image.description="GPU environment: cupy 13.3.0 (CUDA 12.4), CUDA 12.4, Python 3.11, conda on linux-64" \
      org.opencontainers.image.base.name="registry.example.com/acme/ml-base:2024.1" \
      io.envbuild.version="VERSION" \
      io.envbuild.spec-hash="ad4528e9b57a2e96b762cbca4815444878f809a3c52dd222043b55757f3bbc7f" \
      io.envbuild.matrix-version="MATRIX-VERSION" \
      io.envbuild.frameworks="cupy==13.3.0+cuda12.4" \
      io.envbuild.cuda="12.4" \
      io.envbuild.python="3.11" \
      io.envbuild.installer="conda" \
      io.envbuild.platform="linux-64" \
      io.envbuild.driver="535.104.05" \
      io.envbuild.gpus="NVIDIA A100=8.0" \
      io.envbuild.base="registry.example.com/acme/ml-base:2024.1" \
      io.envbuild.prefix="/opt/env" \
      io.envbuild.probe="/opt/envbuild/probe.py" \
      io.envbuild.installed.envbuild-demo="1.0"
