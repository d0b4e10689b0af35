"""User-facing errors: one clear line (what, why, what to do), printed without a traceback."""

from __future__ import annotations


class UserError(Exception):
    """A failure the user can fix. The CLI prints str(self) on one line and exits with exit_code."""

    def __init__(self, message: str, exit_code: int = 1):
        super().__init__(message)
        self.exit_code = exit_code


class BadInput(UserError):
    """Malformed command-line input (specs, paths, options): exit code 2."""

    def __init__(self, message: str):
        super().__init__(message, exit_code=2)


class AuthFailed(UserError):
    """The server answered 401/403: the API key is missing or wrong (never worked around)."""
