"""One invocation of the sweeper Lambda (started every minute by EventBridge): one bounded pass over the runs
table's sweep index (``jobsched.domain.sweeper``: re-enqueues runs left queued or retrying, takes runs from lost
workers (a failed try), resends owed dead-run alerts, clears finished runs from the index), then the upkeep
passes, each within the time left: the count of scheduler partitions without a leader
(``PartitionsWithoutLeader``, the alarm of a partition whose clock stopped), one pass of the due index's
anti-entropy (``DueRepair.refile_stuck``: a job whose timer item was lost gets a new one, ``JobsRefiled``) and,
until it is done, one pass of the move of the jobs' ``due`` GSI entries to timer items
(``DueRepair.migrate_due_index``) and one pass of the recount of jobs written without quota usage
(``domain.quota_recount``). The components it runs on are built by ``jobsched.runtime.wiring.Components``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from jobsched.aws.positions import JsonPositions
from jobsched.domain.due_reader import read_floor
from jobsched.domain.lease import partitions_without_leader
from jobsched.domain.quota_recount import SETTLE_MS, recount_pass
from jobsched.observability import COUNT, MetricName, add_metric, flush_metrics, logger

if TYPE_CHECKING:
    from jobsched.domain.sweeper import Sweeper
    from jobsched.runtime.wiring import Components

REFILE_SECONDS = 10.0
"""The longest an anti-entropy pass runs (:func:`refile_stuck`)."""
MIGRATION_SECONDS = 20.0
"""The longest a pass of the due index's move runs (:func:`migrate_due_index`)."""
REFILE_RESERVE_S = 35.0
"""Seconds of the invocation kept free after the anti-entropy pass (the migration's pass and its margin)."""
MIGRATION_RESERVE_S = 10.0
"""Seconds of the invocation kept free after the migration's pass."""
RECOUNT_SECONDS = 10.0
"""The longest a pass of the quota recount runs (:func:`recount_quotas`)."""
RECOUNT_RESERVE_S = 5.0
"""Seconds of the invocation kept free after the quota recount's pass."""


@dataclass
class SweeperRuntime:
    """One execution environment's sweeper on ``components``: its ``Sweeper`` (built once, at construction) and
    whether a pass of the due index's move, and of the quota recount, found it done (then no further pass of it
    is made). ``upkeep`` False: :meth:`serve` sweeps and recounts only (local mode, whose job store has no due
    index of DynamoDB to repair or move, but may hold jobs of a version without quotas on its moto backend), the
    recount done by its first clean round (one process: no API of another version writes meanwhile)."""

    components: Components
    upkeep: bool = True
    sweeper: Sweeper = field(init=False)
    migrated: bool = field(default=False, init=False)
    recounted: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        self.sweeper = self.components.sweeper()

    def serve(self, context: Any) -> dict[str, Any]:
        """One invocation: the sweep, then (with ``upkeep``) :func:`check_leaders`, :func:`refile_stuck` and a
        pass of :func:`migrate_due_index`, then (with or without ``upkeep``) one of :func:`recount_quotas`, each
        bounded by the time ``context.get_remaining_time_in_millis()`` leaves. Returns the sweep's report as a dict plus
        ``partitions_without_leader`` (the list, or None), ``refile_stuck`` (that pass's report, or None),
        ``due_index_migration`` (its report; absent once ``migrated`` or when the pass failed) and
        ``quota_recount`` (its report, or None; absent once ``recounted``)."""
        report = self.sweeper.sweep().as_dict()
        if self.upkeep:
            self._upkeep(context, report)
        if not self.recounted:
            left_s = context.get_remaining_time_in_millis() / 1000
            report["quota_recount"] = recount = recount_quotas(
                self.components,
                seconds=min(RECOUNT_SECONDS, left_s - RECOUNT_RESERVE_S),
                settle_ms=SETTLE_MS if self.upkeep else 0,
            )
            self.recounted = bool(recount and recount["done"])
        return report

    def _upkeep(self, context: Any, report: dict[str, Any]) -> None:
        """The DynamoDB upkeep passes of :meth:`serve`, their reports added to ``report``."""
        report["partitions_without_leader"] = check_leaders(self.components)
        flush_metrics()  # the count goes out now: a later step that runs out of time must not lose it (its alarm)
        left_s = context.get_remaining_time_in_millis() / 1000
        report["refile_stuck"] = refile_stuck(
            self.components, seconds=min(REFILE_SECONDS, left_s - REFILE_RESERVE_S)
        )
        if not self.migrated:
            try:
                left_s = context.get_remaining_time_in_millis() / 1000
                report["due_index_migration"] = migration = migrate_due_index(
                    self.components, seconds=min(MIGRATION_SECONDS, left_s - MIGRATION_RESERVE_S)
                )
                self.migrated = bool(migration["done"])
            except Exception as error:  # a failed pass is retried by the next invocation
                logger.warning("due index migration pass failed", error=str(error))


def migrate_due_index(components: Components, seconds: float = MIGRATION_SECONDS) -> dict[str, Any]:
    """One pass of the due index's move to timer items, at the components' clock, for at most ``seconds``
    (under 1 s: no pass, ``skipped``); its report as a dict (``moved``, ``done``). Waits (``moved`` 0,
    ``waiting`` true) until a leader of this code has stored read positions in every partition: a leader of
    the GSI layout (design, Upgrades in flight) reads only the GSI, so an entry moved out of it while one runs
    (the minutes of a deploy) must be in a bucket a new leader reads again
    (``domain.due_reader.UPGRADE_REWIND_MS``), which it does only as the first of its partition."""
    if seconds < 1:
        return {"moved": 0, "done": False, "skipped": "too little of the invocation left"}
    upkeep = components.due_upkeep()
    partitions = range(components.settings.scheduler_partitions)
    if any(upkeep.control.read_positions(partition) is None for partition in partitions):
        return {"moved": 0, "done": False, "waiting": True}
    bucket_ms = components.settings.due_bucket_s * 1000
    done = upkeep.repair.migrate_due_index(components.clock, bucket_ms=bucket_ms, seconds=seconds)
    return {"moved": done.moved, "done": done.done}


def recount_quotas(
    components: Components, seconds: float = RECOUNT_SECONDS, settle_ms: int = SETTLE_MS
) -> dict[str, Any] | None:
    """One pass of the recount of jobs written without quota usage (``domain.quota_recount.recount_pass``, done by
    a clean round begun ``settle_ms`` after its first pass) on the jobs table, for at most ``seconds``; its report as a dict (``counted``, ``changed``, ``done``), logged
    when it counted a job or found the recount done. None when the pass fails (logged; the next invocation goes
    on from the saved progress) or ``seconds`` is under 1."""
    if seconds < 1:
        return None
    try:
        done = recount_pass(
            components.jobs(), seconds=seconds, now_ms=components.clock(), settle_ms=settle_ms
        )
    except Exception as error:
        logger.warning("quota recount pass failed", error=str(error))
        return None
    if done.counted or done.done:
        logger.info("quota recount pass", counted=done.counted, changed=done.changed, done=done.done)
    return {"counted": done.counted, "changed": done.changed, "done": done.done}


def check_leaders(components: Components) -> list[int] | None:
    """The scheduler partitions without a leader now (``domain.lease.partitions_without_leader``, its recheck
    waiting with ``components.sleep``), published as ``PartitionsWithoutLeader`` (their count) and logged by
    number. A partition's lag is reported by its own ticks, so one whose clock stopped (its rule disabled, its
    invocations failing) reports nothing; this count, from outside the scheduler, is what its alarm
    (``infra.monitoring``) watches. None when the leases cannot be read (logged; the metric's missing minute is
    then what the alarm sees)."""
    try:
        leaderless = partitions_without_leader(
            components.control(), components.settings.scheduler_partitions, components.clock, components.sleep
        )
    except Exception as error:
        logger.warning("scheduler leases not read", error=str(error))
        return None
    add_metric(MetricName.PARTITIONS_WITHOUT_LEADER, COUNT, len(leaderless))
    if leaderless:
        logger.warning("scheduler partitions without a leader", partitions=leaderless)
    return leaderless


def drained(components: Components) -> dict[int, int]:
    """For each scheduler partition a leader of this code has run (stored read positions), configured or
    adopted (up to the partitions' high-water mark), the bucket before which its ticks read nothing again: its
    watermark, or the floor a new leader would read again from (``domain.due_reader.read_floor``: after an upgrade
    or a rollback): ``{partition: bucket}``, a bucket being epoch ms // (``due_bucket_s`` * 1000). Raises what
    the control store's reads raise."""
    control = components.due_upkeep().control
    settings = components.settings
    partitions = max(settings.scheduler_partitions, control.read_partition_high_water() or 0)
    found: dict[int, int] = {}
    for partition in range(partitions):
        watermark, positions = control.read_watermark(partition), control.read_positions(partition)
        if watermark is None or positions is None:
            continue  # never led by this code: its first leader reads behind its watermark anyway
        _, floor = read_floor(
            watermark, JsonPositions().decode(positions), components.clock(), settings.due_bucket_s * 1000
        )
        found[partition] = watermark if floor is None else floor
    return found


def refile_stuck(components: Components, seconds: float = REFILE_SECONDS) -> dict[str, Any] | None:
    """One pass of ``DueRepair.refile_stuck`` at the components' clock, for at most ``seconds``, for the jobs
    of the partitions :func:`drained` gives; its report as a dict (``scanned``, ``refiled``: how many,
    ``jobs``: the first 20 ids, ``wrapped``, ``unreadable``), the count published as ``JobsRefiled`` and each
    refiled job logged (a lost timer item is a fault to look into). None when the pass fails (logged; the next
    invocation goes on from the last saved place) or ``seconds`` is under 1."""
    if seconds < 1:
        return None  # too little of the invocation left: the next one goes on
    try:
        bucket_ms = components.settings.due_bucket_s * 1000
        done = components.due_upkeep().repair.refile_stuck(
            components.clock,
            bucket_ms=bucket_ms,
            shards=components.settings.due_shards,
            watermarks=drained(components),
            seconds=seconds,
        )
    except Exception as error:
        logger.warning("due index anti-entropy pass failed", error=str(error))
        return None
    add_metric(MetricName.JOBS_REFILED, COUNT, len(done.refiled))
    if done.refiled:
        logger.warning(
            "jobs found stuck (their timer item lost) were given a new one", jobs=done.refiled[:100]
        )
    if done.unreadable:
        logger.warning("scheduling items this code cannot read were skipped", count=done.unreadable)
    return {
        "scanned": done.scanned,
        "refiled": len(done.refiled),
        "jobs": done.refiled[:20],
        "wrapped": done.wrapped,
        "unreadable": done.unreadable,
    }
