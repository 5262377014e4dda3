"""The records the scheduler tick's parts share (``domain.tick``, ``domain.due_reader``, ``domain.tick_writes``):
the deployment's values a tick needs, and what one tick did."""

from __future__ import annotations

from concurrent.futures import Executor
from dataclasses import dataclass, field

from jobsched.clock import Clock
from jobsched.ports.jobs import DueIndex
from jobsched.ports.lateness import LatenessLabels


@dataclass(frozen=True)
class TickConfig:
    """The deployment's values the tick needs (from ``Settings`` in ``wiring.tick_config``).

    ``partitions``: scheduler partitions (``scheduler_partitions``; a job's home is ``partition_of(job_id,
    partitions)``); ``due_shards``: due shards writers file entries under (the tick reads at least as many);
    ``bucket_ms``: the due index's bucket width (ms); ``retention_days``: how long a run row is kept (days);
    ``lookahead_ms``: how far past now a tick looks for the next dispatch instant (``planning.horizon_ms``).
    """

    partitions: int
    due_shards: int
    bucket_ms: int
    retention_days: int
    lookahead_ms: int


@dataclass(frozen=True)
class TickShared:
    """What a partition's due reader and tick writer (``domain.due_reader.DueReader``,
    ``domain.tick_writes.TickWriter``) share: the ``partition`` they serve, its due index ``jobs``, the ``clock``
    (returns epoch ms) and the ``pool`` that runs their parallel requests."""

    partition: int
    jobs: DueIndex
    clock: Clock
    pool: Executor


@dataclass
class TickResult:
    """What one tick did. Instants and durations in epoch ms / ms.

    ``due``: due jobs handled; ``created``: runs planned and sent (no row: a worker's claim creates it);
    ``existing``: refused puts of skipped fires (the fire has a row); ``enqueued``: messages SQS accepted (runs
    plus re-enqueued queued rows); ``reenqueued``: the latter; ``skipped``: fires recorded skipped (new rows
    only); ``moved``/``conflicts``: job moves that landed / were refused (moved elsewhere, edited, deleted, paused,
    fenced); ``errors``: jobs left due for the next tick after an error; ``lag_ms``: age of the oldest due fire not
    enqueued when the tick ended (0 when none); ``dispatch_lateness_ms``: per enqueued new run, enqueue time minus
    dispatch instant; ``labelled_lateness``: the same, each with its run's labels (priority, owner or ``other``:
    ``domain.lateness``); ``top_owners``: the owners named in the labels, with their backlog (due jobs this
    tick read), largest first; ``aborted``: the lease ran out mid-tick (no further writes were made); ``watermark``: the
    bucket the watermark stands at after the tick; ``queries``: due-index requests made; ``malformed``:
    due entries that could not be read (logged as errors, ignored); ``next_due_at``: the earliest dispatch
    instant after now and before the next tick seen in the due index (the look-ahead; None: none), when the
    loop ticks again (``SchedulerLoop``; design §4.9).
    """

    now: int
    term: int
    due: int = 0
    created: int = 0
    existing: int = 0
    enqueued: int = 0
    reenqueued: int = 0
    skipped: int = 0
    moved: int = 0
    conflicts: int = 0
    errors: int = 0
    lag_ms: int = 0
    dispatch_lateness_ms: list[int] = field(default_factory=list)
    labelled_lateness: list[tuple[LatenessLabels, int]] = field(default_factory=list)
    top_owners: tuple[tuple[str, int], ...] = ()
    aborted: bool = False
    watermark: int | None = None
    queries: int = 0
    malformed: int = 0
    next_due_at: int | None = None
