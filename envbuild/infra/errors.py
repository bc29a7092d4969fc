"""Errors that end a command with one clear line instead of a traceback."""
import re

from envbuild.infra.urls import mask_text

SHOWN_CHARS = 200  # of one value in a message; a longer one is cut there and its length said
_PART_CHARS = 1000  # of the message, the place or the hint as a whole
# A value without spaces too long to show (with room for what `shown` already clipped).
_LONG_RUN = re.compile(r"\S{%d,}" % (SHOWN_CHARS + 20))


def clip(text: str, limit: int = SHOWN_CHARS) -> str:
    """`text` as a message shows it: whole when short, else its first `limit` characters
    and its length, so a 100,000-character value costs one short line."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text)} characters)"


def shown(value) -> str:
    """A value quoted for a message (as `repr` quotes it), clipped like `clip`."""
    text = str(value)
    if len(text) <= SHOWN_CHARS:
        return repr(text)
    return f"{text[:SHOWN_CHARS]!r}... ({len(text)} characters)"


def bounded(text: str) -> str:
    """A message part with each over-long value clipped, whatever site built it."""
    return clip(_LONG_RUN.sub(lambda m: clip(m.group()), text), _PART_CHARS)


class UserError(Exception):
    """Bad input: what is wrong, where, and how to fix it. Exit code 2."""

    exit_code = 2

    def __init__(self, message: str, *, where: str | None = None, hint: str | None = None,
                 evidence: str | None = None):
        self.message = message
        self.where = where
        self.hint = hint
        self.evidence = evidence  # lines printed before the summary (a failed step's log tail)
        super().__init__(self.line())

    def line(self) -> str:
        # One short line, whatever the input held: credentials in URLs are masked (before
        # clipping, which could cut a URL), over-long values clipped with their length,
        # control characters shown escaped.
        where, message = bounded(mask_text(self.where or "")), bounded(mask_text(self.message))
        text = f"{where}: {message}" if where else message
        if self.hint:
            text += f" ({bounded(mask_text(self.hint))})"
        return "".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in text)


    def lines(self) -> list[str]:
        """The lines the command line prints, one per mistake."""
        return [self.line()]


class UserErrors(UserError):
    """Several independent mistakes in one input (every one a spec holds, up to SHOWN):
    one line each, so they can all be fixed in one go. Exit code 2."""

    SHOWN = 20

    def __init__(self, errors: list[UserError]):
        self.errors = list(errors)
        first = self.errors[0]
        super().__init__(first.message, where=first.where, hint=first.hint)

    def lines(self) -> list[str]:
        shown = [e.line() for e in self.errors[:self.SHOWN]]
        more = len(self.errors) - self.SHOWN
        if more > 0:
            shown.append(f"{more} more mistake{'s' if more > 1 else ''} not shown (fix these and run again)")
        return shown


class EnvironmentProblem(UserError):
    """Something outside envbuild is missing or down (Docker engine, registry, solver). Exit code 3."""

    exit_code = 3


class Refused(Exception):
    """A stage refused the request and has its own report (the resolver's conflicts, the
    solver's): `envbuild/cli.py` prints that report and exits 1. Not a UserError: the
    input is well formed, the stack it asks for does not exist."""

    exit_code = 1


class Unresolved(Refused):
    """The spec does not resolve; `resolution` holds the conflicts and their fixes. `note`:
    a line printed after the report (what was not done)."""

    def __init__(self, resolution, note: str | None = None):
        self.resolution = resolution
        self.note = note
        if resolution.conflicts:
            self.first = resolution.conflicts[0].message
        elif resolution.unchecked:  # unverified under strict
            self.first = f"--strict refuses an unverified stack: {resolution.unchecked[0].message}"
        else:
            self.first = "no resolution"
        super().__init__(f"the spec does not resolve: {self.first}")


class LockRefused(Refused):
    """The resolved stack could not be locked: the solver's conflicts (one line each), or
    its first line of output when it named none."""

    def __init__(self, spec_hash: str, conflicts: tuple[str, ...], reason: str):
        self.spec_hash = spec_hash
        self.conflicts = conflicts
        self.reason = reason
        super().__init__(conflicts[0] if conflicts else reason)


class VerifyFailed(UserError):
    """The verification gate stopped an image: nothing was tagged or pushed. Exit code 1."""

    exit_code = 1
