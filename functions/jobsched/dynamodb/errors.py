"""The DynamoDB adapters' transient errors; the named domain errors live in ``jobsched.ports.errors``."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from botocore.exceptions import BotoCoreError, ClientError

from jobsched.ports.errors import StoreUnavailable

P = ParamSpec("P")
R = TypeVar("R")

TRANSIENT_ERRORS: tuple[type[Exception], ...] = (
    ClientError,
    BotoCoreError,
    ConnectionError,
    TimeoutError,
)
"""Errors of a storage call that say nothing about the data (throttles, timeouts, a dropped connection, a
service error after the SDK's retries): worth trying again later. Refusals of conditional writes never reach
callers as these (the stores turn them into return values or the named errors of ``jobsched.ports.errors``).
The adapters raise them as ``StoreUnavailable`` (``unavailable_on_failure``)."""


def unavailable_on_failure(method: Callable[P, R]) -> Callable[P, R]:
    """Decorate an adapter method: a ``TRANSIENT_ERRORS`` error escaping it is raised as the domain's
    ``StoreUnavailable`` (``from`` the original, so ``__cause__`` keeps the AWS error code, e.g. for the API's
    429). Refused conditional writes are handled inside the methods and never escape."""

    @functools.wraps(method)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return method(*args, **kwargs)
        except TRANSIENT_ERRORS as error:
            raise StoreUnavailable(f"{method.__name__}: {type(error).__name__}: {error}") from error

    return wrapper
