"""The hooks one framework plugin provides.

A plugin is a `Framework` subclass instance named `PLUGIN` in `envbuild/frameworks/<name>.py`.
Its attributes are facts about the framework's packaging; its methods turn matrix rows
into builds, builds into install pins, and rows into `envbuild matrix` columns. Generic
code (resolver, lock, CLI) merges what the plugins answer; defaults here say "nothing
special". Modules of the resolver are imported inside the methods, so that importing a
plugin stays cheap.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from envbuild.matrix.wheels import IndexFields


class Pins(NamedTuple):
    """What installs one build: conda MatchSpecs or pip requirements (and pip's index)."""

    conda: tuple[str, ...] = ()
    pip: tuple[str, ...] = ()
    index_url: str | None = None


class Framework:
    # --- names ------------------------------------------------------------------------------
    name: str = ""  # canonical: what specs, JSON output and the matrices call it
    aliases: tuple[str, ...] = ()  # other names people write (lower case)
    # names that also pin CUDA: (regular expression whose group 1 is digits, "major" when the
    # digits name a CUDA major such as 12, "variant" when they name major+minor such as 102)
    cuda_in_name: tuple[tuple[str, str], ...] = ()
    cpu_only: tuple[str, ...] = ()  # CPU-only package names: a mistake in a GPU spec

    # --- matrix --------------------------------------------------------------------------------
    table: str = ""  # the `envbuild.matrix.Matrices` attribute that holds its rows
    versions_are_series: bool = False  # rows name major series ("13"), not releases
    lists_platforms: bool = False  # rows list every platform built: a missing one is a fact
    lists_archs: bool = False  # rows record compiled archs: a missing list is an unknown fact
    # `compute_XY` in its arch lists embeds SASS too (in PyTorch's lists it is the PTX alone)
    ptx_entry_has_sass: bool = False

    # --- installing ----------------------------------------------------------------------------
    conda_first: bool = False  # its documentation installs with conda before pip
    base_family: str | None = None  # the base image family built around it (matrices/base_images.yaml)
    in_dlc: bool = False  # AWS Deep Learning Containers carry it

    # --- lock ------------------------------------------------------------------------------------
    pip_names: tuple[str, ...] = ()  # its pip distributions, as the image's installed versions name them
    pip_name_prefixes: tuple[str, ...] = ()  # ... and the prefixes of those that carry a CUDA variant
    conda_packages: tuple[str, ...] = ()  # conda records with its compiled code, in search order
    has_cpu_builds: bool = False  # CPU builds share the package name: the build string must say cuda
    # conda records published as CPU and GPU builds under one name (and CPU/GPU selectors)
    variant_records: tuple[str, ...] = ()
    # it compiles its kernels at run time with the ptxas installed next to it (XLA): a ptxas
    # newer than the driver's CUDA slows it down, or breaks it where the release needs its
    # toolkit's own driver (envbuild/lock/cuda_check.py)
    jit_ptxas: bool = False

    # --- `envbuild matrix FRAMEWORK` -------------------------------------------------------------
    query_installer: bool = False  # offer --installer

    def builds(self, m: Any, minors: list[str]) -> list:
        """Its matrix rows -> `envbuild.frameworks.build.Build`s (`minors`: every CUDA
        major.minor NVIDIA published, for rows that give a CUDA range)."""
        raise NotImplementedError

    def pins(self, b: Any, label: str | None = None) -> Pins:
        """What installs build `b` (`label`: the local version label the user pinned)."""
        raise NotImplementedError

    def wheel_groups(self, table: Any, b: Any) -> tuple[list[list], bool]:
        """The rows of `table` (`envbuild.resolver.artefacts.WheelTable`) for the wheels pip
        installs for `b`, one group per distribution, and whether they only stand in."""
        return [], False

    def candidates(self, constraint: Any, pinned: Any, ix: Any) -> list | None:
        """The builds a version constraint selects (`pinned`: the one release it pins, or
        None), when that is not "the builds of every release the constraint contains" (None)."""
        return None

    def needs_devel(self, cuda: str) -> str | None:
        """Why an image for it on CUDA `cuda` must be a devel flavour, or None."""
        return None

    def windows_problem(self, b: Any) -> tuple[str, str] | None:
        """(why, the matrix fact behind it) when build `b` has no native-Windows GPU build, or None."""
        return None

    def spelled_out_archs(self, archs: Any) -> tuple[str, ...]:
        """A build's arch list in one convention: `sm_XY` = SASS, `compute_XY` = PTX only.
        Where its `compute_XY` embeds the SASS of XY as well (`ptx_entry_has_sass`), it
        becomes `sm_XY compute_XY`."""
        out: list[str] = []
        for a in archs or ():
            if self.ptx_entry_has_sass and a.startswith("compute_"):
                out.append("sm_" + a[len("compute_"):])
            out.append(a)
        return tuple(dict.fromkeys(out))

    def select_rows(self, rows: tuple, query: str, version: Any) -> list | None:
        """`envbuild matrix NAME QUERY` rows, when QUERY is not a version constraint (None).
        `version(text, what)` parses a version or raises the CLI's error."""
        return None

    # --- `envbuild matrix refresh` (matrices/wheels.yaml) -------------------------------------------
    def index_releases(self, m: Any) -> dict[str, set[str]]:
        """PyPI project -> the releases its rows name, whose wheels to record."""
        return {}

    def index_projects(self, m: Any) -> set[str]:
        """Further PyPI projects to read: artefacts its releases pin, wheels its rows name by series."""
        return set()

    def index_series(self, m: Any, files: dict) -> dict[str, set[str]]:
        """PyPI project -> the releases on the index of the series its rows name
        (`files`: project -> `envbuild.matrix.wheels.by_version` of its index page)."""
        return {}

    # PyPI projects whose early releases are sdists only: such a release counts as a pure wheel
    # for its Requires-Python
    index_sdist_projects: tuple[str, ...] = ()

    def index_fields(self, m: Any, project: str, version: str, files: list, metadata: Any,
                     grouped: dict) -> IndexFields | None:
        """What release `version` of `project` (one of its `index_releases`) records beyond
        its wheels, read from core metadata; None when nothing. `files`: the release's
        (file, tags) pairs; `metadata(files)` -> (text, filename) of the first of those
        files whose metadata the index serves, (None, "") when none; `grouped`: every
        project read, as `files` of `index_series`."""
        return None

    def index_findings(self, m: Any, rows: list[dict], index_url: str) -> list[str]:
        """Where its matrix rows disagree with the `wheels.yaml` rows read from `index_url`."""
        return []

    def index_newest(self, m: Any) -> dict[str, set[str]]:
        """PyPI project -> the releases its rows know; newer final releases on the index are reported."""
        return {}

    def matrix_columns(self, rows: list, archs: Any, marks: Any) -> tuple[list[str], list[list[str]]]:
        """`envbuild matrix NAME`'s table: (headers, one row of cells per matrix row).
        `archs(list)` and `marks(row)` format arch lists and inferred/secondary marks."""
        raise NotImplementedError
