"""The images of a fleet plan (`envbuild.fleet.plan`): locked, tagged, built and pushed.

Each planned image goes through the same stages as `envbuild image` (`envbuild.pipeline`):
its lock (one folder per stack under `--lock-dir`, reused while it matches), its build
context and content tag, then build, verify gate, tag and push. Locks are made one after
the other (the solver runs in this process); builds run on the local engine, at most
`jobs` at once, each reporting through its own lane of one progress view. A failed image
does not stop the others: it is reported with the targets that lost their image.
"""
from __future__ import annotations

import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from envbuild import pipeline
from envbuild.fleet.plan import FleetPlan, PlannedImage
from envbuild.infra.errors import Refused, UserError


@dataclass
class Outcome:
    """One planned image: its lock, tag and build, or why it has none."""

    image: PlannedImage
    lock_dir: Path | None = None
    tag: str | None = None  # repository:content-tag
    result: object | None = None  # envbuild.image.make.ImageResult once built or found
    error: str | None = None  # the one line that says why it failed
    evidence: str | None = None  # a failed build step's log tail
    exit_code: int = 0
    targets: list[str] = field(default_factory=list)

    def __post_init__(self):
        self.targets = [r.target.name for r in self.image.targets]

    def fail(self, exc: Exception) -> None:
        if isinstance(exc, UserError):
            self.error, self.evidence, self.exit_code = exc.line(), exc.evidence, exc.exit_code
        else:  # Refused: the solver's or the resolver's own words
            self.error, self.exit_code = str(exc), exc.exit_code


def lock_all(plan: FleetPlan, *, lock_root: Path | None, scratch: Path, quiet: bool = False) -> list[Outcome]:
    """Each image's lock folder: `lock_root/<stack>` when given (reused while it matches),
    else a fresh lock under `scratch`. A lock the solver refuses fails that image only."""
    outcomes = []
    for image in plan.images:
        outcome = Outcome(image)
        spec = image.resolution.spec
        own = scratch / f"image-{image.item}"
        own.mkdir(parents=True, exist_ok=True)
        try:
            outcome.lock_dir = pipeline.lock(spec, image.resolution, lock_dir=lock_root / image.slug() if lock_root else None,
                                             scratch=own, quiet=quiet)
        except (Refused, UserError) as exc:
            outcome.fail(exc)
        outcomes.append(outcome)
    return outcomes


def tag_all(outcomes: list[Outcome], repository: str, *, mirror: str | None = None, pin_digests: bool = False,
            wheelhouse: Path | None = None) -> None:
    """The content tag of each locked image (its build context hashed; nothing built)."""
    for o in outcomes:
        if o.error is None:
            try:
                o.tag = pipeline.content_ref(o.image.resolution, repository, o.lock_dir, mirror=mirror,
                                             pin_digests=pin_digests, wheelhouse=wheelhouse)
            except UserError as exc:
                o.fail(exc)


def build_all(outcomes: list[Outcome], options, *, jobs: int, progress) -> None:
    """Build (or find by content tag), verify when asked, tag and push every locked image,
    at most `jobs` at once; `progress` is a SharedProgress."""
    todo = [o for o in outcomes if o.error is None]
    state = {"done": 0, "failed": 0, "running": 0}
    counting = threading.Lock()

    def count(key: str, step: int, milestone: bool) -> None:
        with counting:
            state[key] += step
            if milestone:
                state["running"] -= 1
            waiting = len(todo) - state["done"] - state["failed"] - state["running"]
            text = (f"images: {state['done']} done, {state['failed']} failed, {state['running']} building, "
                    f"{waiting} waiting")
        progress.status(text, milestone=milestone)

    def one(o: Outcome) -> None:
        lane = progress.lane(f"image {o.image.item}")
        count("running", 1, False)
        try:
            o.result = pipeline.make_image(o.image.resolution, o.lock_dir, options, progress=lane)
            o.tag = o.result.ref
        except (UserError, Refused) as exc:
            o.fail(exc)
            lane.line(f"failed: {o.error}")
        finally:
            count("failed" if o.error else "done", 1, True)

    with ThreadPoolExecutor(max_workers=max(1, jobs), thread_name_prefix="envbuild-build") as pool:
        for future in [pool.submit(one, o) for o in todo]:
            future.result()
    progress.close()
