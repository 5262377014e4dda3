"""Where local mode keeps its files, shared by ``jobsched local`` (the writer) and the CLI (the reader).

Kept apart from ``local.runtime`` so the CLI finds the dev token without importing the local runtime
(boto3, the embedded moto wiring).
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["DEFAULT_DATA_DIR", "DEV_TOKEN_FILE", "open_private"]

DEFAULT_DATA_DIR = Path(".jobsched")
"""``jobsched local --data-dir`` default, relative to the working directory: state, tokens, logs."""

DEV_TOKEN_FILE = "dev-token"
"""File name, in the data dir, of the generated dev token (owner ``local``); the CLI's default token."""


def open_private(path: Path | str, flags: int) -> int:
    """A file descriptor of ``path`` opened with ``flags`` (``os.O_WRONLY | os.O_APPEND``, ...), the file
    created when missing and made mode 0600 either way: local mode's files hold job specs, tokens and logs
    for this user alone. A symlink in ``path``'s place is not followed (``OSError``): the data, and the mode
    change, would go to the file it names. Raises OSError when it cannot be opened."""
    fd = os.open(path, flags | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        os.fchmod(fd, 0o600)
    except BaseException:
        os.close(fd)
        raise
    return fd
