"""Errors that end a command with one clear line instead of a traceback."""


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
        text = f"{self.where}: {self.message}" if self.where else self.message
        if self.hint:
            text += f" ({self.hint})"
        # One line, whatever the input held: control characters are shown escaped, and
        # credentials in URLs are masked.
        from envbuild.urls import mask_text

        return "".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in mask_text(text))


class EnvironmentProblem(UserError):
    """Something outside envbuild is missing or down (Docker engine, registry, solver). Exit code 3."""

    exit_code = 3
