# Rendered by envbuild @{envbuild_version} for @{name}: @{stack_summary}
# Base: @{base_ref}
# Why this base: @{base_why}
#
@{family_comment}
FROM @{base_ref} AS install
# The install stage runs as root to create the prefix; it is discarded, and the final stage
# keeps the base's own user.
# hadolint ignore=DL3002,DL3066
USER root
@{install_python}@{base_check}@{install_steps}
@{layer_stages}FROM @{base_ref}
@{runtime_python}@{environment_copies}COPY envbuild/image/ /opt/envbuild/
ENV PATH=@{prefix}/bin:$PATH \
    NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility \
    NVIDIA_REQUIRE_CUDA=@{require_cuda}@{user_env}
LABEL @{labels}
