"""`envbuild lock`: lockfiles that install exactly the resolved GPU stack.

The conda path solves with py-rattler against the spec's channels for the TARGET machine
(virtual packages from the resolved driver and base image, not from the build host) and
writes conda-lock's unified `conda-lock.yml` plus one `@EXPLICIT` file per platform. The
pip path pins the framework wheel of the resolved CUDA variant and its index. `api.lock`
is the entry point for other commands; nothing heavy is imported at package import.
"""
