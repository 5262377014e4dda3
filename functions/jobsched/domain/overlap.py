"""The job's overlap lock as a try takes and lets go of it (design §5.4, ``overlap: skip``, ``buffer_one`` and
``replace``): one
conditional write takes it (``JobSpecs.acquire_overlap``), exact whatever the history length; a holder whose try
is over is replaced; a try still running without the lock (started while the job had ``overlap: allow``) blocks
it; and a cancelled try that may still be running holds it on after its record. Under ``buffer_one`` a fire that
finds the lock held becomes the one fire that waits for it (``JobSpecs.buffer_overlap``) unless another fire
waits already; the holder's release hands the lock to it and sends its run a message (``OverlapLock.let_go``). Under
``replace`` a fire that finds the lock held cancels the holder's run (``domain.cancels.cancel_run``, by
``REPLACED_BY``), and a fire that waits already, then waits for the lock as under ``buffer_one``: the holder's
worker stops the try at its next heartbeat and lets go of the lock once it has stopped (a cancelled try whose
lock is not let go of holds it until the lock goes stale). Within seconds of a change of
``overlap`` (``PRE_CLAIM_SPEC_MS``) a try waits too, and an ``allow`` spec read before the claim is read again
after it when the claim landed later than that: a try under a spec read before a PATCH to ``skip`` never runs
beside a locked try.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from jobsched.clock import Clock, to_ms
from jobsched.domain.cancels import cancel_run
from jobsched.models import Job, LambdaTarget, RunStatus
from jobsched.ports.errors import StoreUnavailable
from jobsched.ports.limits import RunLimits
from jobsched.ports.run_messages import RunMessage
from jobsched.ports.run_stores import JobSpecs, RunRows, RunSender
from jobsched.ports.runs import BufferRequest, OverlapHolder, OverlapRequest, Owned, RunFilter, RunKey, RunRow
from jobsched.ports.targets import TargetCall

logger = logging.getLogger(__name__)

OVERLAP_CHANGE_EVENTS = 20
"""The page size in which the worker reads a recently changed job's newest audit events to find a change of its
``overlap`` (``OverlapLock.take``): it reads on, page by page, until an event older than the longest a try
lasts, so one page unless a script edits the job many times a minute."""
RUNNING_ROWS_PAGE = 10
"""The page size in which ``OverlapLock.take`` lists a job's running rows."""
PRE_CLAIM_SPEC_MS = 5_000
"""A job's spec read before its run's claim (``Worker.read_specs``, or the time check) is used under ``overlap:
allow`` only when the claim landed within this of the read (ms, measured from before the read to after the
claim); otherwise the spec is read again after the claim. A worker taking a job's overlap lock waits this (plus
``CLOCK_SKEW_MS``) after a change of the job's ``overlap`` before it trusts that no try runs without the lock
(``OverlapLock.take``): together they keep a claim under a spec read before a PATCH to ``skip`` from running
beside a locked try, at no cost to a run in the steady state."""
CLOCK_SKEW_MS = 2_000
"""The most two hosts' clocks are taken to disagree (ms): the API stamps a change, a worker compares with it."""
STOP_GRACE_S = 2.0
"""Seconds a cancelled try (timed out, or told to stop by its heartbeat) has to return before the worker takes it
as still running: its job's overlap lock is then held on (``OverlapLock.let_go``)."""
LAMBDA_MAX_RUN_S = 900
"""The longest a Lambda function runs (AWS's limit): an invocation goes on when its caller stops waiting, so a
cancelled ``lambda`` try holds its job's overlap lock this long from its start."""


REPLACED_BY = "jobsched:replace"
"""The ``cancelled_by`` of a run a fire of its job replaced (``overlap: replace``; the reason names that fire's run)."""

TAKE_TRIES = 3
"""How often ``OverlapLock.take`` asks for a ``buffer_one`` job's lock that was let go of between its refusal and
the request to wait for it, before the try waits ``CONTENDED_WAIT_S`` and asks again (never skipped so)."""
CONTENDED_WAIT_S = 5
"""Seconds a ``buffer_one`` try whose lock changed hands on each of its ``TAKE_TRIES`` waits before it asks again."""


@dataclass(frozen=True)
class Blocked:
    """Why a try may not run now under ``overlap: skip`` or ``buffer_one``: ``holder``, the run id of the try
    holding or running outside the job's lock (or a description of the try that may yet start); ``wait_s``: when
    set, the try waits this long (s) whatever it is (the job's ``overlap`` changed too recently to tell);
    ``buffered``: the try's run is the fire that waits for the lock (``buffer_one``, ``replace``), so it waits;
    ``waiting``: the run id of another fire that waits for it (``buffer_one``). Otherwise a fresh fire's first try is skipped and
    any other waits (``Worker._wait_for_lock``)."""

    holder: str
    wait_s: int | None = None
    buffered: bool = False
    waiting: str | None = None

    @property
    def reason(self) -> str:
        """Why a fresh fire is skipped, for its row's ``error``."""
        running = f"overlap: run {self.holder} of this job is still running"
        return running if self.waiting is None else f"{running} and run {self.waiting} waits for it"


@dataclass(eq=False)
class TryEnd:
    """The call of a try once ``Worker._run`` made it (None before), so the overlap lock is let go of knowing how
    the try ended."""

    call: TargetCall | None = None


@dataclass(kw_only=True, eq=False)
class OverlapLock:
    """Takes and lets go of jobs' overlap locks for the worker's tries (see the module docstring). Thread-safe:
    it keeps no state between calls."""

    settings: RunLimits
    runs: RunRows
    jobs: JobSpecs
    clock: Clock
    queue: RunSender | None = None
    """Where the run of a fire the lock is handed to is sent (``let_go``); None: it comes with its own message."""

    def take(self, owned: Owned, job: Job, now: int) -> Blocked | None:
        """Take ``job``'s overlap lock for the claimed try ``owned`` at ``now`` (epoch ms): None when taken and no
        try runs without it, else why the try may not run (``Blocked``; the lock is then not held). Under
        ``buffer_one`` a try that finds it held asks to wait for it (``_wait_behind``); under ``replace`` it first
        cancels the holder's run (``_replace``). Raises
        ``StoreUnavailable`` (the lock given back first when it was taken)."""
        seen = ""
        for _ in range(TAKE_TRIES):
            holder = self._acquire(owned, now)
            if holder is None:
                break
            if not job.overlap.waits:
                return Blocked(holder.run_id)
            replacing = job.overlap.replaces
            if replacing and self._replace(owned, holder.run_id, now):
                continue  # nothing of that run was running: the lock is asked for again
            seen = holder.run_id
            blocked = self._wait_behind(owned, holder, replacing=replacing)
            if blocked is not None:
                return blocked
        else:
            return Blocked(seen, wait_s=CONTENDED_WAIT_S)
        try:
            return self._unlocked_try(owned, job, now)
        except StoreUnavailable:
            self.release(owned)  # the caller gives the claim back: so is the lock
            raise

    def _acquire(self, owned: Owned, now: int) -> OverlapHolder | None:
        """Take the job's overlap lock for ``owned``; None when taken, else the lock as held.

        A holder whose heartbeat is fresh may still be over: its worker finished the try but could not give the
        lock back (an error, or it died right after recording the result). So when refused, the holder's run
        row is read (1 consistent GetItem, only under contention): unless it is still running under the lock's
        claim (or cancelled while running under it: its try stops at its next heartbeat and its worker lets go of
        the lock then), the lock is taken from that exact holder (a conditional write), so a finished run never
        makes the job's next fires skip. A lock handed to a fire that waits (``OverlapHolder.reserved``) is held until that
        fire's run is over."""

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
        if (
            not holder.reserved
            and holder.heartbeat_at is not None
            and holder.heartbeat_at > now + CLOCK_SKEW_MS
        ):
            return holder  # held on past its try's record: that try may still run (``let_go``)
        if holder.reserved:
            still_running = not self._run_over(owned.job_id, holder.run_id)
        else:
            row = self._row(owned.job_id, holder.run_id)
            still_running = (
                row is not None
                and (row.status is RunStatus.RUNNING or row.cancelled_from is RunStatus.RUNNING)
                and row.attempt == holder.attempt
                and row.worker == holder.worker
            )
        if still_running:
            return holder
        refused = acquire(replacing=holder)
        if refused is not None:
            return refused
        logger.info(
            "overlap lock taken from a finished try",
            extra={"run_id": owned.run_id, "previous": holder.run_id},
        )
        return None

    def _wait_behind(self, owned: Owned, holder: OverlapHolder, *, replacing: bool = False) -> Blocked | None:
        """Under ``buffer_one`` or ``replace``, with the lock held by ``holder``: make ``owned``'s run the fire that
        waits for it (1 conditional write), or, when another fire waits, replace that fire if its run is over (1
        read, and 1 write then); under ``replace`` (``replacing``) the fire that waits is cancelled first
        (``_replace``), so the newest fire is the one that waits. ``Blocked`` (``buffered`` when this run waits,
        else naming the fire that waits), or None when the lock was let go of meanwhile (the caller asks for it
        again)."""
        answer = self.jobs.buffer_overlap(BufferRequest(owned.job_id, owned.run_id))
        held = answer.holder
        if answer.buffered:
            return Blocked(held.run_id if held is not None else holder.run_id, buffered=True)
        if held is None or held.waiting is None:
            return None
        waiting = held.waiting
        if replacing:
            self._replace(owned, waiting, self.clock())
        if self._run_over(owned.job_id, waiting):
            again = self.jobs.buffer_overlap(BufferRequest(owned.job_id, owned.run_id, replacing=waiting))
            if again.buffered:
                logger.info(
                    "overlap: a fire that waited and is over replaced",
                    extra={"run_id": owned.run_id, "previous": waiting},
                )
                return Blocked(held.run_id, buffered=True)
        return Blocked(held.run_id, waiting=waiting)

    def _replace(self, owned: Owned, run: str, now: int) -> bool:
        """Under ``replace``: cancel run id ``run`` of ``owned``'s job at ``now`` (epoch ms) for ``owned``'s run
        (``cancel_run``, by ``REPLACED_BY``; 1 conditional write), unless ``run`` is newer (a later
        ``scheduled_for``: an older run's retry never replaces a newer fire, the newest fire runs). True when this call cancelled a run that had no
        try running (queued, or retrying: the lock it held or waited for is free of it now), else False (a
        running try, cancelled by this call or earlier, stops at its worker's next heartbeat; or the run is over
        or gone). Raises ``StoreUnavailable``."""
        _, _, scheduled_for = run.partition("@")
        if run == owned.run_id or not scheduled_for.isdigit():
            return False  # its own earlier try, held on: waited for, never cancelled
        if int(scheduled_for) > owned.scheduled_for:
            return False  # a newer fire's run: the try of an older one (its retry) waits for it instead
        reason = f"replaced by run {owned.run_id} (overlap: replace)"
        done = cancel_run(
            self.runs, RunKey(owned.job_id, int(scheduled_for)), now_ms=now, by=REPLACED_BY, reason=reason
        )
        if not done.done or done.row is None:
            return False
        logger.info("overlap: run replaced", extra={"run_id": owned.run_id, "replaced": run})
        return done.row.cancelled_from is not RunStatus.RUNNING

    def _row(self, job_id: str, run: str) -> RunRow | None:
        """The run row of run id ``run`` of job ``job_id`` (1 consistent read), None when absent."""
        _, _, scheduled_for = run.partition("@")
        return self.runs.get(job_id, int(scheduled_for)) if scheduled_for.isdigit() else None

    def _run_over(self, job_id: str, run: str) -> bool:
        """Whether run ``run`` of job ``job_id`` is over (finished, or no row): a fire that waits for the lock, or
        one it was handed to, whose run ended otherwise (its job deleted, its message dead-lettered) holds it no
        more."""
        row = self._row(job_id, run)
        return row is None or row.status.terminal

    def _unlocked_try(self, owned: Owned, job: Job, now: int) -> Blocked | None:
        """With the overlap lock just taken: another try of the job still running without it (its heartbeat
        fresh), or one that may yet start without it, else None; when there is one, the lock is given back. Such
        a try started while the job had ``overlap: allow`` (it took no lock), so it can only exist when a change
        of the job's ``overlap`` lies within the longest a try lasts (``worker_timeout_cap_s`` plus the
        heartbeat's staleness). Only a job changed that recently has its audit events read, newest first, back to
        that window's start (1 query per ``OVERLAP_CHANGE_EVENTS``), and only when one of them set ``overlap``
        are its running tries listed (a status-filtered read of its history, so in the minutes after such a
        change alone). Within ``PRE_CLAIM_SPEC_MS + CLOCK_SKEW_MS`` of such a change a claim under a spec read
        before it may still land and run unlocked (``Worker._spec_may_be_stale``): the answer then says to wait
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
            self.release(owned)
            return Blocked(
                "a try claimed under the job's earlier overlap", wait_s=-(-(settled_at - now) // 1000)
            )
        other = self._running_other(owned, stale_before=now - self.settings.heartbeat_stale_s * 1000)
        if other is None:
            return None
        self.release(owned)
        return Blocked(other)

    def let_go(self, owned: Owned, job: Job, claimed_at: int, call: TargetCall | None) -> None:
        """After the try of ``owned`` (claimed at ``claimed_at``, epoch ms) is recorded: give the job's overlap
        lock back, unless the try may still be running. A cancelled try (``call.cancel``) that has not returned
        within ``STOP_GRACE_S`` (a command ignoring the cancel) holds the lock ``worker_timeout_cap_s`` more; a
        cancelled ``lambda`` try holds it until ``LAMBDA_MAX_RUN_S`` after its start (the function runs on).
        Held on: the lock's ``heartbeat_at`` is set to the end of the hold (one conditional write), which keeps
        it from anyone, this run's retry included (``OverlapRequest.held_after_ms``), until then; after that it is
        taken as usual. Errors are logged (the lock then goes stale after ``heartbeat_stale_s``). A lock handed to
        the fire that waits for it (``release``) gets that fire's run a message."""
        if call is None or not call.cancel.cancelled:
            self.release(owned)
            return
        until = 0
        if not call.ended.wait(STOP_GRACE_S):
            until = self.clock() + self.settings.worker_timeout_cap_s * 1000
        if isinstance(job.target, LambdaTarget):
            until = max(until, claimed_at + LAMBDA_MAX_RUN_S * 1000)
        if until <= self.clock():
            self.release(owned)
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
            changes = [event.at for event in recent if "overlap" in event.changed_fields]
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

    def release(self, owned: Owned) -> None:
        """Give the job's overlap lock back if ``owned`` holds it, or hand it to the fire that waits for it
        (``JobSpecs.release_overlap``), whose run is then sent a message so it runs now rather than when its own
        message comes back (``Worker._wait_for_lock``; that message, kept, is the run's record should this one be
        lost). Errors are logged: a lock not released goes stale after ``heartbeat_stale_s``; a message not sent
        leaves the fire to its own."""
        try:
            handed = self.jobs.release_overlap(
                owned.job_id, run_id=owned.run_id, attempt=owned.attempt, worker=owned.worker
            )
        except Exception:
            logger.exception(
                "overlap lock not released; it goes stale after heartbeat_stale_s",
                extra={"run_id": owned.run_id},
            )
            return
        if handed is None or self.queue is None:
            return
        _, _, scheduled_for = handed.partition("@")
        if not scheduled_for.isdigit():
            return
        key = RunKey(owned.job_id, int(scheduled_for))
        logger.info(
            "overlap lock handed to the fire that waits", extra={"run_id": owned.run_id, "to": handed}
        )
        try:
            self.queue.send([RunMessage(key.job_id, key.scheduled_for, enqueued_at=self.clock())])
        except Exception:
            logger.exception(
                "the fire that waits was not sent; its own message comes back", extra={"to": handed}
            )

    def spec_may_be_stale(self, job: Job | None, read_at: int | None) -> bool:
        """Whether a spec read before the claim (sent at ``read_at``, epoch ms; None: read after it) must be read
        again: under ``overlap: allow`` a try takes no lock, so a PATCH to ``skip`` that landed between the read
        and the claim would let it run beside a locked try. Trusted when the claim landed within
        ``PRE_CLAIM_SPEC_MS`` of the read (a lock taker waits that long after such a change: ``OverlapLock.take``)."""
        if read_at is None or job is None or job.overlap.locks:
            return False
        return self.clock() - read_at > PRE_CLAIM_SPEC_MS
