# Rendered by envbuild @{envbuild_version} for @{name}: @{stack_summary}
# Base: @{base_ref}
# Why this base: @{base_why}
#
# Two stages keep the classic builder's image small: the installer, its wheels and the
# downloaded packages stay in the `install` stage; the final image receives only the
# environment prefix, the lockfiles and the verification probe.

FROM @{base_ref} AS install
USER root
@{install_python}@{python_check}COPY envbuild/ /tmp/envbuild/
RUN python3 /tmp/envbuild/install.py /tmp/envbuild/plan.json

FROM @{base_ref}
@{runtime_python}COPY --from=install @{prefix} @{prefix}
COPY envbuild/image/ /opt/envbuild/
ENV PATH=@{prefix}/bin:$PATH \
    NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility \
    NVIDIA_REQUIRE_CUDA=@{require_cuda}@{user_env}
LABEL @{labels}
