"""The run state machine's table (``jobsched.domain.run_states.TRANSITIONS``) at work: a transition with its
parameters (:class:`Step`, made from the run port's requests by the ``*_step`` functions), the evaluator that
applies a step to a ``RunRow`` (:func:`apply`, :func:`outcome_of`: the in-memory fake's and the SQLite store's
write), and :class:`RunStateMachine`, the run port's methods as steps on a store that supplies one atomic
conditional write (:meth:`RunStateMachine.apply_step`).

A field is *absent* when it holds its empty value (:data:`EMPTY`; see ``jobsched.domain.run_states``). Instants
are epoch ms. Pure: no storage here.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, fields, replace
from typing import Any

from jobsched.domain.run_states import (
    COMPARISONS,
    TRANSITIONS,
    Absent,
    All,
    AnyOf,
    Condition,
    Const,
    Fill,
    IfGiven,
    Insert,
    NoRow,
    Param,
    PlusOne,
    Remove,
    Set,
    StatusIn,
    Stored,
    Transition,
    Value,
    written_fields,
)
from jobsched.models import RunStatus
from jobsched.ports.runs import (
    Cancel,
    Claim,
    ClaimRequest,
    DeadTransition,
    KeyedInsert,
    Owned,
    Renewal,
    Rerun,
    RerunRequest,
    RetryTransition,
    RunKey,
    RunRow,
    SweepDeferral,
)
from jobsched.ports.tries import TryRecord

# --- steps: a transition with its parameters --------------------------------------------------------------


@dataclass(frozen=True)
class Step:
    """A transition to apply to run ``key`` with ``params`` (each parameter the transition reads; None: not
    given)."""

    transition: Transition
    key: RunKey
    params: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Outcome:
    """What applying a step did: ``applied``, and the rows its transition ``answers`` with (``before``: the row as
    the transition found it, None when there was none; ``after``: as written, or as stored when refused)."""

    applied: bool
    before: RunRow | None = None
    after: RunRow | None = None


def _step(name: str, key: RunKey, **params: Any) -> Step:
    transition = TRANSITIONS[name]
    missing = set(transition.params()) - set(params)
    if missing:
        raise ValueError(f"{name}: parameters {sorted(missing)} not given")
    return Step(transition, RunKey(*key), params)


def _claimed_step(name: str, owned: Owned, **params: Any) -> Step:
    """``name`` of the claim ``owned``: at its key, fenced on its attempt, worker and seen heartbeat."""
    return _step(
        name,
        owned.key,
        claim_attempt=owned.attempt,
        claim_worker=owned.worker,
        seen_heartbeat=owned.heartbeat_at,
        **params,
    )


def _try_end_step(name: str, owned: Owned, change: RetryTransition | DeadTransition, **params: Any) -> Step:
    """``name`` of the claim ``owned``, ending its try with ``change``'s error and tries (and the run's owner)."""
    return _claimed_step(name, owned, error=change.error, owner=owned.owner, tries=change.tries, **params)


def insert_step(row: RunRow) -> Step:
    """``insert`` of ``row`` at its key."""
    return _step("insert", row.key, row=row)


def claim_step(request: ClaimRequest) -> Step:
    """``claim`` as :class:`jobsched.ports.runs.ClaimRequest` tells (``late``: the first try's lateness)."""
    return _step(
        "claim",
        request.key,
        create=request.create,
        due=request.retry_due_by_ms,
        stale_before=request.stale_before_ms,
        worker=request.worker,
        now=request.now_ms,
        late=request.now_ms - request.key.scheduled_for,
        queued_by=request.queued_by_ms,
    )


def heartbeat_step(owned: Owned, *, now_ms: int) -> Step:
    """``heartbeat`` of the claim ``owned`` at ``now_ms``."""
    return _claimed_step("heartbeat", owned, now=now_ms)


def succeed_step(
    owned: Owned, *, now_ms: int, tries: tuple[TryRecord, ...] | None, chain_sweep_at_ms: int | None = None
) -> Step:
    """``succeed`` of the claim ``owned`` at ``now_ms``; ``tries`` replace the stored ones (None: kept);
    ``chain_sweep_at_ms`` keeps the run in the sweep index until then (None: it leaves it)."""
    return _claimed_step("succeed", owned, now=now_ms, tries=tries, chain_sweep_at=chain_sweep_at_ms)


def retry_step(owned: Owned, change: RetryTransition) -> Step:
    """``retry`` of the claim ``owned`` as ``change`` tells."""
    return _try_end_step("retry", owned, change, retry_at=change.retry_at_ms, sweep_at=change.sweep_at_ms)


def dead_step(owned: Owned, change: DeadTransition) -> Step:
    """``dead`` of the claim ``owned`` as ``change`` tells."""
    return _try_end_step(
        "dead",
        owned,
        change,
        now=change.now_ms,
        final_attempt=change.final_attempt,
        notify_at=change.notify_at_ms,
    )


def skip_step(owned: Owned, *, now_ms: int, reason: str) -> Step:
    """``skip`` of the claim ``owned`` at ``now_ms`` with ``reason`` as its error."""
    return _claimed_step("skip", owned, reason=reason, now=now_ms, owner=owned.owner)


def give_back_step(owned: Owned, *, before: RunRow) -> Step:
    """``give_back`` of the claim ``owned``: the row back to ``before`` (as the claim found it)."""
    return _claimed_step(
        "give_back",
        owned,
        before_status=before.status,
        before_attempt=before.attempt,
        before_worker=before.worker,
        before_started_at=before.started_at,
        before_heartbeat_at=before.heartbeat_at,
        before_retry_at=before.retry_at,
        before_lateness_ms=before.lateness_ms,
        before_owner=before.owner,
    )


def cancel_step(key: RunKey, *, now_ms: int, by: str, reason: str | None) -> Step:
    """``cancel`` of run ``key`` at ``now_ms`` by ``by`` (a principal), with ``reason`` (None: none given)."""
    return _step("cancel", key, now=now_ms, by=by, reason=reason)


def stopped_step(owned: Owned, *, tries: tuple[TryRecord, ...]) -> Step:
    """``stopped`` of the claim ``owned``, whose run was cancelled: its tries become ``tries``."""
    return _step("stopped", owned.key, claim_attempt=owned.attempt, claim_worker=owned.worker, tries=tries)


def watch_step(owned: Owned, *, sweep_at_ms: int) -> Step:
    """``watch`` of the claim ``owned``: into the sweep index at ``sweep_at_ms``."""
    return _claimed_step("watch", owned, sweep_at=sweep_at_ms)


def notified_step(job_id: str, scheduled_for_ms: int) -> Step:
    """``notified`` of run ``(job_id, scheduled_for_ms)``."""
    return _step("notified", RunKey(job_id, scheduled_for_ms))


def defer_sweep_step(deferral: SweepDeferral) -> Step:
    """``defer_sweep`` as ``deferral`` tells."""
    return _step(
        "defer_sweep",
        deferral.key,
        seen_status=RunStatus(deferral.status),
        seen_sweep_at=deferral.seen_sweep_at,
        sweep_at=deferral.sweep_at_ms,
        sweeps=deferral.sweeps,
    )


def clear_sweep_step(job_id: str, scheduled_for_ms: int) -> Step:
    """``clear_sweep`` of run ``(job_id, scheduled_for_ms)``."""
    return _step("clear_sweep", RunKey(job_id, scheduled_for_ms))


def rerun_step(request: RerunRequest) -> Step:
    """``rerun`` as ``request`` tells."""
    return _step(
        "rerun",
        request.key,
        key_digest=request.key_digest,
        now=request.now_ms,
        sweep_at=request.sweep_at_ms,
        expires_at=request.expires_at_s,
        summary=True if request.summary else None,
    )


# --- the evaluator -------------------------------------------------------------------------------------------

EMPTY: dict[str, Any] = {
    f.name: f.default for f in fields(RunRow) if f.name not in ("job_id", "scheduled_for")
}
EMPTY.update(sweeps=0, reruns=0, notify_pending=False, tries=())
EMPTY.update({name: None for name in ("status", "kind", "attempt")})
"""Each ``RunRow`` field's absent value (None for status, kind and attempt: never absent on a stored row)."""

FIELDS = tuple(name for name in EMPTY)
"""The ``RunRow`` fields a transition can name (every field but the key)."""


def absent(row: RunRow, name: str) -> bool:
    """Whether ``row``'s field ``name`` is absent (its empty value; see the module docstring)."""
    value = getattr(row, name)
    return value is None or (value == EMPTY[name] and EMPTY[name] is not None)


def holds(condition: Condition | None, row: RunRow | None, params: Mapping[str, Any]) -> bool:
    """Whether ``condition`` (resolved: no :class:`IfGiven`; None holds) holds on ``row`` (None: no row)."""
    if condition is None:
        return True
    if isinstance(condition, NoRow):
        return row is None
    if isinstance(condition, All):
        return all(holds(part, row, params) for part in condition.parts)
    if isinstance(condition, AnyOf):
        return any(holds(part, row, params) for part in condition.parts)
    if row is None:
        return False
    if isinstance(condition, StatusIn):
        return row.status in condition.statuses
    if isinstance(condition, Absent):
        return absent(row, condition.field)
    if isinstance(condition, IfGiven):
        raise ValueError("resolve the condition first")
    stored, wanted = getattr(row, condition.field), params[condition.param]
    if absent(row, condition.field) or wanted is None:
        return False
    return bool(COMPARISONS[condition.op](stored, wanted))


def is_satisfied(step: Step, row: RunRow | None) -> bool:
    """Whether ``step``'s condition holds on ``row`` (None: no row; a resolved-away condition on an absent row
    does not hold: only :class:`NoRow` admits one)."""
    condition = step.transition.resolved(step.params)
    if row is None and condition is None:
        return False
    if condition is None:
        return True
    return holds(condition, row, step.params)


def value_of(value: Value, row: RunRow | None, params: Mapping[str, Any]) -> Any:
    """``value`` on ``row`` (None: a new row, every field absent)."""
    if isinstance(value, Param):
        return params[value.name]
    if isinstance(value, Const):
        return value.value
    if isinstance(value, PlusOne):
        return (0 if row is None or absent(row, value.field) else getattr(row, value.field)) + 1
    if isinstance(value, Stored):
        return None if row is None else getattr(row, value.field)
    if row is None or absent(row, value.field):
        return params[value.param]
    return getattr(row, value.field)


def changes(step: Step, row: RunRow | None) -> dict[str, Any]:
    """The field values ``step``'s writes give ``row`` (None: a new row), each field by name (an absent value
    where a write removes it). :class:`Insert` is not a change of fields: see :func:`apply`."""
    params, written = step.params, written_fields(step.transition)
    out: dict[str, Any] = {}
    for write in step.transition.writes:
        if isinstance(write, Set):
            value = value_of(write.value, row, params)
            if value is None and write.given_only:
                continue
            out[write.field] = EMPTY[write.field] if value is None else value
        elif isinstance(write, Remove):
            out[write.field] = EMPTY[write.field]
        elif isinstance(write, Fill):
            source = params.get(write.param)
            if source is None:
                continue
            for name in FIELDS:
                if name in write.except_fields or name in written or absent(source, name):
                    continue
                if row is None or absent(row, name):
                    out[name] = getattr(source, name)
    return out


def apply(step: Step, row: RunRow | None) -> RunRow | None:
    """The row ``step`` writes over ``row`` (None: there is none), or None when its condition does not hold."""
    if not is_satisfied(step, row):
        return None
    insert = next((w for w in step.transition.writes if isinstance(w, Insert)), None)
    if insert is not None:
        new: RunRow = step.params[insert.param]
        return new
    base = row if row is not None else RunRow(*step.key)
    return replace(base, **changes(step, row))


def outcome_of(step: Step, row: RunRow | None) -> tuple[Outcome, RunRow | None]:
    """The outcome of ``step`` on ``row`` as stored, and the row to store (None: nothing to write)."""
    written = apply(step, row)
    if written is None:
        return Outcome(False, before=row, after=row), None
    return Outcome(True, before=row, after=written), written


# --- the run port's methods as steps --------------------------------------------------------------------------


class RunStateMachine:
    """The run port's conditional writes (``RunRows``, ``SweepRows``, ``RunWriter.put_new``, ``RunHistory.rerun``)
    as steps of :data:`TRANSITIONS`, on a store that supplies :meth:`apply_step` (one atomic conditional write).
    Each method is one such write; each returns False (or the refusal's row) when the condition fails, and lets
    the store's ``jobsched.ports.errors.StoreUnavailable`` through."""

    def apply_step(self, step: Step) -> Outcome:
        """Apply ``step`` atomically: its transition's condition on the row as stored, then its writes; the
        :class:`Outcome` carries the rows its transition ``answers`` with."""
        raise NotImplementedError

    def put_new(self, row: RunRow) -> RunRow | None:
        """Insert ``row`` unless its key exists: None when created, else the existing row."""
        outcome = self.apply_step(insert_step(row))
        return None if outcome.applied else (outcome.before or row)

    def claim(self, request: ClaimRequest) -> Claim:
        """``RunRows.claim``: ``Claim(True, the row before, or create for a new row)`` or ``Claim(False, the row as
        stored, None when absent)``."""
        outcome = self.apply_step(claim_step(request))
        if outcome.applied:
            return Claim(True, outcome.before if outcome.before is not None else request.create)
        return Claim(False, outcome.before)

    def heartbeat(self, owned: Owned, *, now_ms: int) -> bool:
        return self.apply_step(heartbeat_step(owned, now_ms=now_ms)).applied

    def renew(self, owned: Owned, *, now_ms: int) -> Renewal:
        """``RunRows.renew``: the ``heartbeat`` write, answering the row as stored when refused."""
        outcome = self.apply_step(heartbeat_step(owned, now_ms=now_ms))
        return Renewal(outcome.applied, None if outcome.applied else outcome.before)

    def cancel(self, key: RunKey, *, now_ms: int, by: str, reason: str | None = None) -> Cancel:
        """``RunCancels.cancel``: ``Cancel(True, the row before)`` or ``Cancel(False, as stored, None: absent)``."""
        outcome = self.apply_step(cancel_step(key, now_ms=now_ms, by=by, reason=reason))
        return Cancel(outcome.applied, outcome.before)

    def stopped(self, owned: Owned, *, tries: tuple[TryRecord, ...]) -> bool:
        return self.apply_step(stopped_step(owned, tries=tries)).applied

    def succeed(
        self,
        owned: Owned,
        *,
        now_ms: int,
        tries: tuple[TryRecord, ...] | None = None,
        chain_sweep_at_ms: int | None = None,
    ) -> bool:
        step = succeed_step(owned, now_ms=now_ms, tries=tries, chain_sweep_at_ms=chain_sweep_at_ms)
        return self.apply_step(step).applied

    def retry(self, owned: Owned, change: RetryTransition) -> bool:
        return self.apply_step(retry_step(owned, change)).applied

    def dead(self, owned: Owned, change: DeadTransition) -> bool:
        return self.apply_step(dead_step(owned, change)).applied

    def skip(self, owned: Owned, *, now_ms: int, reason: str) -> bool:
        return self.apply_step(skip_step(owned, now_ms=now_ms, reason=reason)).applied

    def give_back(self, owned: Owned, *, before: RunRow) -> bool:
        return self.apply_step(give_back_step(owned, before=before)).applied

    def watch(self, owned: Owned, *, sweep_at_ms: int) -> bool:
        return self.apply_step(watch_step(owned, sweep_at_ms=sweep_at_ms)).applied

    def notified(self, job_id: str, scheduled_for_ms: int) -> bool:
        return self.apply_step(notified_step(job_id, scheduled_for_ms)).applied

    def defer_sweep(self, deferral: SweepDeferral) -> bool:
        return self.apply_step(defer_sweep_step(deferral)).applied

    def clear_sweep(self, job_id: str, scheduled_for_ms: int) -> bool:
        return self.apply_step(clear_sweep_step(job_id, scheduled_for_ms)).applied

    def rerun(self, request: RerunRequest) -> Rerun:
        """``RunHistory.rerun``: ``Rerun(True, the row as written)`` or ``Rerun(False, as stored, None: absent)``."""
        outcome = self.apply_step(rerun_step(request))
        return Rerun(outcome.applied, outcome.after)


class MappedRunStore(RunStateMachine):
    """:class:`RunStateMachine` on rows held in mappings: ``_rows`` (``RunKey -> RunRow``) and ``_keys``
    (``(job_id, owner, idempotency key) -> scheduled_for`` in epoch ms), each write atomic under ``_lock`` (a
    reentrant context manager: a lock, or a write transaction). The in-memory and the SQLite run stores are this
    on their own mappings; a store raises ``StoreUnavailable`` from its mappings when it cannot answer."""

    _rows: MutableMapping[RunKey, RunRow]
    _keys: MutableMapping[tuple[str, str, str], int]
    _lock: AbstractContextManager[Any]

    def apply_step(self, step: Step) -> Outcome:
        """``RunStateMachine.apply_step``: the step's transition evaluated on the stored row, under the lock."""
        with self._lock:
            outcome, written = outcome_of(step, self._rows.get(step.key))
            if written is not None:
                self._rows[step.key] = written
            return outcome

    def put_new_keyed(self, row: RunRow, *, owner: str, idempotency_key: str) -> KeyedInsert:
        """Insert ``row`` and bind ``owner``'s ``idempotency_key`` (for this job) to it, both or neither."""
        with self._lock:
            key = (row.job_id, owner, idempotency_key)
            if key in self._keys:
                return KeyedInsert(created=False, key_used=True, key_run_at=self._keys[key])
            outcome = self.apply_step(insert_step(row))
            if not outcome.applied:
                return KeyedInsert(created=False, existing=outcome.before)
            self._keys[key] = row.scheduled_for
            return KeyedInsert(created=True)
