"""The worker: one delivery of a run, from claim to a recorded result (design §5.1-§5.3). Pure domain: no
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
   ``heartbeat_at`` and, on the first try, ``lateness_ms`` (start minus ``scheduled_for``). Before the
   claims, the batch's messages were made invisible for ``heartbeat_stale_s + heartbeat_interval_s``
   (``Worker.hold``: one request per batch), which each heartbeat extends: if this worker is lost, SQS
   delivers the message again once the run's heartbeat is stale and that delivery's claim takes the run over. A delivery that loses the claim (a duplicate, a finished run) is
   acknowledged and dropped: SQS gives at least once, the claim gives at most one try at a time. Acknowledging
   a duplicate of a ``running`` run deletes its message, so the run is first put into the sweep index
   (``RunRows.watch``; a watch that fails hands the duplicate back instead).
2. The job's spec: read with the rest of the batch's before any claim (``Worker.read_specs``, one request per
   batch; when that read fails, each run reads its own here). Deleted: the run is recorded ``skipped``. Out of
   attempts (the lost worker's try was the last, or ``max_attempts`` was lowered): ``dead`` without running.
   ``overlap: skip``: take the job's overlap lock (``JobSpecs.acquire_overlap``, one conditional write, exact
   whatever the history length); held by another run with a fresh heartbeat, or, for a job changed within the
   longest a try lasts, another try still running without the lock (started under ``overlap: allow``):
   ``skipped`` when this is a fresh fire's first try (the row was ``queued``); a retry or a lost worker's run
   taken over waits instead (``Worker._wait_for_lock``: the claim given back, its attempts kept, the delivery
   back when the holder's try must be over). Within seconds of a change of ``overlap`` (``PRE_CLAIM_SPEC_MS``)
   a try waits too, and an ``allow`` spec read before the claim is read again after it when the claim landed
   later than that: a try under a spec read before a PATCH to ``skip`` never runs beside a locked try. A storage error anywhere in this step gives the claim back (``RunRows.give_back``: the row as
   it was before the claim) and the delivery comes again in ``GIVE_BACK_DELAY_S``, doubled per earlier
   receive: a try the target never saw does not count.
3. Run the target in a thread under ``supervise``: past ``timeout_s`` the try fails as timed out (the target
   is cancelled: a shell command's process group gets SIGTERM then SIGKILL, an http request's connection is
   shut, a command is asked to stop; a cancelled try that has not returned within ``STOP_GRACE_S``, and any
   cancelled ``lambda`` try, keeps the job's overlap lock for as long as it may still run:
   ``Worker._let_go_of_lock``); every ``heartbeat_interval_s`` the run
   row's ``heartbeat_at`` and the message's visibility are extended (an extension that fails puts the run into
   the sweep index, ``Heartbeat``). A refused beat (the run was taken over)
   cancels the try, which ends ``LOST`` without writing anything; heartbeat writes failing for so long that
   the row would soon look lost (``heartbeat_stale_s`` minus one interval since the last recorded beat)
   cancel it too, recorded as a failed try if the run is still ours. Either way no second worker ever runs
   the target while this one still does.
4. Record the result with the try's entry in the run's ``tries`` (attempt, start, finish, worker, error and the
   target's ``output`` excerpt; ``jobsched.ports.tries``), in the same write, conditioned on the run still being
   this claim's: ``succeeded``; or after a failed try
   ``retrying`` (then the retry message, SQS delay ``RetryPolicy.delay_s``) or, out of attempts, ``dead``
   (then the dead-run message and the owner's alert).
   A write that fails on a transient storage error is tried again while the worker still holds the run
   (``domain.outcomes``: beats go on meanwhile), so a try that ended is never taken over as a lost worker's
   while its outcome could still be stored.

Crash safety, write by write: every state is recoverable. A scheduled run before its claim is its message
(SQS keeps it until a claim succeeds or redrives it to the dead-letter queue, which the sweeper drains:
design §4.7); ``queued`` rows of manual runs and ``retrying`` rows carry ``sweep_at`` (re-enqueued by the
sweeper when their message never comes); a ``running`` row whose worker died stops beating and its message
comes back (taken over by that redelivery, or, for a row in the sweep index, by the sweeper as a failed
try); ``dead`` is written before its notifications and keeps its sweep keys with ``notify_pending`` until
they are out (the sweeper resends).
No second worker runs a try concurrently: every claim is conditional, and a worker that can no longer prove
it holds the run (refused or long-failing heartbeats) abandons its try before the run can be taken over.
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import InitVar, dataclass, field, replace

from jobsched.clock import Clock
from jobsched.domain.alerting import Alerting
from jobsched.domain.outcomes import OUTCOME_RESERVE_S, OutcomeWrites
from jobsched.domain.redaction import redactor_for
from jobsched.domain.retries import (
    DEAD_LETTER_WORKER,
    Failures,
    Outcome,
    Owned,
    lost_worker_error,
    with_lost_try,
)
from jobsched.domain.supervision import Heartbeat, RealWaiter, TryAbandoned, Waiter, supervise
from jobsched.models import Job, JobEventKind, LambdaTarget, OverlapPolicy, RunKind, RunStatus, to_ms
from jobsched.ports.errors import StoreUnavailable
from jobsched.ports.limits import RunLimits
from jobsched.ports.metrics import RunMetrics
from jobsched.ports.runs import (
    DeadRunSink,
    Delivery,
    JobSpecs,
    OverlapHolder,
    OverlapRequest,
    RunFilter,
    RunRow,
    RunRows,
    RunSender,
    TargetRunner,
    VisibilityExtender,
    claim_message,
    run_id,
)
from jobsched.ports.targets import TargetCall, TargetFailed, TargetNotStarted
from jobsched.ports.tries import TryRecord, with_try

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
OVERLAP_CHANGE_EVENTS = 20
"""The page size in which the worker reads a recently changed job's newest audit events to find a change of its
``overlap`` (``Worker._unlocked_try``): it reads on, page by page, until an event older than the longest a try
lasts, so one page unless a script edits the job many times a minute."""
RUNNING_ROWS_PAGE = 10
"""The page size in which ``Worker._unlocked_try`` lists a job's running rows."""
PRE_CLAIM_SPEC_MS = 5_000
"""A job's spec read before its run's claim (``Worker.read_specs``, or the time check) is used under ``overlap:
allow`` only when the claim landed within this of the read (ms, measured from before the read to after the
claim); otherwise the spec is read again after the claim. A worker taking a job's overlap lock waits this (plus
``CLOCK_SKEW_MS``) after a change of the job's ``overlap`` before it trusts that no try runs without the lock
(``Worker._unlocked_try``): together they keep a claim under a spec read before a PATCH to ``skip`` from running
beside a locked try, at no cost to a run in the steady state."""
CLOCK_SKEW_MS = 2_000
"""The most two hosts' clocks are taken to disagree (ms): the API stamps a change, a worker compares with it."""
STOP_GRACE_S = 2.0
"""Seconds a cancelled try (timed out, or told to stop by its heartbeat) has to return before the worker takes it
as still running: its job's overlap lock is then held on (``Worker._let_go_of_lock``)."""
LAMBDA_MAX_RUN_S = 900
"""The longest a Lambda function runs (AWS's limit): an invocation goes on when its caller stops waiting, so a
cancelled ``lambda`` try holds its job's overlap lock this long from its start."""
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


@dataclass(frozen=True)
class BatchSpecs:
    """The jobs of a received batch's runs, read together before any is claimed (``Worker.read_specs``):
    ``jobs`` by id, of the ``ids`` asked for; an id asked for and absent from ``jobs`` is a deleted job."""

    ids: frozenset[str]
    jobs: Mapping[str, Job]
    read_at_ms: int | None = None
    """Epoch ms taken before the read was sent (None: unknown, as old as can be: an ``overlap: allow`` spec is
    then read again after its run's claim)."""

    def asked(self, job_id: str) -> bool:
        """Whether ``job_id`` was read with the batch (if not, its run reads its own job)."""
        return job_id in self.ids


@dataclass(eq=False)
class TryEnd:
    """The call of a try once ``Worker._run`` made it (None before), so the overlap lock is let go of knowing how
    the try ended."""

    call: TargetCall | None = None


@dataclass(frozen=True)
class Blocked:
    """Why a try may not run now under ``overlap: skip``: ``holder``, the run id of the try holding or running
    outside the job's lock (or a description of the try that may yet start); ``wait_s``: when set, the try waits
    this long (s) whatever it is (the job's ``overlap`` changed too recently to tell); when None, a fresh fire's
    first try is skipped and any other waits (``Worker._wait_for_lock``)."""

    holder: str
    wait_s: int | None = None


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

    def __post_init__(self, queue: RunSender, dead_runs: DeadRunSink) -> None:
        self.failures = Failures(
            runs=self.runs,
            queue=queue,
            dead_runs=dead_runs,
            settings=self.settings,
            clock=self.clock,
            metrics=self.metrics,
            alerting=self.alerting,
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
        # the run's first start; a backfill, or a skipped run re-run, starts when its owner asked: never "late"
        on_request = before.kind is RunKind.BACKFILL or bool(before.reruns)
        if before.lateness_ms is None and not on_request:
            self.metrics.run_late(max(0, now - message.scheduled_for))
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
            if not spec_read or self._spec_may_be_stale(job, spec_read_at):
                job = self.jobs.get_spec(message.job_id)
            if job is None:
                return self._skip(owned, "job deleted before the run started")
            if dead_letter_claim:  # SQS gave up on its message; the sweeper's pass stopped before saying so
                return self.failures.dead_lettered(owned, job, before.attempt)
            if attempt > job.retry.max_attempts:
                if lost is not None:  # the lost worker's try (recorded above) was the last
                    return self.failures.dead(owned, job, lost, attempts=attempt - 1, tries=before.tries)
                error = f"out of attempts: the job allows {job.retry.max_attempts}"
                return self.failures.dead(owned, job, error, attempts=attempt - 1)
            locked = job.overlap is OverlapPolicy.SKIP
            if locked:
                blocked: Blocked | None = None
                holder = self._acquire_overlap(owned, now)
                if holder is not None:
                    blocked = Blocked(holder)
                else:
                    try:
                        blocked = self._unlocked_try(owned, job, now)
                    except StoreUnavailable:
                        self._release_overlap(owned)  # the claim is given back below: so is the lock
                        raise
                if blocked is not None:
                    fresh = before.status is RunStatus.QUEUED and lost is None
                    if not fresh or blocked.wait_s is not None:
                        return self._wait_for_lock(delivery, owned, before, job, blocked)
                    running = f"overlap: run {blocked.holder} of this job is still running"
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
            return self._run(delivery, owned, job, now, overlap_locked=locked, before=before, tried=tried)
        finally:
            if locked:
                self._let_go_of_lock(owned, job, now, tried.call)

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
    ) -> Outcome:
        """Run the claimed try ``owned`` of ``job`` under supervision and record its result; ``tried.call`` is
        set to the try's call."""
        attempt = owned.attempt
        call = TargetCall(
            run_id=owned.run_id,
            job_id=owned.job_id,
            scheduled_for_ms=owned.scheduled_for,
            attempt=attempt,
            input=job.input,
            timeout_s=float(min(job.timeout_s, self.settings.worker_timeout_cap_s)),
            owner=job.owner,
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
            return self._failed(owned, job, error, before, call, claimed_at, delivery, heartbeat)
        except TargetNotStarted as error:
            return self._give_back(delivery, owned, before, error)
        except TargetFailed as error:
            return self._failed(owned, job, str(error), before, call, claimed_at, delivery, heartbeat)
        except Exception as error:  # a bug in an executor still ends the try, never the run
            failure = redactor_for(job.target)(f"{type(error).__name__}: {error}")
            frame = traceback.extract_tb(error.__traceback__)[
                -1
            ]  # where, without a message that may hold secrets
            logger.error(
                "target raised unexpectedly",
                extra={
                    "run_id": owned.run_id,
                    "error": failure,
                    "at": f"{frame.filename}:{frame.lineno} in {frame.name}",
                },
            )
            return self._failed(owned, job, failure, before, call, claimed_at, delivery, heartbeat)

        now = self.clock()
        redact = redactor_for(job.target)
        tries = _tried(before, attempt, claimed_at, owned.worker, now, None, redact.optional(call.output))
        write = self._outcome_writes(delivery, owned, heartbeat)
        if not write(
            lambda: self.runs.succeed(owned, now_ms=now, tries=tries),
            status=RunStatus.SUCCEEDED,
            attempt=attempt,
        ):
            logger.warning(
                "run succeeded but is no longer ours (taken over meanwhile)", extra={"run_id": owned.run_id}
            )
            return Outcome.LOST
        self.metrics.run_succeeded()
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
    ) -> Outcome:
        """Record the failed try (``Failures.failed_try``) with its entry in the run's tries. The target's
        secrets are redacted from ``error`` and the try's output before anything is cut, stored, logged or
        alerted (``jobsched.domain.redaction``)."""
        redact = redactor_for(job.target)
        error = redact(error)
        output = redact.optional(call.output)
        tries = _tried(before, owned.attempt, claimed_at, owned.worker, self.clock(), error, output)
        write = self._outcome_writes(delivery, owned, heartbeat)
        return self.failures.failed_try(owned, job, error, tries=tries, write=write)

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

    def _spec_may_be_stale(self, job: Job | None, read_at: int | None) -> bool:
        """Whether a spec read before the claim (sent at ``read_at``, epoch ms; None: read after it) must be read
        again: under ``overlap: allow`` a try takes no lock, so a PATCH to ``skip`` that landed between the read
        and the claim would let it run beside a locked try. Trusted when the claim landed within
        ``PRE_CLAIM_SPEC_MS`` of the read (a lock taker waits that long after such a change: ``_unlocked_try``)."""
        if read_at is None or job is None or job.overlap is not OverlapPolicy.ALLOW:
            return False
        return self.clock() - read_at > PRE_CLAIM_SPEC_MS

    def _wait_for_lock(
        self, delivery: Delivery, owned: Owned, before: RunRow, job: Job, blocked: Blocked
    ) -> Outcome:
        """A try that may not be skipped for overlap (a retry, a lost worker's run taken over), or one whose job
        changed its ``overlap`` too recently to tell (``Blocked.wait_s``), waits for the lock: the claim is given
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

    def _acquire_overlap(self, owned: Owned, now: int) -> str | None:
        """Take the job's overlap lock for ``owned``; None when taken, else the run id of the try running.

        A holder whose heartbeat is fresh may still be over: its worker finished the try but could not give the
        lock back (an error, or it died right after recording the result). So when refused, the holder's run
        row is read (1 consistent GetItem, only under contention): unless it is still running under the lock's
        claim, the lock is taken from that exact holder (a conditional write), so a finished run never makes the
        job's next fires skip."""

        def acquire(replacing: OverlapHolder | None = None) -> OverlapHolder | None:
            return self.jobs.acquire_overlap(
                OverlapRequest(
                    job_id=owned.job_id,
                    run_id=owned.run_id,
                    attempt=owned.attempt,
                    worker=owned.worker,
                    now_ms=now,
                    stale_before_ms=now - self.settings.heartbeat_stale_s * 1000,
                    expires_at_s=now // 1000 + self.settings.retention_days * 86400,
                    replacing=replacing,
                    held_after_ms=now + CLOCK_SKEW_MS,
                )
            )

        holder = acquire()
        if holder is None:
            return None
        held = holder.run_id
        if holder.heartbeat_at is not None and holder.heartbeat_at > now + CLOCK_SKEW_MS:
            return held  # held on past its try's record: that try may still run (``_let_go_of_lock``)
        _, _, scheduled_for = held.partition("@")
        row = self.runs.get(owned.job_id, int(scheduled_for)) if scheduled_for.isdigit() else None
        still_running = (
            row is not None
            and row.status is RunStatus.RUNNING
            and row.attempt == holder.attempt
            and row.worker == holder.worker
        )
        if still_running or acquire(replacing=holder) is not None:
            return held
        logger.info(
            "overlap lock taken from a finished try", extra={"run_id": owned.run_id, "previous": held}
        )
        return None

    def _watch(self, running: RunRow) -> None:
        """Before a duplicate delivery of a ``running`` run is dropped: put the run into the sweep index, due when
        its heartbeat would go stale. Its message was its only guard (a row made by its claim has no sweep keys),
        and dropping a copy of that message deletes it, so without this a worker lost afterwards would leave the
        run ``running`` for ever; the sweeper now takes it over instead. Raises ``StoreUnavailable``."""
        beat = running.heartbeat_at or running.started_at or self.clock()
        if self.runs.watch(Owned.of(running), sweep_at_ms=beat + self.settings.heartbeat_stale_s * 1000):
            logger.info(
                "running run watched by the sweeper after a duplicate delivery",
                extra={"run_id": running.run_id},
            )

    def _unlocked_try(self, owned: Owned, job: Job, now: int) -> Blocked | None:
        """With the overlap lock just taken: another try of the job still running without it (its heartbeat
        fresh), or one that may yet start without it, else None; when there is one, the lock is given back. Such
        a try started while the job had ``overlap: allow`` (it took no lock), so it can only exist when a change
        of the job's ``overlap`` lies within the longest a try lasts (``worker_timeout_cap_s`` plus the
        heartbeat's staleness). Only a job changed that recently has its audit events read, newest first, back to
        that window's start (1 query per ``OVERLAP_CHANGE_EVENTS``), and only when one of them set ``overlap``
        are its running tries listed (a status-filtered read of its history, so in the minutes after such a
        change alone). Within ``PRE_CLAIM_SPEC_MS + CLOCK_SKEW_MS`` of such a change a claim under a spec read
        before it may still land and run unlocked (``_spec_may_be_stale``): the answer then says to wait
        (``Blocked.wait_s``)."""
        lasts_ms = (self.settings.worker_timeout_cap_s + self.settings.heartbeat_stale_s) * 1000
        since = now - lasts_ms
        if to_ms(job.updated_at) < since:
            return None
        changed_at = self._last_overlap_change(owned.job_id, since)
        if changed_at is None:
            return None
        settled_at = changed_at + PRE_CLAIM_SPEC_MS + CLOCK_SKEW_MS
        if now < settled_at:
            self._release_overlap(owned)
            return Blocked(
                "a try claimed under the job's earlier overlap", wait_s=-(-(settled_at - now) // 1000)
            )
        other = self._running_other(owned, stale_before=now - self.settings.heartbeat_stale_s * 1000)
        if other is None:
            return None
        self._release_overlap(owned)
        return Blocked(other)

    def _let_go_of_lock(self, owned: Owned, job: Job, claimed_at: int, call: TargetCall | None) -> None:
        """After the try of ``owned`` (claimed at ``claimed_at``, epoch ms) is recorded: give the job's overlap
        lock back, unless the try may still be running. A cancelled try (``call.cancel``) that has not returned
        within ``STOP_GRACE_S`` (a command ignoring the cancel) holds the lock ``worker_timeout_cap_s`` more; a
        cancelled ``lambda`` try holds it until ``LAMBDA_MAX_RUN_S`` after its start (the function runs on).
        Held on: the lock's ``heartbeat_at`` is set to the end of the hold (one conditional write), which keeps
        it from anyone, this run's retry included (``OverlapRequest.held_after_ms``), until then; after that it is
        taken as usual. Errors are logged (the lock then goes stale after ``heartbeat_stale_s``)."""
        if call is None or not call.cancel.cancelled:
            self._release_overlap(owned)
            return
        until = 0
        if not call.ended.wait(STOP_GRACE_S):
            until = self.clock() + self.settings.worker_timeout_cap_s * 1000
        if isinstance(job.target, LambdaTarget):
            until = max(until, claimed_at + LAMBDA_MAX_RUN_S * 1000)
        if until <= self.clock():
            self._release_overlap(owned)
            return
        logger.warning(
            "overlap lock held on: the cancelled try may still be running",
            extra={"run_id": owned.run_id, "until_ms": until},
        )
        try:
            self.jobs.renew_overlap(
                owned.job_id, run_id=owned.run_id, attempt=owned.attempt, worker=owned.worker, now_ms=until
            )
        except Exception:
            logger.exception(
                "overlap lock not held on; it goes stale after heartbeat_stale_s",
                extra={"run_id": owned.run_id},
            )

    def _last_overlap_change(self, job_id: str, since_ms: int) -> int | None:
        """The instant (epoch ms) of the newest ``updated`` audit event of job ``job_id`` at or after ``since_ms``
        that set its ``overlap``, else None: its events read newest first, page by page, until one older than
        ``since_ms``."""
        before: str | None = None
        while True:
            events, before = self.jobs.list_events(job_id, OVERLAP_CHANGE_EVENTS, before)
            recent = [event for event in events if event.at >= since_ms]
            changes = [
                event.at
                for event in recent
                if event.kind is JobEventKind.UPDATED and "overlap" in event.detail.get("fields", ())
            ]
            if changes:
                return max(changes)
            if before is None or len(recent) < len(events):
                return None

    def _running_other(self, owned: Owned, *, stale_before: int) -> str | None:
        """The run id of a ``running`` row of ``owned``'s job other than ``owned``'s run whose ``heartbeat_at`` is
        at or after ``stale_before`` (epoch ms), else None: its running rows read page by page."""
        before_ms: int | None = None
        while True:
            rows, before_ms = self.runs.list_for_job(
                owned.job_id, RUNNING_ROWS_PAGE, RunFilter(status=RunStatus.RUNNING), before_ms
            )
            for row in rows:
                if row.run_id != owned.run_id and (row.heartbeat_at or 0) >= stale_before:
                    return row.run_id
            if before_ms is None:
                return None

    def _release_overlap(self, owned: Owned) -> None:
        try:
            self.jobs.release_overlap(
                owned.job_id, run_id=owned.run_id, attempt=owned.attempt, worker=owned.worker
            )
        except Exception:
            logger.exception(
                "overlap lock not released; it goes stale after heartbeat_stale_s",
                extra={"run_id": owned.run_id},
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


def _tried(
    before: RunRow,
    attempt: int,
    started_at: int | None,
    worker: str | None,
    finished_at: int,
    error: str | None,
    output: str | None = None,
) -> tuple[TryRecord, ...]:
    """The run's tries (as the claim found them, ``before``) with this one appended, in the run's current round
    (``before.reruns``), bounded by ``jobsched.ports.tries.with_try``."""
    record = TryRecord(attempt, started_at, finished_at, worker, error, output, round=before.reruns)
    return with_try(before.tries, record)
