"""The worker: one delivery of a run, from claim to a recorded outcome (design §5.1-§5.3). Pure domain: no
boto3; the stores, queues and targets are passed in behind the ports of ``jobsched.ports``.

One delivery (an SQS message whose body is the run key ``{"job_id", "scheduled_for"}``):

0. Enough time? A delivery that arrives with less of its invocation left (``Delivery.remaining_ms``) than the
   job's ``timeout_s`` plus ``CLAIM_MARGIN_S`` is not claimed: it is handed back (``DEFERRED``: its message's
   visibility set to 0 and the record reported failed) so a fresh invocation runs it instead of a try the
   Lambda limit would kill mid-way (and the sweeper would later count as failed).
1. Claim the run with one conditional update: ``queued|retrying -> running`` (a retrying run once its
   ``retry_at`` is due), or ``running`` whose ``heartbeat_at`` is older than ``settings.heartbeat_stale_s``
   (its worker was lost), or, for a scheduled run (whose message is its only record: the scheduler writes no
   row), a new row made from the message. The claim sets ``worker``, ``attempt + 1``, ``started_at``,
   ``heartbeat_at`` and, on the first try, ``lateness_ms`` (start minus ``scheduled_for``). Before the claims,
   the batch's messages were made invisible for ``heartbeat_stale_s + heartbeat_interval_s`` (``Worker.hold``:
   one request per batch), which each heartbeat extends: if this worker is lost, SQS delivers the message
   again once the run's heartbeat is stale and that delivery's claim takes the run over. A delivery that loses
   the claim (a duplicate, a finished run) is acknowledged and dropped: SQS gives at least once, the claim
   gives at most one try at a time. Acknowledging a duplicate of a ``running`` run deletes its message, so the
   run is first put into the sweep index (``RunRows.watch``; a watch that fails hands the duplicate back
   instead).
2. The job's spec: read with the rest of the batch's before any claim (``Worker.read_specs``, one request per
   batch; when that read fails, each run reads its own here). Deleted: the run is recorded ``skipped``. Out of
   attempts (the lost worker's try was the last, or ``max_attempts`` was lowered): ``dead`` without running.
   ``overlap: skip``/``buffer_one``/``replace``: take the job's overlap lock (``domain.overlap``); held by another
   try: a fresh fire's first try (the row ``queued``) is ``skipped``, unless under ``buffer_one`` no other fire
   waits, or under ``replace`` (the holder's run cancelled: ``OverlapLock.take``);
   else it waits (``Worker._wait_for_lock``: the claim given back, its attempts kept). A storage error
   anywhere in this step gives the claim back (``RunRows.give_back``: the row as it was before the claim) and
   the delivery comes again in ``GIVE_BACK_DELAY_S``, doubled per earlier receive: a try the target never saw
   does not count.
3. Run the target in a thread under ``supervise``: past ``timeout_s`` the try fails as timed out (the target
   is cancelled: a shell command's process group gets SIGTERM then SIGKILL after ``cancel_grace_s``, an http
   request's connection is shut, a command is asked to stop; a cancelled try that has not returned within
   ``overlap.STOP_GRACE_S``, and any cancelled ``lambda`` try, keeps the job's overlap lock for as long as it
   may still run: ``OverlapLock.let_go``); every ``heartbeat_interval_s`` the run row's ``heartbeat_at`` and
   the message's visibility are extended (an extension that fails puts the run into the sweep index,
   ``Heartbeat``). A refused beat (the run was taken over) cancels the try: ``LOST``, nothing written
   (``CANCELLED``: the run was cancelled, its try recorded, ``domain.cancels``); heartbeat writes failing so
   long that the row would soon look lost (``heartbeat_stale_s`` minus one interval since the last recorded
   beat) cancel it too, recorded as a failed try if the run is still ours.
   Either way no second worker ever runs the target while this one still does.
4. Record the result with the try's entry in the run's ``tries`` (attempt, start, finish, worker, error and
   the target's ``output`` excerpt; ``jobsched.ports.tries``), in the same write, conditioned on the run still
   being this claim's: ``succeeded``; or after a failed try ``retrying`` (then the retry message, SQS delay
   ``RetryPolicy.delay_s``) or, out of attempts, ``dead`` (then the dead-run message and the owner's alert). A
   run of a job with downstream jobs then makes their runs (``domain.chains``, design §2.1). A write that
   fails on a transient storage error is tried again while the worker still holds the run
   (``domain.outcomes``: beats go on meanwhile), so a try that ended is never taken over as a lost worker's
   while its outcome could still be stored.

Crash safety, write by write: every state is recoverable. A scheduled run before its claim is its message (SQS
keeps it until a claim succeeds or redrives it to the dead-letter queue, which the sweeper drains: design
§4.7); ``queued`` rows of manual runs and ``retrying`` rows carry ``sweep_at`` (re-enqueued by the sweeper
when their message never comes); a ``running`` row whose worker died stops beating and its message comes back
(taken over by that redelivery, or, for a row in the sweep index, by the sweeper as a failed try); ``dead`` is
written before its notifications and keeps its sweep keys with ``notify_pending`` until they are out (the
sweeper resends); a run with downstream jobs stays in the sweep index until their runs exist. No second worker
runs a try concurrently: every claim is conditional, and a worker that can no longer prove it holds the run
(refused or long-failing heartbeats) abandons its try before the run can be taken over.
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Sequence
from dataclasses import InitVar, dataclass, field, replace

from jobsched.clock import Clock
from jobsched.domain.alerting import Alerting
from jobsched.domain.batch_specs import BatchSpecs
from jobsched.domain.cancels import cancelled_under, record_stopped
from jobsched.domain.chains import Chains
from jobsched.domain.outcomes import OUTCOME_RESERVE_S, OutcomeWrites
from jobsched.domain.overlap import Blocked, OverlapLock, TryEnd
from jobsched.domain.redaction import redactor_for
from jobsched.domain.retries import (
    DEAD_LETTER_WORKER,
    Failures,
    Outcome,
    Owned,
    lost_worker_error,
    with_lost_try,
)
from jobsched.domain.runs import claim_message
from jobsched.domain.supervision import Heartbeat, RealWaiter, TryAbandoned, Waiter, supervise
from jobsched.domain.tries import tries_with
from jobsched.models import Job, RunKind, RunStatus
from jobsched.ports.errors import StoreUnavailable
from jobsched.ports.limits import RunLimits
from jobsched.ports.metrics import RunMetrics
from jobsched.ports.run_messages import Delivery
from jobsched.ports.run_stores import (
    DeadRunSink,
    JobSpecs,
    RunRows,
    RunSender,
    TargetRunner,
    VisibilityExtender,
)
from jobsched.ports.runs import RunRow, run_id
from jobsched.ports.targets import TargetCall, TargetFailed, TargetNotStarted

logger = logging.getLogger(__name__)

RETRY_EARLY_SLACK_MS = 5_000
"""A retrying run may be claimed this long before its ``retry_at`` (clock skew between hosts)."""
GIVE_BACK_DELAY_S = 5
"""A delivery whose claim was given back (a storage error before the target started) comes back after this,
doubled for each earlier receive of its message (``Delivery.receive_count``: 5, 10, 20, 40, 80 s): every receive
counts toward the run queue's redrive limit (``resources.RUN_QUEUE.max_receive_count``, 5), so a message given back
that often is dead-lettered, and its run recorded dead without a try, only after an outage of over 2 minutes."""
MAX_GIVE_BACK_DELAY_S = 900
"""The longest a given-back delivery is handed back for (s)."""
CLAIM_MARGIN_S = 20
"""Seconds a claimed try needs beyond its ``timeout_s`` to record its result (a few conditional writes, the
retry or dead-run messages, each with SDK retries). A delivery whose invocation has less than
``timeout_s + CLAIM_MARGIN_S`` left is not claimed. Kept below the deployment's own bookkeeping allowance
(``infra.config.WORKER_BOOKKEEPING_S``, 30 s: ``worker_timeout_cap_s`` <= function timeout - 30 s), so a fresh
invocation can always claim a job at the cap."""


class Deferred(Exception):
    """Raised by ``Worker.handle`` for a ``DEFERRED`` delivery so the batch processor reports the record as a
    batch item failure (the message stays on the queue; see ``Worker.process``)."""


# --- the worker -------------------------------------------------------------------------------------------


@dataclass(kw_only=True, eq=False)
class Worker:
    """Processes deliveries of runs (see the module docstring). Thread-safe: no per-delivery state is kept
    on the object, so one instance serves a local pool of worker threads."""

    settings: RunLimits
    runs: RunRows
    jobs: JobSpecs
    queue: InitVar[RunSender]
    dead_runs: InitVar[DeadRunSink]
    targets: TargetRunner
    clock: Clock
    metrics: RunMetrics
    visibility: VisibilityExtender | None = None
    waiter: Waiter | None = None
    """Monotonic time and waiting while a try runs; None: ``RealWaiter``."""
    alerting: Alerting | None = None
    failures: Failures = field(init=False)
    overlap: OverlapLock = field(init=False)

    def __post_init__(self, queue: RunSender, dead_runs: DeadRunSink) -> None:
        self.chains = Chains(
            jobs=self.jobs, runs=self.runs, queue=queue, settings=self.settings, clock=self.clock
        )
        self.failures = Failures(
            runs=self.runs,
            queue=queue,
            dead_runs=dead_runs,
            settings=self.settings,
            clock=self.clock,
            metrics=self.metrics,
            alerting=self.alerting,
            chains=self.chains,
        )
        self.overlap = OverlapLock(
            settings=self.settings, runs=self.runs, jobs=self.jobs, clock=self.clock, queue=queue
        )

    def handle(self, delivery: Delivery, specs: BatchSpecs | None = None) -> str:
        """The batch processor's record handler, once the record is parsed (``adapters.queue.delivery_of``):
        one delivery -> ``Outcome`` value. ``delivery.remaining_ms`` bounds what may be claimed and ``specs``
        are the batch's jobs read at its start (see ``process``). Raises ``Deferred`` when the run was handed
        back unclaimed (the record fails and comes back), and lets storage errors propagate (the record fails
        and is redelivered).
        """
        outcome = self.process(delivery, specs)
        if outcome is Outcome.DEFERRED:
            raise Deferred(f"run {run_id(delivery.message.job_id, delivery.message.scheduled_for)} deferred")
        return outcome.value

    def process(self, delivery: Delivery, specs: BatchSpecs | None = None) -> Outcome:
        """Process one delivery of a run (time check, claim, checks, try, result). See the module docstring.

        ``specs``: the jobs of the delivery's batch, read together at the batch's start (``read_specs``), or
        None: the job is read for this run alone, as it is when ``specs`` did not ask for it.

        Time check: when ``delivery.remaining_ms()`` is under ``worker_timeout_cap_s + CLAIM_MARGIN_S`` (never
        at the start of a worker Lambda invocation with the deployment's limits), the job's spec is read
        before the claim (it is read anyway, so this costs nothing) and the run is claimed only if
        ``min(timeout_s, cap) + CLAIM_MARGIN_S`` fits; otherwise it is ``DEFERRED``: not claimed, its
        message made visible again at once (``visibility_s = 0``, 1 request) so the event source hands it
        to another invocation. If that request fails the message comes back after the queue's visibility
        timeout; every receive counts toward the run queue's redrive limit, and the sweeper settles the run of a
        message redriven to the DLQ (``Sweeper``: recorded ``dead`` if it never ran).
        """
        message = delivery.message
        rid = run_id(message.job_id, message.scheduled_for)
        job: Job | None = None
        spec_read = False
        spec_read_at: int | None = None  # when a spec read before the claim was sent (epoch ms)
        if specs is not None and specs.asked(message.job_id):
            job, spec_read = specs.jobs.get(message.job_id), True
            spec_read_at = specs.read_at_ms if specs.read_at_ms is not None else 0
        if delivery.remaining_ms is not None:
            remaining = delivery.remaining_ms()
            if remaining < self._time_needed_ms(self.settings.worker_timeout_cap_s):
                if not spec_read:
                    spec_read_at = self.clock()
                    job, spec_read = self.jobs.get_spec(message.job_id), True
                if job is not None:
                    needed = self._time_needed_ms(job.timeout_s)
                    if remaining < needed:
                        logger.warning(
                            "run not claimed: too little time left in this invocation",
                            extra={
                                "run_id": run_id(message.job_id, message.scheduled_for),
                                "remaining_ms": remaining,
                                "needed_ms": needed,
                            },
                        )
                        return self._defer(delivery, visible_in_s=0, reason="too little invocation time")
        now = self.clock()
        claim = claim_message(
            self.runs,
            message,
            worker=delivery.worker,
            now_ms=now,
            retry_due_by_ms=now + RETRY_EARLY_SLACK_MS,
            settings=self.settings,
        )
        before = claim.before
        if not claim.claimed or before is None:
            if before is not None and before.status is RunStatus.RUNNING and before.sweep_at is None:
                try:
                    self._watch(before)
                except StoreUnavailable:
                    return self._defer(
                        delivery, visible_in_s=GIVE_BACK_DELAY_S, reason="running run not watched"
                    )
            logger.info(
                "delivery dropped: run not claimable",
                extra={
                    "run_id": rid,
                    "status": before.status.value if before is not None else "missing",
                    "receive_count": delivery.receive_count,
                },
            )
            return Outcome.DROPPED
        attempt = before.attempt + 1
        # a lost worker's run taken over: its try counts, so it is recorded with this one's result
        lost: str | None = None
        dead_letter_claim = before.status is RunStatus.RUNNING and before.worker == DEAD_LETTER_WORKER
        if before.status is RunStatus.RUNNING and not dead_letter_claim:
            lost = lost_worker_error(before.attempt, before.heartbeat_at, self.settings.heartbeat_stale_s)
            before = replace(before, tries=with_lost_try(before, lost, now))
        owned = Owned(message.job_id, message.scheduled_for, attempt, delivery.worker, owner=before.owner)
        # the run's first start; a backfill, a skipped run re-run, or a chained run starts when asked: never "late"
        on_request = before.kind in (RunKind.BACKFILL, RunKind.CHAINED) or bool(before.reruns)
        if before.lateness_ms is None and not on_request:
            self.metrics.run_late(max(0, now - message.scheduled_for), message.labels)
        logger.info(
            "run claimed",
            extra={
                "run_id": rid,
                "job_id": message.job_id,
                "attempt": attempt,
                "previous": before.status.value,
            },
        )

        try:
            if not spec_read or self.overlap.spec_may_be_stale(job, spec_read_at):
                spec_read_at = self.clock()
                job = self.jobs.get_spec(message.job_id)
            if job is None:
                return self._skip(owned, "job deleted before the run started")
            if dead_letter_claim:  # SQS gave up on its message; the sweeper's pass stopped before saying so
                return self.failures.dead_lettered(owned, job, before.attempt)
            if attempt > job.retry.max_attempts:
                if lost is not None:  # the lost worker's try (recorded above) was the last
                    return self.failures.dead(
                        owned, job, lost, attempts=attempt - 1, tries=before.tries, read_at_ms=spec_read_at
                    )
                error = f"out of attempts: the job allows {job.retry.max_attempts}"
                return self.failures.dead(owned, job, error, attempts=attempt - 1, read_at_ms=spec_read_at)
            locked = job.overlap.locks
            if locked:
                blocked = self.overlap.take(owned, job, now)
                if blocked is not None:
                    fresh = before.status is RunStatus.QUEUED and lost is None
                    if not fresh or blocked.wait_s is not None or blocked.buffered or job.overlap.replaces:
                        return self._wait_for_lock(delivery, owned, before, job, blocked)
                    running = blocked.reason
                    outcome = self._skip(replace(owned, owner=job.owner), running)
                    if outcome is Outcome.SKIPPED and self.alerting is not None:
                        self.alerting.skipped(job, owned.run_id, running)
                    return outcome
        except StoreUnavailable as error:
            # Nothing has run: a storage error between the claim and the target must not cost a try. (Any other
            # error, e.g. a spec this worker cannot read, propagates: the run is recovered as a lost worker's and
            # its tries count, so it ends dead with an alert rather than coming back forever.)
            return self._give_back(delivery, owned, before, error)
        if before.lateness_ms is None and not on_request and self.alerting is not None:
            self.alerting.started(job, owned.run_id, owned.scheduled_for, now - owned.scheduled_for)
        tried = TryEnd()
        try:
            return self._run(
                delivery,
                owned,
                job,
                now,
                overlap_locked=locked,
                before=before,
                tried=tried,
                read_at=spec_read_at,
            )
        finally:
            if locked:
                self.overlap.let_go(owned, job, now, tried.call)

    def _run(
        self,
        delivery: Delivery,
        owned: Owned,
        job: Job,
        claimed_at: int,
        *,
        overlap_locked: bool,
        before: RunRow,
        tried: TryEnd | None = None,
        read_at: int | None = None,
    ) -> Outcome:
        """Run the claimed try ``owned`` of ``job`` (read at ``read_at``, epoch ms; None: unknown) under
        supervision and record its result; ``tried.call`` is set to the try's call."""
        attempt = owned.attempt
        call = TargetCall(
            run_id=owned.run_id,
            job_id=owned.job_id,
            scheduled_for_ms=owned.scheduled_for,
            attempt=attempt,
            input=job.input,
            timeout_s=float(min(job.timeout_s, self.settings.worker_timeout_cap_s)),
            owner=job.owner,
            stop_grace_s=float(job.cancel_grace_s),
            upstream_run_id=before.upstream_run_id,
        )
        if tried is not None:
            tried.call = call
        heartbeat = Heartbeat(
            runs=self.runs,
            owned=owned,
            visibility=self.visibility,
            receipt_handle=delivery.receipt_handle,
            visibility_s=self.settings.heartbeat_stale_s + self.settings.heartbeat_interval_s,
            last_ok_ms=claimed_at,  # the claim wrote heartbeat_at = now
            give_up_after_ms=(self.settings.heartbeat_stale_s - self.settings.heartbeat_interval_s) * 1000,
            lock=self.jobs if overlap_locked else None,
        )
        try:
            detail = supervise(
                lambda: self.targets.execute(job.target, call),
                call=call,
                beat=lambda: heartbeat.beat(self.clock()),
                interval_s=self.settings.heartbeat_interval_s,
                waiter=self.waiter or RealWaiter(),
            )
        except TryAbandoned:
            if cancelled_under(stop := heartbeat.refused, owned):
                return record_stopped(self.runs, owned, before, stop, claimed_at, self.clock())
            if heartbeat.lost:
                logger.warning(
                    "try abandoned: the run was taken over",
                    extra={"run_id": owned.run_id, "attempt": attempt},
                )
                return Outcome.LOST
            # Still ours as far as we know: record the failed try, conditioned on that (LOST if it is not).
            error = (
                f"attempt {attempt} abandoned: the job's overlap lock was taken by another run"
                if heartbeat.lock_lost
                else heartbeat.expiring_error(self.clock())
            )
            return self._failed(owned, job, error, before, call, claimed_at, delivery, heartbeat, read_at)
        except TargetNotStarted as error:
            return self._give_back(delivery, owned, before, error)
        except TargetFailed as error:
            return self._failed(
                owned, job, str(error), before, call, claimed_at, delivery, heartbeat, read_at
            )
        except Exception as error:  # a bug in an executor still ends the try, never the run
            failure = redactor_for(job.target)(f"{type(error).__name__}: {error}")
            frame = traceback.extract_tb(error.__traceback__)[-1]  # where, not a message with secrets
            logger.error(
                "target raised unexpectedly",
                extra={
                    "run_id": owned.run_id,
                    "error": failure,
                    "at": f"{frame.filename}:{frame.lineno} in {frame.name}",
                },
            )
            return self._failed(owned, job, failure, before, call, claimed_at, delivery, heartbeat, read_at)

        now = self.clock()
        redact = redactor_for(job.target)
        tries = tries_with(before, attempt, claimed_at, owned.worker, now, None, redact.optional(call.output))
        write = self._outcome_writes(delivery, owned, heartbeat)
        chain_sweep_at = self.chains.sweep_at(dependents := self.chains.dependents_of(job, read_at))
        if not write(
            lambda: self.runs.succeed(owned, now_ms=now, tries=tries, chain_sweep_at_ms=chain_sweep_at),
            status=RunStatus.SUCCEEDED,
            attempt=attempt,
        ):
            logger.warning(
                "run succeeded but is no longer ours (taken over meanwhile)", extra={"run_id": owned.run_id}
            )
            return Outcome.LOST
        self.metrics.run_succeeded()
        if chain_sweep_at is not None:
            self.chains.settle(owned.job_id, owned.scheduled_for, RunStatus.SUCCEEDED, dependents, clear=True)
        logger.info(
            "run succeeded",
            extra={
                "run_id": owned.run_id,
                "job_id": owned.job_id,
                "attempt": attempt,
                "detail": redact(detail),
            },
        )
        return Outcome.SUCCEEDED

    def _failed(
        self,
        owned: Owned,
        job: Job,
        error: str,
        before: RunRow,
        call: TargetCall,
        claimed_at: int,
        delivery: Delivery,
        heartbeat: Heartbeat,
        read_at: int | None = None,
    ) -> Outcome:
        """Record the failed try (``Failures.failed_try``; ``job`` read at ``read_at``, epoch ms, None: unknown)
        with its entry in the run's tries. The target's
        secrets are redacted from ``error`` and the try's output before anything is cut, stored, logged or
        alerted (``jobsched.domain.redaction``)."""
        redact = redactor_for(job.target)
        error = redact(error)
        output = redact.optional(call.output)
        tries = tries_with(before, owned.attempt, claimed_at, owned.worker, self.clock(), error, output)
        write = self._outcome_writes(delivery, owned, heartbeat)
        return self.failures.failed_try(owned, job, error, tries=tries, write=write, read_at_ms=read_at)

    def _outcome_writes(self, delivery: Delivery, owned: Owned, heartbeat: Heartbeat) -> OutcomeWrites:
        """How the ended try's outcome is written (``domain.outcomes``): retried on transient storage errors
        for up to ``heartbeat_stale_s`` from now, and never past the invocation's end less
        ``OUTCOME_RESERVE_S``, the run held by a beat every ``heartbeat_interval_s`` meanwhile."""
        now = self.clock()
        until = now + self.settings.heartbeat_stale_s * 1000
        if delivery.remaining_ms is not None:
            until = min(until, now + delivery.remaining_ms() - OUTCOME_RESERVE_S * 1000)
        return OutcomeWrites(
            runs=self.runs,
            owned=owned,
            heartbeat=heartbeat,
            clock=self.clock,
            waiter=self.waiter or RealWaiter(),
            beat_every_ms=self.settings.heartbeat_interval_s * 1000,
            until_ms=until,
        )

    def _give_back(self, delivery: Delivery, owned: Owned, before: RunRow, error: Exception) -> Outcome:
        """Undo the claim after an error before the target started (``RunRows.give_back``) and hand the delivery
        back to come again in ``GIVE_BACK_DELAY_S``, doubled per earlier receive (``DEFERRED``). If the claim
        cannot be given back either, the error propagates: the record fails, and the run is recovered as a lost
        worker's once its heartbeat is stale (that try then counts)."""
        logger.warning(
            "storage error before the target started; giving the claim back",
            extra={"run_id": owned.run_id, "error": str(error)},
        )
        try:
            given = self.runs.give_back(owned, before=before)
        except Exception:
            logger.exception("claim could not be given back", extra={"run_id": owned.run_id})
            raise error from None
        if not given:
            return Outcome.LOST
        back_in_s = min(
            GIVE_BACK_DELAY_S * 2 ** min(max(delivery.receive_count, 1) - 1, 10), MAX_GIVE_BACK_DELAY_S
        )
        return self._defer(delivery, visible_in_s=back_in_s, reason="claim given back after a storage error")

    def _wait_for_lock(
        self, delivery: Delivery, owned: Owned, before: RunRow, job: Job, blocked: Blocked
    ) -> Outcome:
        """A try that may not be skipped for overlap (a retry, a lost worker's run taken over, the fire that waits
        under ``buffer_one``), or one whose job changed its ``overlap`` too recently (``Blocked.wait_s``): the claim is given
        back (``RunRows.give_back``: the row as it was, its attempt count kept) and the delivery comes again
        after ``blocked.wait_s``, or after the longest the holder's try can still hold the lock (the job's capped
        ``timeout_s`` plus ``heartbeat_stale_s``, at most ``MAX_GIVE_BACK_DELAY_S``): ``DEFERRED``. If the claim
        is no longer ours, ``LOST``. A storage error propagates (the record fails and comes back)."""
        if blocked.wait_s is not None:
            wait_s = blocked.wait_s
        else:
            longest_s = (
                min(job.timeout_s, self.settings.worker_timeout_cap_s) + self.settings.heartbeat_stale_s
            )
            wait_s = min(max(GIVE_BACK_DELAY_S, longest_s), MAX_GIVE_BACK_DELAY_S)
        logger.info(
            "overlap: waiting for the job's lock",
            extra={
                "run_id": owned.run_id,
                "holder": blocked.holder,
                "previous": before.status.value,
                "wait_s": wait_s,
            },
        )
        if not self.runs.give_back(owned, before=before):
            return Outcome.LOST
        return self._defer(delivery, visible_in_s=wait_s, reason="waiting for the job's overlap lock")

    def _watch(self, running: RunRow) -> None:
        """Before a duplicate delivery of a ``running`` run is dropped: put the run into the sweep index, due when
        its heartbeat would go stale. Its message was its only guard (a row made by its claim has no sweep keys),
        and dropping a copy of that message deletes it, so without this a worker lost afterwards would leave the
        run ``running`` for ever; with it the sweeper takes it over. Raises ``StoreUnavailable``."""
        beat = running.heartbeat_at or running.started_at or self.clock()
        if self.runs.watch(Owned.of(running), sweep_at_ms=beat + self.settings.heartbeat_stale_s * 1000):
            logger.info(
                "running run watched by the sweeper after a duplicate delivery",
                extra={"run_id": running.run_id},
            )

    def read_specs(self, job_ids: Sequence[str]) -> BatchSpecs | None:
        """The jobs of a received batch's runs by id (the deleted ones left out), read together before any is
        claimed (``JobSpecs.get_specs``: one request per 100 jobs instead of one per run), for ``handle``'s
        ``specs``. None for no ``job_ids``, and when the read fails for any reason (logged): a storage error,
        or a job this worker cannot read; each run then reads its own job, as without it, and only a run whose
        job cannot be read fails."""
        if not job_ids:
            return None
        read_at = self.clock()
        try:
            return BatchSpecs(frozenset(job_ids), self.jobs.get_specs(job_ids), read_at)
        except Exception:  # an optimisation only: the per-run reads give each error to its own run
            logger.warning(
                "the batch's jobs not read together; each run reads its own",
                extra={"jobs": len(job_ids)},
                exc_info=True,
            )
            return None

    def hold(self, receipt_handles: list[str]) -> None:
        """For a batch received from the run queue, before its records are claimed (they are, all at once):
        their messages stay invisible for ``heartbeat_stale_s + heartbeat_interval_s`` instead of the queue's
        visibility timeout (one request per 10 messages), and each heartbeat extends a running try's the same
        way. If a worker is lost, SQS delivers its message again once the run's heartbeat is stale, and that
        delivery's claim takes the run over: the recovery of a lost worker for a run outside the sweep index
        (design §4.7). An error is logged: the messages then come back after the queue's own visibility
        timeout instead (later, still recovered)."""
        if self.visibility is None or not receipt_handles:
            return
        try:
            self.visibility.change_visibility_batch(
                receipt_handles, self.settings.heartbeat_stale_s + self.settings.heartbeat_interval_s
            )
        except Exception:
            logger.exception(
                "message visibility not shortened; a lost worker's run is recovered after the queue's "
                "visibility timeout",
                extra={"messages": len(receipt_handles)},
            )

    def _time_needed_ms(self, timeout_s: int) -> int:
        """Invocation time a try of ``timeout_s`` (capped) needs before it may be claimed, ms."""
        return (min(timeout_s, self.settings.worker_timeout_cap_s) + CLAIM_MARGIN_S) * 1000

    def _defer(self, delivery: Delivery, *, visible_in_s: int, reason: str) -> Outcome:
        """Hand an unclaimed delivery back: its message visible again in ``visible_in_s`` seconds (see
        ``process``)."""
        if self.visibility is not None and delivery.receipt_handle:
            try:
                self.visibility.change_visibility(delivery.receipt_handle, visible_in_s)
            except Exception:
                logger.exception(
                    "could not hand the message back; it returns after the visibility timeout",
                    extra={
                        "run_id": run_id(delivery.message.job_id, delivery.message.scheduled_for),
                        "reason": reason,
                    },
                )
        return Outcome.DEFERRED

    def _skip(self, owned: Owned, reason: str) -> Outcome:
        if not self.runs.skip(owned, now_ms=self.clock(), reason=reason):
            return Outcome.LOST
        self.metrics.run_skipped()
        logger.info("run skipped", extra={"run_id": owned.run_id, "job_id": owned.job_id, "reason": reason})
        return Outcome.SKIPPED
