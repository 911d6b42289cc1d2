"""User-facing errors of the library. They know nothing of the command line: builder/cli/commands.py turns
each into one `Error: ...` line and the exit code it carries, in one place."""

from __future__ import annotations


class EnvbuildError(Exception):
    """A failure the user can act on: printed as one line, exit code 1."""

    exit_code = 1

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class UsageError(EnvbuildError):
    """Bad input on the command line or in a spec: exit code 2."""

    exit_code = 2
