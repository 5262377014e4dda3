"""The DynamoDB adapters' transient errors; the named domain errors live in ``jobsched.ports.errors``."""

from __future__ import annotations

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
