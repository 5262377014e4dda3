"""The API's use cases: create, read, list, change, delete, pause, resume and trigger jobs; list runs.

No HTTP here: methods take the caller's ``owner`` and the validated request models of ``jobsched.models`` and
return models, raising the named errors of ``jobsched.api.exceptions`` (or ``schedules.ScheduleError``);
``jobsched.api.errors`` turns those into responses. Storage goes through ``JobStore``/``RunStore``/``RunQueue``
(passed in, so tests can hand in fakes), time through the injected clock (epoch ms).

Rules and where they come from:
- a job belongs to its owner; another owner's job is "not found" on every call (design §3);
- ``name`` is unique per owner (the name-lock item): a repeated create with an identical spec returns the
  existing job, a different spec is a conflict (design §3);
- registration-time checks of the schedule (``schedules.validate_schedule``), ``timeout_s`` at most the
  worker's cap, ``shell`` targets only where the deployment allows them (design §2);
- ``next_run_at`` of a new job is the schedule's first fire from now; rates are anchored at ``start_at``, else
  at the job's creation (design §1); a re-timed job's is the first fire from now of its new settings, except
  that fires still pending (jitter not yet elapsed, or missed while the scheduler was down) are kept for the
  scheduler's ``missed`` policy (those timing rules: ``jobsched.api.timing``);
- pause takes the job out of the due index; resume puts it back at the first fire after the resume instant:
  fires that fell while it was paused are neither run nor recorded missed (design §4.4);
- a manual trigger is one run now, outside the schedule, keyed ``(job_id, now)`` like every run; it takes the
  next free millisecond when ``now`` is one of the schedule's fire instants, which stay the scheduler's;
- a job runs on a schedule or after another job (``after``: ``jobsched.api.chains``, design §2.1).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from jobsched.api import job_listing, timing
from jobsched.api.audit import AuditTrail
from jobsched.api.backfill import Backfiller
from jobsched.api.cancels import Cancels
from jobsched.api.chains import ChainLinks, relink
from jobsched.api.deletes import Deletes
from jobsched.api.exceptions import ConcurrentChange, InvalidInput, JobNotFound, NameConflict
from jobsched.api.idempotency import IdempotencyKeys
from jobsched.api.job_checks import check_settings, validation_problem
from jobsched.api.owned import OwnedJobs, is_job_id
from jobsched.api.quotas import Quotas
from jobsched.api.reruns import Reruns
from jobsched.api.results import CreateResult, TriggerResult
from jobsched.api.runs_listing import RunListing
from jobsched.api.schemas import (
    PATCH_NULLABLE_FIELDS,
    BackfillRequest,
    BackfillResult,
    JobCreate,
    JobEvent,
    JobPatch,
    Page,
)
from jobsched.api.triggers import Triggers
from jobsched.clock import Clock, maybe_from_ms, to_ms
from jobsched.domain import fires, registration
from jobsched.domain.quotas import QuotaExceeded
from jobsched.models import (
    Fires,
    Job,
    JobEventKind,
    JobSettings,
    Run,
    RunStatus,
    from_ms,
    paused_fields,
)
from jobsched.observability import logger
from jobsched.ports.alerts import AlertSink
from jobsched.ports.control import PartitionMarks
from jobsched.ports.errors import Conflict, NameTaken
from jobsched.ports.jobs import JobRepository, Rewrite, SchedulingState
from jobsched.ports.quotas import QuotaCounters
from jobsched.ports.run_stores import RunHistory, RunSender
from jobsched.schedule.engine import Schedule
from jobsched.settings import Settings
from jobsched.targets.ownership import TargetTags

NON_NULLABLE_PATCH_FIELDS = frozenset(JobPatch.model_fields) - PATCH_NULLABLE_FIELDS
"""PATCH fields that may be omitted but not set to null (``input``/``start_at``/``end_at`` may be cleared)."""

MERGED_PATCH_FIELDS = frozenset({"retry", "alerts"})
"""PATCH fields merged field by field into the stored object (the others replace the stored value)."""

WRITE_ATTEMPTS = 3
"""Read-modify-write attempts before a job that keeps changing (an every-second schedule) is a 409."""


@dataclass(kw_only=True, eq=False)
class JobService:
    """The use cases behind every route. ``clock`` returns epoch ms (UTC).

    ``idempotency`` is required only for calls that pass an ``idempotency_key``; ``target_tags`` (optional)
    refuses a lambda/sqs target whose owner tag names another owner; ``shell_owners`` (local mode with a tokens
    file) the owners that may use ``shell`` targets where the deployment allows them (None: every owner);
    ``alerts`` (optional) the alerts topic, for the ``on_cancelled`` alert of a cancel; ``counters`` the owners'
    quota usage (``api.quotas``; the job store, which adds to it in its job writes; None: no quotas).
    """

    settings: Settings
    jobs: JobRepository
    runs: RunHistory
    queue: RunSender
    clock: Clock
    idempotency: IdempotencyKeys | None = None
    target_tags: TargetTags | None = None
    partition_marks: PartitionMarks | None = None
    shell_owners: frozenset[str] | None = None
    alerts: AlertSink | None = None
    counters: QuotaCounters | None = None

    def __post_init__(self) -> None:
        self.audit = AuditTrail(self.jobs, self.settings.retention_days)
        self.backfiller = Backfiller(self.settings, self.runs, self.queue, self.audit, self.clock)
        self.run_listing = RunListing(self.jobs, self.runs, self.clock)
        self.quotas = Quotas(self.settings.quotas, self.counters, self.clock)
        self._partitions_marked = False

    @property
    def owned(self) -> OwnedJobs:
        """The owners' jobs and idempotency keys, on the service's current adapters."""
        return OwnedJobs(self.jobs, self.idempotency)

    @property
    def chains(self) -> ChainLinks:
        """Chains of the owners' jobs (``ChainLinks``: ``after`` checks, the chain view, paused dependents)."""
        return ChainLinks(self.owned)

    @property
    def triggers(self) -> Triggers:
        """Manual runs (``Triggers``), on the service's current adapters."""
        return Triggers(self.settings, self.owned, self.runs, self.queue, self.audit, self.clock)

    @property
    def cancels(self) -> Cancels:
        """Cancels of one run (``Cancels``), on the service's current adapters; ``alerts``: the job's alerts."""
        kept, beat = self.settings.retention_days, self.settings.heartbeat_interval_s
        return Cancels(self.jobs, self.runs, self.audit, self.clock, beat, kept, self.alerts)

    @property
    def reruns(self) -> Reruns:
        """Reads and re-runs of one run (``Reruns``), on the service's current adapters."""
        return Reruns(self.settings, self.owned, self.runs, self.queue, self.audit, self.clock)

    # --- create -------------------------------------------------------------------------------

    def create_job(
        self,
        owner: str,
        request: JobCreate,
        *,
        idempotency_key: str | None = None,
        actor: str | None = None,
    ) -> CreateResult:
        """Register a job for ``owner``, made by ``actor`` (default: the owner; recorded as ``updated_by`` and in
        the job's ``created`` event).

        Returns ``CreateResult(job, created=True)``, or ``created=False`` with the owner's existing job of
        that name when its spec is identical. With ``idempotency_key`` a repeat returns the first result
        (``replayed=True``). Raises ``InvalidInput``/``ScheduleError`` (400), ``NameConflict`` (409),
        ``QuotaExceeded`` (``Quotas.for_create``), ``ConcurrentChange`` (409: the name was taken and released
        meanwhile; retry), and the idempotency errors of ``IdempotencyKeys.run``.
        """
        actor = actor or owner
        if idempotency_key is None:
            return self._create(owner, request, actor)
        outcome = self.owned.keys().run(
            owner,
            idempotency_key,
            # every field, defaults included: bodies giving a default or leaving it out are one request, as the
            # repeat without a key (``Job.spec_fingerprint``) takes them
            {"op": "create_job", "body": request.model_dump(mode="json")},
            lambda: self._create_record(owner, request, actor),
            # a create identified by the fields given, as records of an earlier release are (kept 24 h): they
            # still replay an identical retry (design, Upgrades in flight)
            formerly={"op": "create_job", "body": request.model_dump(mode="json", exclude_unset=True)},
        )
        return CreateResult(
            job=Job.model_validate(outcome.result["job"]),
            created=bool(outcome.result["created"]),
            replayed=outcome.replayed,
        )

    def _create_record(self, owner: str, request: JobCreate, actor: str) -> dict[str, Any]:
        result = self._create(owner, request, actor)
        return {"job": result.job.model_dump(mode="json"), "created": result.created}

    def _create(self, owner: str, request: JobCreate, actor: str) -> CreateResult:
        now_ms = self.clock()
        now = from_ms(now_ms)
        self._check_settings(request, owner)
        request = self.chains.resolve(owner, request)
        job = Job.model_validate(
            {
                **request.model_dump(),
                "id": registration.new_job_id(),
                "owner": owner,
                "created_at": now,
                "updated_at": now,
                "updated_by": actor,
                **(paused_fields(actor, now_ms, None) if request.paused else {}),
            }
        )
        state = registration.register(
            job, settings=self.settings, now_ms=now_ms, schedule=self._validated_schedule(job, now_ms)
        )
        next_run_at_ms = state.next_run_at
        job = job.model_copy(update={"next_run_at": maybe_from_ms(next_run_at_ms)})
        try:
            job, usage = self.quotas.for_create(owner, job)  # design §4.11
        except QuotaExceeded:  # a repeat of an existing job's create is answered as without quotas
            if (holder := self.jobs.job_id_by_name(owner, job.name)) is None:
                raise
            return self._existing_by_name(owner, job, holder)
        self._mark_partitions()
        try:
            self.jobs.create(
                job, state, self.audit.change(job.id, now_ms, 1, JobEventKind.CREATED, actor), usage
            )
        except NameTaken as taken:
            return self._existing_by_name(owner, job, taken.job_id)
        except Conflict as conflict:
            raise ConcurrentChange(f"{conflict}; retry the request") from conflict
        logger.info(
            "job created", job_id=job.id, owner=owner, schedule=job.schedule, next_run_at=next_run_at_ms
        )
        return CreateResult(job=job, created=True)

    def _existing_by_name(self, owner: str, wanted: Job, job_id: str) -> CreateResult:
        """A create hit a taken name: the same spec is a repeat (200), a different one a conflict (409)."""
        try:
            existing = self.get_job(owner, job_id)
        except JobNotFound:
            raise ConcurrentChange(
                f"the name {wanted.name!r} was being released by another request; retry"
            ) from None
        if existing.spec_fingerprint() != wanted.spec_fingerprint():
            raise NameConflict(wanted.name, existing.id)
        return CreateResult(job=existing, created=False)

    # --- read ---------------------------------------------------------------------------------

    def get_job(self, owner: str, job_id: str) -> Job:
        """The owner's job ``job_id``. Raises ``JobNotFound`` (absent, malformed id, or another owner's)."""
        return self.owned.load(owner, job_id).job

    def list_jobs(
        self, owner: str, *, limit: int = 50, cursor: str | None = None, labels: Sequence[str] | None = None
    ) -> Page[Job]:
        """``job_listing.list_jobs``: a page of the owner's jobs ordered by name, carrying every label of the
        selector ``labels`` (``key=value`` terms). Raises ``InvalidInput`` naming ``label`` or ``cursor``, or
        ``CursorNotFound``."""
        return job_listing.list_jobs(self.jobs, owner, limit=limit, cursor=cursor, labels=labels)

    def list_runs(
        self,
        owner: str,
        job_id: str,
        *,
        status: RunStatus | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> Page[Run]:
        """``RunListing.for_job``: a page of the job's runs, newest first. Raises ``JobNotFound``,
        ``InvalidInput``/``CursorNotFound`` (a cursor not of this job's run listing)."""
        if not is_job_id(job_id):
            raise JobNotFound(job_id)
        return self.run_listing.for_job(owner, job_id, status=status, limit=limit, cursor=cursor)

    def list_fires(self, owner: str, job_id: str, count: int) -> Fires:
        """The job's next ``count`` fires (1-100) as the scheduler will dispatch them (``domain.fires``), with
        daylight-saving notes; empty with a reason when paused or ended. Raises ``JobNotFound``."""
        stored = self.owned.load(owner, job_id)
        if stored.state is None:
            return Fires(items=[], reason="the job has no scheduling state yet")
        return fires.listing(stored.state, count, self.clock())

    # --- change -------------------------------------------------------------------------------

    def update_job(self, owner: str, job_id: str, patch: JobPatch, *, actor: str | None = None) -> Job:
        """Apply ``patch`` (fields present replace the stored ones; ``retry`` and ``alerts`` merge field by field), made by
        ``actor`` (default: the owner), recorded with the names of the fields given (an ``updated`` event, or
        ``paused``/``resumed`` when it changes ``paused``, which also sets or clears ``paused_by``/``paused_at``/
        ``paused_reason``).

        When a timing field (schedule, timezone, start_at, end_at) is given, ``next_run_at`` is recomputed
        with the new settings (see ``timing.retimed_since_ms``): future fires from now on (design §4.4), while
        fires still pending are kept when the new settings fire when the old ones did; a fire of a schedule
        not in force when it fell due never runs; a first fire at the PATCH's own millisecond that a manual run
        already holds (a trigger in the same millisecond) gives way to the next one. A PATCH resuming the job (``paused`` false) continues with the
        first fire after now (``timing.resumed_next_run_at``). Otherwise ``next_run_at`` is kept, so a pending
        catch-up is not lost by editing ``input``. The stored fencing ``term`` is kept. Raises
        ``JobNotFound``, ``InvalidInput`` or ``ScheduleError`` (400), ``ConcurrentChange`` (409, the job kept
        changing).
        """
        changes = patch.model_dump(exclude_unset=True)
        for field in sorted(NON_NULLABLE_PATCH_FIELDS & changes.keys()):
            if changes[field] is None:
                raise InvalidInput(field, f"{field} cannot be null; omit it to keep the current value")
        if not changes:
            return self.get_job(owner, job_id)
        retimed = bool(
            (timing.TIMING_FIELDS | {"after"}) & changes.keys()
        )  # after: no schedule (design §2.1)

        def change(current: Job, state: SchedulingState | None, now_ms: int) -> tuple[Job, int, int | None]:
            merged = current.model_dump(include=set(JobSettings.model_fields))
            merged.update(timing.swapped_source(changes))
            for field, value in changes.items():
                if field in MERGED_PATCH_FIELDS and isinstance(value, dict):
                    merged[field] = {**merged[field], **value}
                else:
                    merged[field] = value
            try:
                settings = JobSettings.model_validate(merged)
            except ValidationError as error:
                raise validation_problem(error) from error
            self._check_settings(settings, owner)
            resumed = current.paused and not settings.paused
            linked = self.chains.edited(owner, settings, job_id, recheck=resumed or "after" in changes)
            job = current.model_copy(update=dict(linked))
            if settings.paused != current.paused:
                job = job.model_copy(
                    update=paused_fields(actor or owner, now_ms, None, paused=settings.paused)
                )
            if retimed:
                schedule = self._validated_schedule(job, now_ms, changed=frozenset(changes))
                since_ms = timing.retimed_since_ms(
                    timing.settings_schedule(job),
                    timing.stored_schedule(state),
                    state.next_run_at if state else None,
                    now_ms,
                    created_ms=to_ms(job.created_at),
                )
                if resumed:  # fires of the paused time are not run (design §4.4): only those after the resume
                    since_ms = now_ms + 1
                first = registration.first_fire_ms(job, since_ms, schedule=schedule)
                if first == now_ms and self.runs.get(job_id, now_ms) is not None:
                    # a manual run holds this instant (``Triggers.trigger`` took it before this PATCH): a fire
                    # there would share its run key and never run on its own (design §2)
                    first = registration.first_fire_ms(job, now_ms + 1, schedule=schedule)
                return job, registration.anchor_ms(job), first
            if resumed:
                return job, timing.stored_anchor_ms(state, current), timing.resumed_next_run_at(state, now_ms)
            return job, timing.stored_anchor_ms(state, current), state.next_run_at if state else None

        return self._rewrite(
            owner, job_id, change, actor=actor, kind=JobEventKind.UPDATED, detail={"fields": sorted(changes)}
        )

    def pause_job(
        self, owner: str, job_id: str, *, reason: str | None = None, actor: str | None = None
    ) -> Job:
        """Take the job out of the due index (``paused`` true, ``next_run_at`` kept), recording ``paused_by``
        (``actor``, default the owner), ``paused_at`` and ``reason``. Idempotent: a paused job is returned as it
        is (its first pause's reason stands).

        Raises ``JobNotFound``, ``ConcurrentChange``.
        """
        return self._set_paused(owner, job_id, paused=True, reason=reason, actor=actor or owner)

    def resume_job(self, owner: str, job_id: str, *, actor: str | None = None) -> Job:
        """Return the job to the due index at the first fire after the resume instant
        (``timing.resumed_next_run_at``): the fires that fell while it was paused are neither run nor recorded
        missed (design §4.4; ``backfill`` runs them on purpose). The pause's who/when/why are cleared (the events
        keep them). Idempotent.

        Raises ``JobNotFound``, ``ConcurrentChange``, ``UpstreamNotFound`` (404: its upstream was deleted).
        """
        return self._set_paused(owner, job_id, paused=False, reason=None, actor=actor or owner)

    def _set_paused(self, owner: str, job_id: str, *, paused: bool, reason: str | None, actor: str) -> Job:
        def change(current: Job, state: SchedulingState | None, now_ms: int) -> tuple[Job, int, int | None]:
            job = current.model_copy(update=paused_fields(actor, now_ms, reason, paused=paused))
            next_run_at = state.next_run_at if state else None
            if not paused:
                self.chains.resolve(owner, current, job_id)  # a resumed job's upstream must be live
                next_run_at = timing.resumed_next_run_at(state, now_ms)
            return job, timing.stored_anchor_ms(state, current), next_run_at

        kind = JobEventKind.PAUSED if paused else JobEventKind.RESUMED
        detail = {"reason": reason} if reason else {}
        return self._rewrite(
            owner, job_id, change, actor=actor, kind=kind, detail=detail, skip_if_paused=paused
        )

    def _rewrite(
        self,
        owner: str,
        job_id: str,
        change: Callable[[Job, SchedulingState | None, int], tuple[Job, int, int | None]],
        *,
        actor: str | None,
        kind: JobEventKind,
        detail: dict[str, Any],
        skip_if_paused: bool | None = None,
    ) -> Job:
        """Read, change and conditionally write a job, retrying when a scheduler or another edit got between.

        ``change(current, its scheduling state, now_ms)`` returns ``(job, anchor_at ms, next_run_at ms or None)``;
        the job is stamped ``updated_by`` ``actor`` (default: the owner) and the event ``kind`` with ``detail``
        is recorded in the same write.
        ``skip_if_paused``: when set, a job whose ``paused`` already equals it is returned unchanged (pause and
        resume are idempotent).
        """
        for attempt in range(1, WRITE_ATTEMPTS + 1):
            stored = self.owned.load(owner, job_id)
            current, state = stored.job, stored.state
            if skip_if_paused is not None and current.paused == skip_if_paused:
                return current
            now_ms = self.clock()
            job, anchor_ms, next_run_at_ms = change(current, state, now_ms)
            job, usage = self.quotas.for_change(owner, current, job)  # design §4.11
            event_kind = kind
            if kind is JobEventKind.UPDATED and job.paused != current.paused:  # a PATCH of `paused`
                event_kind = JobEventKind.PAUSED if job.paused else JobEventKind.RESUMED
            stored_updated_ms = to_ms(current.updated_at)
            updated_ms = max(now_ms, stored_updated_ms + 1)
            job = job.model_copy(
                update={
                    "updated_at": from_ms(updated_ms),
                    "updated_by": actor or owner,
                    "next_run_at": maybe_from_ms(next_run_at_ms),
                }
            )
            term = state.term if state else 0
            partition = (
                state.partition
                if state
                else registration.partition_of(job_id, self.settings.scheduler_partitions)
            )
            stored_next = state.next_run_at if state else None
            on_time_from = (
                timing.kept_on_time_from(state, job, now_ms)
                if next_run_at_ms == stored_next
                else registration.on_time_from_ms(job, next_run_at_ms, now_ms)
            )
            version = (state.version or 0) + 1 if state else 1
            new_state = registration.scheduling_state(
                job,
                anchor_at_ms=anchor_ms,
                next_run_at_ms=next_run_at_ms,
                partition=partition,
                settings=self.settings,
                now_ms=now_ms,
                term=term,
                version=version,
                on_time_from=on_time_from,
            )
            event = self.audit.change(job_id, updated_ms, version, event_kind, actor or owner, detail)
            self._mark_partitions()  # the rewrite files the job's due entry under this deployment's counts
            try:
                self.jobs.replace(
                    Rewrite(
                        job,
                        new_state,
                        stored_updated_ms,
                        (stored_next, term),
                        event,
                        usage,
                        relink(current, job),
                        current.quota_rate,
                    )
                )
            except Conflict:
                logger.info("job changed during an edit; retrying", job_id=job_id, attempt=attempt)
                continue
            logger.info(
                f"job {event_kind.value}",
                job_id=job_id,
                owner=owner,
                next_run_at=next_run_at_ms,
                paused=job.paused,
            )
            return job
        raise ConcurrentChange(f"job {job_id} kept changing while being edited; retry the request")

    def delete_job(self, owner: str, job_id: str, *, actor: str | None = None) -> None:
        """``Deletes.delete`` (a ``deleted`` event by ``actor``, default the owner), then the job's dependents are
        paused (``ChainLinks.pause_dependents``). Raises ``JobNotFound``, ``ConcurrentChange``."""
        kept = self.settings.retention_days
        deletes = Deletes(self.owned, self.jobs, self.audit, self.quotas, self.clock, kept)
        deleted = deletes.delete(owner, job_id, actor or owner)
        self.chains.pause_dependents(
            deleted, lambda o, j, r: self.pause_job(o, j, reason=r, actor="jobsched")
        )

    # --- trigger ------------------------------------------------------------------------------

    def trigger_job(
        self,
        owner: str,
        job_id: str,
        *,
        idempotency_key: str | None = None,
        actor: str | None = None,
    ) -> TriggerResult:
        """One manual run of the job now by ``actor`` (default: the owner), see ``Triggers.trigger``. With
        ``idempotency_key`` a repeat returns the first run: the stored result while the key's record lasts, and in
        any case the run the key created. Raises ``JobNotFound``, ``ConcurrentChange`` (no free slot),
        ``QuotaExceeded`` (``Quotas.counted``), and the idempotency errors of ``IdempotencyKeys.run``."""
        by = actor or owner

        def trigger() -> Run:
            return self.quotas.counted(
                owner, lambda: self.triggers.trigger(owner, job_id, by, idempotency_key)
            )

        if idempotency_key is None:
            return TriggerResult(run=trigger())
        outcome = self.owned.keys().run(
            owner,
            idempotency_key,
            {"op": "trigger_job", "job_id": job_id},
            lambda: {"run": trigger().model_dump(mode="json")},
        )
        return TriggerResult(run=Run.model_validate(outcome.result["run"]), replayed=outcome.replayed)

    def backfill(
        self,
        owner: str,
        job_id: str,
        request: BackfillRequest,
        *,
        idempotency_key: str | None = None,
        actor: str | None = None,
    ) -> tuple[BackfillResult, bool]:
        """Run the job's past fires in ``[start, end)`` that have no run yet (``Backfiller.backfill``), paused jobs
        too; returns the result and whether it is the stored one of an earlier request with the same key.
        Raises ``JobNotFound``, ``InvalidInput`` naming ``end``, ``QuotaExceeded`` (``Quotas.counted``), and the
        idempotency errors of ``IdempotencyKeys.run``."""
        by = actor or owner

        def backfill() -> BackfillResult:
            return self.quotas.counted(
                owner, lambda: self.backfiller.backfill(self.owned.load(owner, job_id), request, by)
            )

        if idempotency_key is None:
            return backfill(), False
        outcome = self.owned.keys().run(
            owner,
            idempotency_key,
            {"op": "backfill", "job_id": job_id, "body": request.model_dump(mode="json")},
            lambda: backfill().model_dump(mode="json"),
        )
        return BackfillResult.model_validate(outcome.result), outcome.replayed

    # --- events -------------------------------------------------------------------------------

    def list_events(
        self, owner: str, job_id: str, *, limit: int = 50, cursor: str | None = None
    ) -> Page[JobEvent]:
        """``AuditTrail.listing``: a page of the job's audit events, newest first. Raises ``JobNotFound``,
        ``InvalidInput``/``CursorNotFound`` (a cursor not of this listing)."""
        if not is_job_id(job_id):
            raise JobNotFound(job_id)
        return self.audit.listing(owner, job_id, limit=limit, cursor=cursor)

    # --- helpers ------------------------------------------------------------------------------

    def _check_settings(self, job: JobSettings, owner: str) -> None:
        """``job_checks.check_settings`` with this service's deployment settings, target tags and shell owners."""
        check_settings(
            job, owner, self.settings, target_tags=self.target_tags, shell_owners=self.shell_owners
        )

    def _mark_partitions(self) -> None:
        """Before the first job this process files in the due index (a create, or any rewrite: an edit, a pause
        or a resume files the job's entry under this deployment's ``due_shards``): record the partition count and
        the due shards in the high-water marks the schedulers read (``ControlStore.raise_partition_high_water``,
        ``raise_shard_high_water``), so a job filed by an API already on a higher count than the schedulers
        (mid-deploy, or a rolled-back update) is never stranded. 2 requests per process."""
        if self.partition_marks is not None and not self._partitions_marked:
            self.partition_marks.raise_partition_high_water(self.settings.scheduler_partitions)
            self.partition_marks.raise_shard_high_water(self.settings.due_shards)
            self._partitions_marked = True

    def _validated_schedule(
        self, job: Job, now_ms: int, *, changed: frozenset[str] = frozenset()
    ) -> Schedule | None:
        """``timing.validated_schedule`` with this deployment's ``min_interval_s``."""
        return timing.validated_schedule(job, now_ms, self.settings.min_interval_s, changed=changed)
