"""Local mode's logs: the structured JSON logs (Powertools Logger) to ``<data dir>/local.log`` and the EMF
metric lines Powertools prints on stdout to ``<data dir>/metrics.log``, each rotated at 5 MB and created mode
0600; the terminal keeps the run and alert lines, and one line per logged exception."""

from __future__ import annotations

import io
import logging
import os
import sys
import threading
from logging.handlers import RotatingFileHandler
from pathlib import Path
from typing import Any

from jobsched.local.paths import open_private
from jobsched.observability import logger

LOG_FILE = "local.log"
"""File name, in the data dir, of the structured logs."""
METRICS_FILE = "metrics.log"
"""File name, in the data dir, of the EMF metric lines."""


class LinesToLog(io.TextIOBase):
    """A ``sys.stdout`` stand-in sending each complete line to ``log`` (per-thread line buffers).

    Powertools Metrics prints its EMF documents to stdout; in local mode they go to a rotating file, and the
    terminal keeps the run and alert lines.
    """

    def __init__(self, log: logging.Logger) -> None:
        super().__init__()
        self._log = log
        self._local = threading.local()

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        *lines, rest = (getattr(self._local, "buffer", "") + text).split("\n")
        for line in lines:
            if line:
                self._log.info(line)
        self._local.buffer = rest
        return len(text)


class PrivateRotatingFileHandler(RotatingFileHandler):
    """A ``RotatingFileHandler`` whose files are created with mode 0600 (logs carry job ids, owners and
    errors; rotation renames a file, keeping its mode, and opens the next one here). A symlink in the log's
    place is not followed (``OSError``): it would send the logs, and the mode, to another file."""

    def _open(self) -> Any:
        fd = open_private(self.baseFilename, os.O_WRONLY | os.O_APPEND)
        return open(fd, "a", encoding=self.encoding, errors=self.errors)


def rotating_logger(name: str, path: Path) -> logging.Logger:
    """The logger ``name``, not propagating, writing its messages as they are to ``path`` (rotated at 5 MB, two
    backups, mode 0600) and nowhere else."""
    log = logging.getLogger(name)
    log.propagate = False
    log.setLevel(logging.INFO)
    for handler in list(log.handlers):
        log.removeHandler(handler)
    handler = PrivateRotatingFileHandler(path, maxBytes=5 * 1024 * 1024, backupCount=2, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(message)s"))
    log.addHandler(handler)
    return log


class _Brief(logging.Formatter):
    """One console line for a logged exception; the structured record (with traceback) is in the file."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path

    def format(self, record: logging.LogRecord) -> str:
        error = record.exc_info[1] if record.exc_info else None
        return f"error: {record.getMessage()}: {error!r} (details in {self.path})"


def route_logs(path: Path, level: str) -> None:
    """Send the structured JSON logs (Powertools Logger) to ``path`` (rotated at 5 MB) instead of stdout,
    which is for the run and alert lines; logged exceptions also get one line on stderr."""
    std = logging.getLogger(logger.name)
    formatter = logger.registered_formatter
    for handler in list(std.handlers):
        std.removeHandler(handler)
    to_file = PrivateRotatingFileHandler(path, maxBytes=5 * 1024 * 1024, backupCount=2, encoding="utf-8")
    to_file.setFormatter(formatter)
    std.addHandler(to_file)
    console = logging.StreamHandler(sys.stderr)
    console.setLevel(logging.ERROR)
    console.addFilter(lambda record: record.exc_info is not None)
    console.setFormatter(_Brief(path))
    std.addHandler(console)
    logger.setLevel(level)
