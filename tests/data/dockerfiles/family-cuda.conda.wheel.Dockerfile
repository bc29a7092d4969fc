# Rendered by envbuild VERSION for demo: cupy 13.3.0 (CUDA 12.4), CUDA 12.4, Python 3.11, conda on linux-64
# Base: nvidia/cuda:12.4.1-runtime-ubuntu22.04
# Why this base: runtime flavour: smallest cuda image with CUDA 12.4
#
# Build stages keep the classic builder's image small: the installer, its wheels and the
# downloaded packages stay in the build stages; the final image receives only the
# environment prefix, the lockfiles and the verification probe.

FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04 AS install
# The install stage runs as root to create the prefix; it is discarded, and the final stage
# keeps the base's own user.
# hadolint ignore=DL3002,DL3066
USER root
# nvidia/cuda images ship no Python; install.py needs python3 in this stage.
# The distribution's own python3: its version is the base release's, so pinning it would
# break with the next base; the lock pins everything installed into the environment.
# hadolint ignore=DL3008
RUN if ! command -v python3 >/dev/null 2>&1; then \
        apt-get update \
        && apt-get install -y --no-install-recommends python3 python3-venv \
        && rm -rf /var/lib/apt/lists/*; \
    fi
# Before anything is installed, the facts the stack relied on:
# - the base must carry the CUDA 12.4 the stack was checked against
RUN cuda="${CUDA_VERSION:-}" \
    && if [ -z "$cuda" ] && [ -f /usr/local/cuda/version.json ]; then \
        cuda="$(sed -n 's/^ *"version" *: *"\([0-9.]*\)".*/\1/p' /usr/local/cuda/version.json)"; \
        cuda="${cuda%%[!0-9.]*}"; \
    fi \
    && case "$cuda" in \
        ""|12.4|12.4.*) ;; \
        *) echo "envbuild: error: base image nvidia/cuda:12.4.1-runtime-ubuntu22.04: it carries CUDA $cuda, the stack was checked against CUDA 12.4 (state the base's CUDA with base_image.cuda or --base-fact cuda=X.Y, or use a base image with CUDA 12.4, and lock again)" >&2; \
           exit 1 ;; \
    esac
COPY envbuild/ /tmp/envbuild/
RUN python3 /tmp/envbuild/install.py /tmp/envbuild/plan.json

FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04
COPY --from=install /opt/env /opt/env
COPY envbuild/image/ /opt/envbuild/
ENV PATH=/opt/env/bin:$PATH \
    NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility \
    NVIDIA_REQUIRE_CUDA="cuda>=12.4 driver>=525.60.13"
LABEL org.opencontainers.image.title="demo" \
      org.opencontainers.image.description="GPU environment: cupy 13.3.0 (CUDA 12.4), CUDA 12.4, Python 3.11, conda on linux-64" \
      org.opencontainers.image.base.name="nvidia/cuda:12.4.1-runtime-ubuntu22.04" \
      io.envbuild.version="VERSION" \
      io.envbuild.spec-hash="4d91e946e73f2312eec80d17fee3be06b45c7ed4e95cc731c686073d89d029b4" \
      io.envbuild.matrix-version="MATRIX-VERSION" \
      io.envbuild.frameworks="cupy==13.3.0+cuda12.4" \
      io.envbuild.cuda="12.4" \
      io.envbuild.python="3.11" \
      io.envbuild.installer="conda" \
      io.envbuild.platform="linux-64" \
      io.envbuild.driver="535.104.05" \
      io.envbuild.gpus="NVIDIA A100=8.0" \
      io.envbuild.base="nvidia/cuda:12.4.1-runtime-ubuntu22.04" \
      io.envbuild.prefix="/opt/env" \
      io.envbuild.probe="/opt/envbuild/probe.py" \
      io.envbuild.installed.envbuild-demo="1.0"
