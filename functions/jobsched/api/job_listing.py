"""The listing of an owner's jobs (``GET /jobs``): pages by name, optionally only the jobs carrying every label
of a selector (``?label=team=billing&label=tier=gold``, ``jobsched.labels``)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from jobsched.api.cursor import decode_cursor, encode_cursor
from jobsched.api.exceptions import CursorNotFound, InvalidInput
from jobsched.api.owned import is_job_id
from jobsched.api.schemas import NAME_PATTERN, Page
from jobsched.labels import ContradictorySelector, parse_selector
from jobsched.models import Job
from jobsched.ports.jobs import JobRepository

MAX_READS = 10
"""Store pages one filtered listing reads at most before answering with what it found and a cursor: a selector
few jobs match costs bounded work per request (the caller follows ``next_cursor``)."""


def list_jobs(
    jobs: JobRepository,
    owner: str,
    *,
    limit: int = 50,
    cursor: str | None = None,
    labels: Sequence[str] | None = None,
) -> Page[Job]:
    """A page of at most ``limit`` of the owner's jobs ordered by name, carrying every label of the selector
    ``labels`` (``key=value`` terms, ``jobsched.labels.parse_selector``; None or empty: every job; a key named
    with two values: none); ``cursor`` is a previous page's ``next_cursor`` (the selector is given again with
    each page).

    A filtered page reads the store until it has ``limit`` jobs, or ``MAX_READS`` store pages, whichever comes
    first, so it may hold fewer than ``limit`` jobs while ``next_cursor`` says more may follow. Raises
    ``InvalidInput`` naming ``label`` (a term that is not ``key=value`` with a valid label), or naming
    ``cursor`` (a malformed cursor), or ``CursorNotFound`` (a cursor not of this owner's job listing).
    """
    try:
        selector = parse_selector(labels or ())
    except ContradictorySelector:
        return Page[Job](items=[])
    except ValueError as error:
        raise InvalidInput("label", str(error)) from None
    after: tuple[str, str] | None = None
    if cursor is not None:
        position = decode_cursor(cursor, "jobs", owner)
        name, job_id = position.get("name"), position.get("id")
        if not isinstance(name, str) or not re.match(NAME_PATTERN, name) or not is_job_id(job_id):
            raise CursorNotFound()
        after = (name, str(job_id))
    items: list[Job] = []
    for _ in range(MAX_READS):
        stored, after = jobs.list_by_owner(owner, limit - len(items), after, selector or None)
        items.extend(found.job for found in stored)
        if after is None or len(items) >= limit:
            break
    next_cursor = encode_cursor("jobs", owner, {"name": after[0], "id": after[1]}) if after else None
    return Page[Job](items=items, next_cursor=next_cursor)
