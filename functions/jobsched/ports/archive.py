"""The run archive's ports (design §11): where archive objects are written, and where a batch goes when they
cannot be (the spill, so the stream's 24 hours are never the only copy)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class ArchiveObject:
    """One object of the archive: its ``key`` (``runs/owner=<o>/month=<YYYY-MM>/<digest>.json.gz``), ``body``
    (gzip JSON Lines, ``jobsched.domain.archive.encode_rows``) and ``rows`` (how many runs it holds)."""

    key: str
    body: bytes
    rows: int


class ArchiveUnavailable(Exception):
    """The archive's store (S3, the local directory) refused or failed a write; the message says why."""


class ArchiveObjects(Protocol):
    """The archive's object store (S3 bucket, local directory)."""

    def put(self, item: ArchiveObject) -> None:
        """Write ``item.body`` at ``item.key``, replacing an object of that name. Raises ``ArchiveUnavailable``."""
        ...


class ArchiveSpill(Protocol):
    """Where the objects of a batch the store refused are kept until an operator redrives them (SQS: 14 days)."""

    def spill(self, items: Sequence[ArchiveObject]) -> None:
        """Keep ``items`` (each whole: key and body). Raises any error of its transport: the batch then fails and
        is retried from the stream."""
        ...
