"""Exit statuses and the one error line of jobsched's command-line entry points.

Shared by the ``jobsched`` CLI (``jobsched.cli``) and ``python -m jobsched.local``, so that local mode can be
started without importing the CLI: errors are ONE line on stderr and a non-zero exit status, as ``aws`` and
``kubectl`` users expect.
"""

from __future__ import annotations

from typing import NoReturn

import typer

__all__ = ["FAILED", "USAGE_ERROR", "fail"]

FAILED = 1
"""Exit status of a failed call: the API answered an error (rejected input included) or was unreachable."""
USAGE_ERROR = 2
"""Exit status of bad input caught before any call (bad flag value, unreadable file), as for a usage error."""


def fail(message: str, code: int = FAILED, *, field: str | None = None) -> NoReturn:
    """Print ONE line on stderr, ``error: <message>`` or ``error: <field>: <message>``, and exit ``code``.

    The CLI's one error line: every run of whitespace in ``message`` (newlines included) becomes one space.
    ``code`` is ``FAILED`` (1) or ``USAGE_ERROR`` (2). Raises ``typer.Exit``.
    """
    where = f"{field}: " if field else ""
    typer.echo(f"error: {where}{' '.join(message.split())}", err=True)
    raise typer.Exit(code)
