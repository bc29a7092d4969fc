"""What one framework plugin provides.

A plugin is a `Framework` subclass instance named `PLUGIN` in `envbuild/frameworks/<name>.py`.
The runtime protocol below is what the resolver, the lock and the image stages ask; it
reads top to bottom by concern:

* who it is: `name`, `order`, and `spelling` (the names and version labels specs write);
* its matrix table, `matrices/<name>.yaml`: `row_type`, `rows(m)` and its `shape`;
* its builds: `builds`, `pins`, `wheel_groups`, `candidates`, `spelled_out_archs`,
  `windows_problem`;
* `install` (images built around it) and `lock` (the package names a lock finds it by,
  and its CPU/GPU markers);
* `view` (`envbuild matrix NAME`) and `refresh` (`envbuild matrix refresh`), each on its own.

Generic code merges what the plugins answer; the defaults here say "nothing special".
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from envbuild.core.package_sets import package_set
from envbuild.core.values import CudaVersion
from envbuild.core.versions import LocalLabel
from envbuild.matrix import Matrices, typed_rows
from envbuild.matrix.tables import Row

if TYPE_CHECKING:
    from envbuild.matrix.wheels import IndexFields


class Pins(NamedTuple):
    """What installs one build: conda MatchSpecs or pip requirements (and pip's index)."""

    conda: tuple[str, ...] = ()
    pip: tuple[str, ...] = ()
    index_url: str | None = None


@dataclass(frozen=True)
class Spelling:
    """The names (and local version labels) people write for the framework in a spec or on
    the command line."""

    aliases: tuple[str, ...] = ()  # other names than the canonical one (lower case)
    # names that also pin CUDA: (regular expression whose group 1 is digits, "major" when the
    # digits name a CUDA major such as 12, "variant" when they name major+minor such as 102)
    cuda_in_name: tuple[tuple[str, str], ...] = ()
    cpu_only: tuple[str, ...] = ()  # CPU-only package names: a mistake in a GPU spec

    def read_label(self, label: str) -> LocalLabel | None:
        """What a pip local label of its own convention says (None: not one of its labels;
        the common ones, `cu121`, `cpu`, `rocm5.6`, are read by `envbuild.core.versions`)."""
        return None


@dataclass(frozen=True)
class TableShape:
    """What its matrix rows say by what they leave out, which the checks must know."""

    versions_are_series: bool = False  # rows name major series ("13"), not releases
    lists_platforms: bool = False  # rows list every platform built: a missing one is a fact
    lists_archs: bool = False  # rows record compiled archs: a missing list is an unknown fact


@dataclass(frozen=True)
class Install:
    """How it is installed, and the images built around it."""

    conda_first: bool = False  # its documentation installs with conda before pip
    base_family: str | None = None  # the base image family built around it (matrices/base_images.yaml)
    in_dlc: bool = False  # AWS Deep Learning Containers carry it

    def needs_devel(self, cuda: CudaVersion) -> str | None:
        """Why an image for it on CUDA `cuda` must be a devel flavour, or None."""
        return None


@dataclass(frozen=True)
class LockNames:
    """How a lock (conda records, pip wheels, an image's installed versions) tells its
    packages, and its GPU builds from its CPU builds."""

    pip_names: tuple[str, ...] = ()  # its pip distributions, as the image's installed versions name them
    pip_name_prefixes: tuple[str, ...] = ()  # ... and the prefixes of those that carry a CUDA variant
    # a set of matrices/packages.yaml whose members, with `-cuNN`, are its pip distributions (RAPIDS')
    pip_name_set: str | None = None
    conda_packages: tuple[str, ...] = ()  # conda records with its compiled code, in search order
    has_cpu_builds: bool = False  # CPU builds share the package name: the build string must say cuda
    # conda records published as CPU and GPU builds under one name (and CPU/GPU selectors)
    variant_records: tuple[str, ...] = ()
    cpu_selectors: tuple[str, ...] = ()  # conda records whose presence selects its CPU builds
    # dependencies ("name version build") through which a conda record says it is a CPU build
    cpu_dependencies: tuple[str, ...] = ()
    # conda records whose version is the CUDA variant a solve selected for it
    cuda_selectors: tuple[str, ...] = ()
    # it compiles its kernels at run time with the ptxas installed next to it (XLA): a ptxas
    # newer than the driver's CUDA slows it down, or breaks it where the release needs its
    # toolkit's own driver (envbuild/lock/cuda_check.py)
    jit_ptxas: bool = False

    def name_prefixes(self) -> tuple[str, ...]:
        """Prefixes of its pip distributions that carry a CUDA variant in their names."""
        named = tuple(f"{name}-cu" for name in package_set(self.pip_name_set)) if self.pip_name_set else ()
        return self.pip_name_prefixes + named


class View:
    """`envbuild matrix NAME`: how its table is shown and queried."""

    query_installer: bool = False  # offer --installer

    def columns(self, rows: list, archs: Any, marks: Any) -> tuple[list[str], list[list[str]]]:
        """The table: (headers, one row of cells per matrix row). `archs(list)` and
        `marks(row)` format arch lists and inferred/secondary marks."""
        raise NotImplementedError

    def select_rows(self, rows: tuple, query: str, version: Any) -> list | None:
        """Rows for `envbuild matrix NAME QUERY` when QUERY is not a version constraint (None).
        `version(text, what)` parses a version or raises the CLI's error."""
        return None


class Refresh:
    """`envbuild matrix refresh`: what of PyPI matrices/wheels.yaml records for it."""

    # PyPI projects whose early releases are sdists only: such a release counts as a pure wheel
    # for its Requires-Python
    sdist_projects: tuple[str, ...] = ()

    def releases(self, m: Any) -> dict[str, set[str]]:
        """PyPI project -> the releases its rows name, whose wheels to record."""
        return {}

    def projects(self, m: Any) -> set[str]:
        """Further PyPI projects to read: artefacts its releases pin, wheels its rows name by series."""
        return set()

    def series(self, m: Any, files: dict) -> dict[str, set[str]]:
        """PyPI project -> the releases on the index of the series its rows name
        (`files`: project -> `envbuild.matrix.wheels.by_version` of its index page)."""
        return {}

    def fields(self, m: Any, project: str, version: str, files: list, metadata: Any,
               grouped: dict) -> IndexFields | None:
        """What release `version` of `project` (one of its `releases`) records beyond its
        wheels, read from core metadata; None when nothing. `files`: the release's
        (file, tags) pairs; `metadata(files)` -> (text, filename) of the first of those
        files whose metadata the index serves, (None, "") when none; `grouped`: every
        project read, as `files` of `series`."""
        return None

    def findings(self, m: Any, rows: list[dict], index_url: str) -> list[str]:
        """Where its matrix rows disagree with the `wheels.yaml` rows read from `index_url`."""
        return []

    def newest(self, m: Any) -> dict[str, set[str]]:
        """PyPI project -> the releases its rows know; newer final releases on the index are reported."""
        return {}


class Framework:
    """One framework, as the resolver, the lock and the image stages ask about it."""

    # --- who it is ----------------------------------------------------------------------------
    name: str = ""  # canonical: what specs, JSON output and the matrices call it
    order: int = 100  # where envbuild lists it among the frameworks (lowest first)
    spelling: Spelling = Spelling()

    # --- its matrix table: matrices/<name>.yaml ------------------------------------------------
    row_type: type = Row  # the dataclass of its rows (a `envbuild.matrix.tables.Row`)
    shape: TableShape = TableShape()

    def rows(self, m: Matrices) -> tuple:
        """Its rows of `m`, typed as `row_type`."""
        return typed_rows(m, self.name, self.row_type)

    # --- installing, locking, showing, refreshing ------------------------------------------------
    install: Install = Install()
    lock: LockNames = LockNames()
    view: View = View()
    refresh: Refresh = Refresh()

    # --- its builds --------------------------------------------------------------------------------
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

    def spelled_out_archs(self, archs: Any) -> tuple[str, ...]:
        """A build's arch list in one convention: `sm_XY` = SASS, `compute_XY` = PTX only
        (a plugin whose lists mean something else by `compute_XY` spells them out)."""
        return tuple(dict.fromkeys(archs or ()))

    def windows_problem(self, b: Any) -> tuple[str, str] | None:
        """(why, the matrix fact behind it) when build `b` has no native-Windows GPU build, or None."""
        return None
