"""The errors every storage port raises, whichever adapter is behind it (DynamoDB or the in-memory fakes).

The API maps them to HTTP responses in one place (``jobsched.api.errors``)."""

from __future__ import annotations

from typing import Any


class StoreError(Exception):
    """Base of the storage errors."""


class NameTaken(StoreError):
    """``name`` is already used by another job of the same owner; ``job_id`` is that job."""

    def __init__(self, job_id: str) -> None:
        super().__init__(f"name is taken by job {job_id}")
        self.job_id = job_id


class NotFound(StoreError):
    """The record does not exist (or is not the caller's: the API never tells the difference)."""


class Conflict(StoreError):
    """A conditional write lost: the record changed under us. ``current`` is the record as stored, if known."""

    def __init__(self, message: str, current: Any = None) -> None:
        super().__init__(message)
        self.current = current


class StoreUnavailable(StoreError):
    """A storage call failed for a reason that says nothing about the data (a throttle, a timeout, a dropped
    connection, a service error after the SDK's retries): worth trying again later. The adapters raise it
    ``from`` the original error (``__cause__``). Refused conditional writes are never reported this way."""
