"""User-facing errors. The CLI turns each into a one-line message and a non-zero exit."""

from __future__ import annotations

import click


class EnvbuildError(click.ClickException):
    """A failure the user can act on: printed as one line, exit code 1."""

    exit_code = 1


class UsageError(EnvbuildError):
    """Bad input on the command line or in a spec: exit code 2."""

    exit_code = 2
