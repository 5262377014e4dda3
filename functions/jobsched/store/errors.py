"""Named storage errors; the API maps them to HTTP responses in one place."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

TRANSIENT_ERRORS: tuple[type[Exception], ...] = (
    ClientError,
    BotoCoreError,
    ConnectionError,
    TimeoutError,
)
"""Errors of a storage call that say nothing about the data (throttles, timeouts, a dropped connection, a
service error after the SDK's retries): worth trying again later. Refusals of conditional writes never reach
callers as these (the stores turn them into return values or the named errors below)."""


class StoreError(Exception):
    """Base of the storage errors."""


class NameTaken(StoreError):
    """``name`` is already used by another job of the same owner; ``job_id`` is that job."""

    def __init__(self, job_id: str) -> None:
        super().__init__(f"name is taken by job {job_id}")
        self.job_id = job_id


class NotFound(StoreError):
    """The item does not exist (or is not the caller's: the API never tells the difference)."""


class Conflict(StoreError):
    """A conditional write lost: the item changed under us. ``current`` is the item as stored, if known."""

    def __init__(self, message: str, current: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.current = current
