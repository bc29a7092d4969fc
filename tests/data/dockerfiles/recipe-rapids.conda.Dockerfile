# Rendered by envbuild VERSION for rapids-t4: rapids 24.12 (CUDA 12.5), CUDA 12.5, Python 3.12, conda on linux-64
# Base: nvidia/cuda:12.2.2-runtime-ubuntu22.04
# Why this base: cuda image with CUDA 12.2.2; runtime: the smallest flavour with the CUDA libraries the frameworks load
#
# Build stages keep the classic builder's image small: the installer, its wheels and the
# downloaded packages stay in the build stages; the final image receives only the
# environment prefix, the lockfiles and the verification probe.

FROM nvidia/cuda:12.2.2-runtime-ubuntu22.04 AS install
# The install stage runs as root to create the prefix; it is discarded, and the final stage
# keeps the base's own user.
# hadolint ignore=DL3002,DL3066
USER root
# nvidia/cuda images ship no Python; install.py needs python3 with ensurepip (python3-venv) in this stage.
# The distribution's own python3: its version is the base release's, so pinning it would
# break with the next base; the lock pins everything installed into the environment.
# hadolint ignore=DL3008
RUN if ! python3 -c 'import ensurepip' >/dev/null 2>&1; then \
        apt-get update \
        && apt-get install -y --no-install-recommends python3 python3-venv \
        && rm -rf /var/lib/apt/lists/*; \
    fi
# Before anything is installed, the facts the stack relied on:
# - the base must carry the CUDA 12.2 the stack was checked against
RUN cuda="${CUDA_VERSION:-}" \
    && if [ -z "$cuda" ] && [ -f /usr/local/cuda/version.json ]; then \
        cuda="$(sed -n 's/^ *"version" *: *"\([0-9.]*\)".*/\1/p' /usr/local/cuda/version.json)"; \
        cuda="${cuda%%[!0-9.]*}"; \
    fi \
    && case "$cuda" in \
        ""|12.2|12.2.*) ;; \
        *) echo "envbuild: error: base image nvidia/cuda:12.2.2-runtime-ubuntu22.04: it carries CUDA $cuda, the stack was checked against CUDA 12.2 (state the base's CUDA with base_image.cuda or --base-fact cuda=X.Y, or use a base image with CUDA 12.2, and lock again)" >&2; \
           exit 1 ;; \
    esac
COPY envbuild/ /tmp/envbuild/
RUN python3 /tmp/envbuild/install.py /tmp/envbuild/plan.json

FROM nvidia/cuda:12.2.2-runtime-ubuntu22.04
COPY --from=install /opt/env /opt/env
COPY envbuild/image/ /opt/envbuild/
ENV PATH=/opt/env/bin:$PATH \
    NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility \
    NVIDIA_REQUIRE_CUDA="cuda>=12.5 driver>=525.60.13"
LABEL org.opencontainers.image.title="rapids-t4" \
      org.opencontainers.image.description="GPU environment: rapids 24.12 (CUDA 12.5), CUDA 12.5, Python 3.12, conda on linux-64" \
      org.opencontainers.image.base.name="nvidia/cuda:12.2.2-runtime-ubuntu22.04" \
      io.envbuild.version="VERSION" \
      io.envbuild.spec-hash="13c082c6615bb2b8893aefde6857491511c79d14010337d36a96c1126cb1e693" \
      io.envbuild.matrix-version="MATRIX-VERSION" \
      io.envbuild.frameworks="rapids==24.12+cuda12.5" \
      io.envbuild.cuda="12.5" \
      io.envbuild.python="3.12" \
      io.envbuild.installer="conda" \
      io.envbuild.platform="linux-64" \
      io.envbuild.driver="535.104.05" \
      io.envbuild.gpus="NVIDIA T4=7.5" \
      io.envbuild.base="nvidia/cuda:12.2.2-runtime-ubuntu22.04" \
      io.envbuild.prefix="/opt/env" \
      io.envbuild.probe="/opt/envbuild/probe.py" \
      io.envbuild.installed.envbuild-demo="1.0"
