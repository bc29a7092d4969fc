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
# - python3 must be the locked Python 3.12 (the pip environment is a venv over it)
# - the base must carry the CUDA 12.2 the stack was checked against
RUN found="$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')" \
    && if [ "$found" != "3.12" ]; then \
        echo "envbuild: error: base image nvidia/cuda:12.2.2-runtime-ubuntu22.04: python3 is Python $found, the lock is for Python 3.12 (use a base image whose python3 is 3.12, or pin python: $found with a base image that has it, and lock again)" >&2; \
        exit 1; \
    fi \
    && cuda="${CUDA_VERSION:-}" \
    && if [ -z "$cuda" ] && [ -f /usr/local/cuda/version.json ]; then \
        cuda="$(sed -n 's/^ *"version" *: *"\([0-9.]*\)".*/\1/p' /usr/local/cuda/version.json)"; \
        cuda="${cuda%%[!0-9.]*}"; \
    fi \
    && case "$cuda" in \
        ""|12.2|12.2.*) ;; \
        *) echo "envbuild: error: base image nvidia/cuda:12.2.2-runtime-ubuntu22.04: it carries CUDA $cuda, the stack was checked against CUDA 12.2 (state the base's CUDA with base_image.cuda or --base-fact cuda=X.Y, or use a base image with CUDA 12.2, and lock again)" >&2; \
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

FROM nvidia/cuda:12.2.2-runtime-ubuntu22.04
# The pip environment is a venv over the system Python, which nvidia/cuda lacks.
# hadolint ignore=DL3008
RUN if ! command -v python3 >/dev/null 2>&1; then \
        apt-get update \
        && apt-get install -y --no-install-recommends python3 \
        && rm -rf /var/lib/apt/lists/*; \
    fi
COPY --from=install /opt/env /opt/env
COPY --from=layer-frameworks /tmp/envbuild/root/ /
COPY --from=layer-dependencies /tmp/envbuild/root/ /
COPY --from=layer-package-1 /tmp/envbuild/root/ /
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
      io.envbuild.installer="pip" \
      io.envbuild.platform="linux-64" \
      io.envbuild.driver="535.104.05" \
      io.envbuild.gpus="NVIDIA T4=7.5" \
      io.envbuild.base="nvidia/cuda:12.2.2-runtime-ubuntu22.04" \
      io.envbuild.prefix="/opt/env" \
      io.envbuild.probe="/opt/envbuild/probe.py" \
      io.envbuild.installed.envbuild-demo="1.0"
