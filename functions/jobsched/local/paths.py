"""Where local mode keeps its files, shared by ``jobsched local`` (the writer) and the CLI (the reader).

Kept apart from ``local.runtime`` so the CLI finds the dev token without importing the local runtime
(boto3, the embedded moto wiring).
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = [
    "DATA_FILES",
    "DEFAULT_DATA_DIR",
    "DEV_TOKEN_FILE",
    "LOCK_FILE",
    "SQLITE_FILE",
    "lock_data_dir",
    "make_private_dir",
    "open_private",
]

DEFAULT_DATA_DIR = Path(".jobsched")
"""``jobsched local --data-dir`` default, relative to the working directory: state, tokens, logs."""

DEV_TOKEN_FILE = "dev-token"
"""File name, in the data dir, of the generated dev token (owner ``local``); the CLI's default token."""

SQLITE_FILE = "jobsched.sqlite3"
"""File name, in the data dir, of the SQLite database of the ``sqlite`` backend (``jobsched.sqlite.database``)."""

LOCK_FILE = "local.lock"
"""Held locked (``flock``) by the running ``jobsched local`` of a data dir: a second one is refused."""

DATA_FILES = (
    "jobsched.sqlite3*",
    "run-queue.sqlite3*",
    "state.*",
    "*.log",
    "*.log.*",
    "dev-token",
    "tokens.json",
    "local.lock",
)
"""Glob patterns of the files local mode keeps in its data dir (``make_private_dir`` makes them 0600)."""


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


def make_private_dir(path: Path) -> None:
    """Create the data dir ``path`` (and its parents) for this user alone: the directory mode 0700 and local
    mode's files already in it (``DATA_FILES``) 0600, so a data dir made by an older version, or under a looser
    umask, is closed too. Files local mode creates later are created 0600 (``jobsched.local.paths.open_private``:
    ``jobsched.local.tokens``, ``jobsched.local.logs.PrivateRotatingFileHandler``, the lock, the SQLite files
    (``jobsched.sqlite.database.create_private``), the change logs; the state snapshots by ``mkstemp``).
    Raises OSError when it cannot be created or changed."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(path, 0o700)
    for pattern in DATA_FILES:
        for entry in path.glob(pattern):
            if entry.is_file() and not entry.is_symlink():
                os.chmod(entry, 0o600)


def lock_data_dir(data_dir: Path) -> int:
    """Lock ``data_dir`` for this process (an exclusive ``flock`` of ``<data dir>/local.lock``, released when the
    returned descriptor is closed or the process ends, ``kill -9`` included). Raises OSError naming the data dir
    when another process holds it: two of them on one data dir would reopen each other's in-flight queue
    messages and schedule, sweep and snapshot the same data."""
    import fcntl

    fd = open_private(data_dir / LOCK_FILE, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
        os.close(fd)
        raise OSError(
            f"{data_dir} is in use by another jobsched local (pid {holder}); stop it or pick another --data-dir"
        ) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, str(os.getpid()).encode(), 0)
    return fd
