"""envbuild: GPU software environments checked against the GPU they will run on."""

__version__ = "0.1.0"
