"""The recount of jobs written without quota usage (design §4.11): a bounded pass, run by the sweeper, that counts
each live job without ``Job.quota_rate`` in its owner's usage, once.

Each job is counted by its own conditional write (``QuotaRecount.count_job``: still uncounted, its spec
unchanged since read), so a pass that runs twice, or beside an edit or a delete of the job, counts it at most
once: an edit counts an uncounted job itself (``domain.quotas.count_change``), and a delete takes away only what
the job was counted with. The jobs are read in rounds from the store's start to its end; a round that left no
job it found uncounted (each counted here, none changed meanwhile) and began at least ``SETTLE_MS`` after the
recount's first pass marks the recount done, and no pass runs again: an API of the version without quotas still
serving during the deploy writes uncounted jobs behind a round's cursor, and only a round begun after it is
gone sees them all.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from jobsched.domain.quotas import job_fire_rate
from jobsched.ports.quotas import QuotaRecount, RecountProgress

PAGE_SIZE = 1_000
"""Jobs read a page (``QuotaRecount.uncounted_jobs``'s ``limit``)."""

SETTLE_MS = 30 * 60_000
"""How long after the recount's first pass (epoch ms) a clean round must begin to mark it done: the rest of the
deploy that brought this code, whose API functions of the version without quotas may still write uncounted jobs
(a stack update replaces its functions within minutes of each other)."""

READ_BUDGET = 20_000
"""Jobs one pass reads at most: on DynamoDB about 2,500 read units (a spec item of about 1 KB read eventually
consistent from the ``by_owner`` index), 40 a second over the sweeper's minute."""


@dataclass(frozen=True)
class RecountPass:
    """What one pass did: ``counted`` jobs; ``changed``: uncounted jobs that changed before their count landed
    (left to the next round); ``done``: the recount is finished (this pass or an earlier one)."""

    counted: int
    changed: int
    done: bool


def recount_pass(
    store: QuotaRecount,
    *,
    seconds: float,
    now_ms: int,
    settle_ms: int = SETTLE_MS,
    budget: int = READ_BUDGET,
    page_size: int = PAGE_SIZE,
    monotonic: Callable[[], float] = time.monotonic,
) -> RecountPass:
    """One pass of the recount on ``store`` at ``now_ms`` (epoch ms), from its stored progress, for at most
    ``budget`` jobs read and ``seconds`` (``monotonic``, seconds; checked between pages), saving its progress
    after each page. A round that ends clean marks the recount done when it began ``settle_ms`` or more after the
    recount's first pass; otherwise the pass ends there and the next pass begins a new round. A job's fire rate
    (``job_fire_rate``, about 40 ms for a cron) is computed once per schedule and zone in a pass. Raises what the
    store raises (the saved progress then resumes the next pass)."""
    progress = store.recount_progress()
    if progress.done:
        return RecountPass(0, 0, True)
    began_ms = now_ms if progress.began_ms is None else progress.began_ms
    round_ms = now_ms if progress.cursor is None else progress.round_ms
    progress = replace(progress, began_ms=began_ms, round_ms=round_ms)
    deadline = monotonic() + seconds
    rates: dict[tuple[str | None, str], int] = {}
    counted = changed = read = 0
    while read < budget and monotonic() < deadline:
        limit = min(page_size, budget - read)
        jobs, cursor = store.uncounted_jobs(progress.cursor, limit)
        read += limit
        clean = progress.clean
        for job in jobs:
            key = (job.schedule, job.timezone)
            if key not in rates:
                rates[key] = job_fire_rate(*key)
            if store.count_job(job, rates[key]):
                counted += 1
            else:
                changed += 1
                clean = False
        if cursor is None:
            settled = round_ms is not None and round_ms >= began_ms + settle_ms
            progress = RecountProgress(done=clean and settled, began_ms=began_ms)
            store.save_recount_progress(progress)
            if clean:
                return RecountPass(counted, changed, progress.done)
            round_ms = now_ms  # a round left a job uncounted: the next begins now
            progress = replace(progress, round_ms=round_ms)
            continue
        progress = replace(progress, cursor=cursor, clean=clean)
        store.save_recount_progress(progress)
    return RecountPass(counted, changed, False)
