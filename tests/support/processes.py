"""Checks on real subprocesses for the tests of shell targets (unit and integration alike)."""

from __future__ import annotations

import os
import time
from pathlib import Path


def process_gone(pid: int, *, timeout_s: float = 30.0) -> bool:
    """True once process ``pid`` has stopped running: it no longer exists, or it is a zombie (killed, waiting
    for its parent to reap it). Polls every 10 ms for up to ``timeout_s`` real seconds, a deadline generous
    enough that a busy machine delivering SIGKILL late cannot fail a test; False if it still runs then."""
    deadline = time.monotonic() + timeout_s
    while True:
        if not _running(pid):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.01)


def pid_written(path: Path) -> bool:
    """True once ``path`` holds a whole line (a shell's ``echo $! > path`` has completed)."""
    try:
        return path.read_text().endswith("\n")
    except FileNotFoundError:
        return False


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except ProcessLookupError:
        return False  # reaped between the open and the read: the kernel answers ESRCH
    except FileNotFoundError:
        return not Path("/proc/self").exists()  # exited just now; without /proc, trust os.kill
    return stat.rsplit(")", 1)[1].split()[0] != "Z"  # state follows "(comm)"; Z: a zombie, already killed
