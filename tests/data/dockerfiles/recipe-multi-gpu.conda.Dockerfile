# Rendered by envbuild VERSION for fleet-v100-a100-h100: pytorch 2.14.1 (CUDA 12.6), CUDA 12.6, cuDNN 9.10.2.21, Python 3.12, pip on linux-64
# Base: nvidia/cuda:12.6.3-runtime-ubuntu24.04
# Why this base: cuda image with CUDA 12.6.3; runtime: the smallest flavour with the CUDA libraries the frameworks load
#
# Build stages keep the classic builder's image small: the installer, its wheels and the
# downloaded packages stay in the build stages; the final image receives only the
# environment prefix, the lockfiles and the verification probe.

FROM nvidia/cuda:12.6.3-runtime-ubuntu24.04 AS install
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
# - the base must carry the CUDA 12.6 the stack was checked against
RUN cuda="${CUDA_VERSION:-}" \
    && if [ -z "$cuda" ] && [ -f /usr/local/cuda/version.json ]; then \
        cuda="$(sed -n 's/^ *"version" *: *"\([0-9.]*\)".*/\1/p' /usr/local/cuda/version.json)"; \
        cuda="${cuda%%[!0-9.]*}"; \
    fi \
    && case "$cuda" in \
        ""|12.6|12.6.*) ;; \
        *) echo "envbuild: error: base image nvidia/cuda:12.6.3-runtime-ubuntu24.04: it carries CUDA $cuda, the stack was checked against CUDA 12.6 (state the base's CUDA with base_image.cuda or --base-fact cuda=X.Y, or use a base image with CUDA 12.6, and lock again)" >&2; \
           exit 1 ;; \
    esac
COPY envbuild/ /tmp/envbuild/
RUN python3 /tmp/envbuild/install.py /tmp/envbuild/plan.json

FROM nvidia/cuda:12.6.3-runtime-ubuntu24.04
COPY --from=install /opt/env /opt/env
COPY envbuild/image/ /opt/envbuild/
ENV PATH=/opt/env/bin:$PATH \
    NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility \
    NVIDIA_REQUIRE_CUDA="cuda>=12.6 driver>=525.60.13"
LABEL org.opencontainers.image.title="fleet-v100-a100-h100" \
      org.opencontainers.image.description="GPU environment: pytorch 2.14.1 (CUDA 12.6), CUDA 12.6, cuDNN 9.10.2.21, Python 3.12, pip on linux-64" \
      org.opencontainers.image.base.name="nvidia/cuda:12.6.3-runtime-ubuntu24.04" \
      io.envbuild.version="VERSION" \
      io.envbuild.spec-hash="34ce08af4b8960d19c138277e96397f268adcd317e54527d81443b25617cc35a" \
      io.envbuild.matrix-version="MATRIX-VERSION" \
      io.envbuild.frameworks="pytorch==2.14.1+cuda12.6" \
      io.envbuild.cuda="12.6" \
      io.envbuild.cudnn="9.10.2.21" \
      io.envbuild.python="3.12" \
      io.envbuild.installer="conda" \
      io.envbuild.platform="linux-64" \
      io.envbuild.driver="570.124.06" \
      io.envbuild.gpus="NVIDIA V100=7.0,NVIDIA A100=8.0,NVIDIA H100=9.0" \
      io.envbuild.base="nvidia/cuda:12.6.3-runtime-ubuntu24.04" \
      io.envbuild.prefix="/opt/env" \
      io.envbuild.probe="/opt/envbuild/probe.py" \
      io.envbuild.installed.envbuild-demo="1.0"
