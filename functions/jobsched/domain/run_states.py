"""The run state machine, written once: the statuses of a run row, its transitions, and for each transition the
condition it needs and what it writes, as one table of data (:data:`TRANSITIONS`).

Every run store applies these and only these: the in-memory fake and the SQLite store evaluate the table on a
``RunRow`` (``jobsched.domain.run_steps.apply``); the DynamoDB store renders each transition's
``ConditionExpression`` and ``UpdateExpression`` from it (``jobsched.dynamodb.run_expressions``).
``jobsched.domain.run_steps.RunStateMachine`` maps the run port's methods (``jobsched.ports.run_stores``:
``RunRows``, ``SweepRows``, ``RunHistory.rerun``, ``RunWriter.put_new``) to steps of the table, so each store
only supplies ``RunStateMachine.apply_step``: one atomic conditional write.
``tests/contract/test_run_state_table_contract.py`` walks every transition on every store; ``docs/protocol.md``
shows the table (``markdown_table``, checked by ``tests/unit/test_protocol_doc.py``).

A condition or a write names ``RunRow`` fields and the step's parameters (``Step.params``). A field is *absent*
when it holds its empty value (None; 0 for ``sweeps``/``reruns``; False for ``notify_pending``; () for ``tries``),
the values the DynamoDB layout leaves out of an item (``jobsched.dynamodb.layout.run_item``): an absent field fails
every comparison, as a missing attribute does in a DynamoDB condition. Instants are epoch ms.

Pure: no storage here.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from jobsched.models import RunStatus

STATUSES = tuple(RunStatus)
"""Every status a run row can be in (``jobsched.models.RunStatus``)."""

# --- conditions ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NoRow:
    """The run has no row (a transition with this clause can create one)."""


@dataclass(frozen=True)
class StatusIn:
    """The row's status is one of ``statuses``."""

    statuses: tuple[RunStatus, ...]


@dataclass(frozen=True)
class Compare:
    """The row's ``field`` is present and ``op`` the parameter ``param``: ``"="`` equal to it, ``"<="`` at most
    it, ``"<"`` below it (the operators of ``docs/protocol.md`` and of DynamoDB condition expressions alike)."""

    field: str
    op: Literal["=", "<=", "<"]
    param: str


COMPARISONS: dict[str, Callable[[Any, Any], bool]] = {"=": operator.eq, "<=": operator.le, "<": operator.lt}
"""Each :class:`Compare` operator as a function of (stored, wanted)."""


@dataclass(frozen=True)
class Absent:
    """The row's ``field`` is absent (see the module docstring)."""

    field: str


@dataclass(frozen=True)
class All:
    """Every part holds (no part: true)."""

    parts: tuple[Condition, ...]


@dataclass(frozen=True)
class AnyOf:
    """At least one part holds (no part: false)."""

    parts: tuple[Condition, ...]


@dataclass(frozen=True)
class IfGiven:
    """``condition`` is a clause of the transition only when the parameter ``param`` is given (not None); else the
    clause is left out (of an ``All``: no constraint; of an ``AnyOf``: no alternative)."""

    param: str
    condition: Condition


Condition = NoRow | StatusIn | Compare | Absent | All | AnyOf | IfGiven


def status(*statuses: RunStatus) -> StatusIn:
    """:class:`StatusIn` of ``statuses``."""
    return StatusIn(statuses)


def every(*parts: Condition) -> All:
    """:class:`All` of ``parts``."""
    return All(parts)


def either(*parts: Condition) -> AnyOf:
    """:class:`AnyOf` of ``parts``."""
    return AnyOf(parts)


# --- values and writes -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Param:
    """The parameter ``name``'s value."""

    name: str


@dataclass(frozen=True)
class Const:
    """A constant."""

    value: Any


@dataclass(frozen=True)
class PlusOne:
    """The row's ``field`` (0 when absent) plus one."""

    field: str


@dataclass(frozen=True)
class StoredOr:
    """The row's ``field`` when present, else the parameter ``param``."""

    field: str
    param: str


@dataclass(frozen=True)
class Stored:
    """The row's ``field`` as stored (a field every stored row has, e.g. ``status``)."""

    field: str


Value = Param | Const | PlusOne | StoredOr | Stored


@dataclass(frozen=True)
class Set:
    """Write ``value`` into ``field``; a value of None removes the field. ``given_only``: when the value is None,
    leave the field as stored instead."""

    field: str
    value: Value
    given_only: bool = False


@dataclass(frozen=True)
class Remove:
    """Remove ``field`` (it becomes absent)."""

    field: str


@dataclass(frozen=True)
class Fill:
    """Each field the ``RunRow`` parameter ``param`` has and the row lacks (a new row lacks all) takes that row's
    value: the fields of a row made by its claim. ``except_fields`` and the fields the transition's other writes
    name are not filled."""

    param: str
    except_fields: tuple[str, ...] = ()


@dataclass(frozen=True)
class Insert:
    """Write the ``RunRow`` parameter ``param`` whole, as the new row."""

    param: str


Write = Set | Remove | Fill | Insert


@dataclass(frozen=True)
class Transition:
    """One transition of the run state machine: applied when ``condition`` holds on the row as stored (a row
    that is absent fails every clause but :class:`NoRow`), then ``writes`` are made, all in one atomic write.

    ``answers``: which row the caller is told (``"before"``: the row as the transition found it, or as stored
    when refused; ``"after"``: the row written, or as stored when refused; None: only whether it applied).
    ``doc``: who makes it and why, one line."""

    name: str
    condition: Condition
    writes: tuple[Write, ...]
    doc: str
    answers: Literal["before", "after"] | None = None
    _params: tuple[str, ...] = field(init=False, repr=False, compare=False)
    _optional: tuple[str, ...] = field(init=False, repr=False, compare=False)
    _written: frozenset[str] = field(init=False, repr=False, compare=False)
    _resolved: dict[tuple[bool, ...], Condition | None] = field(
        init=False, repr=False, compare=False, default_factory=dict
    )

    def __post_init__(self) -> None:
        """Derive once what each step of the transition asks of it: its parameters, the parameters of its
        :class:`IfGiven` clauses and the fields its :class:`Set` and :class:`Remove` writes name."""
        found: dict[str, None] = {}
        for node in nodes(self.condition):
            if isinstance(node, Compare | IfGiven):
                found[node.param] = None
        for write in self.writes:
            if isinstance(write, Set) and isinstance(write.value, Param | StoredOr):
                found[write.value.param if isinstance(write.value, StoredOr) else write.value.name] = None
            elif isinstance(write, Fill | Insert):
                found[write.param] = None
        optional = tuple(dict.fromkeys(n.param for n in nodes(self.condition) if isinstance(n, IfGiven)))
        object.__setattr__(self, "_params", tuple(found))
        object.__setattr__(self, "_optional", optional)
        object.__setattr__(
            self, "_written", frozenset(w.field for w in self.writes if isinstance(w, Set | Remove))
        )

    def params(self) -> list[str]:
        """The names of the parameters the transition reads, in order of appearance."""
        return list(self._params)

    def resolved(self, params: Mapping[str, Any]) -> Condition | None:
        """:func:`resolve` of the transition's condition for ``params``, made once for each combination of its
        :class:`IfGiven` parameters given or not (raises ``ValueError`` as :func:`resolve` does)."""
        given = tuple(params.get(name) is not None for name in self._optional)
        if given not in self._resolved:
            self._resolved[given] = resolve(self.condition, params)
        return self._resolved[given]


def nodes(condition: Condition) -> Iterator[Condition]:
    """``condition`` and every clause inside it, depth first."""
    yield condition
    if isinstance(condition, All | AnyOf):
        for part in condition.parts:
            yield from nodes(part)
    elif isinstance(condition, IfGiven):
        yield from nodes(condition.condition)


# --- the table ---------------------------------------------------------------------------------------------

OURS = every(
    status(RunStatus.RUNNING),
    Compare("attempt", "=", "claim_attempt"),
    Compare("worker", "=", "claim_worker"),
    IfGiven("seen_heartbeat", Compare("heartbeat_at", "=", "seen_heartbeat")),
)
"""Still the claim's: running under the claim ``(attempt, worker)`` (each claim increments ``attempt``, so the
pair names one claim); with ``seen_heartbeat`` (the sweeper's), also the beat it saw, so a beat since wins."""

CLAIM_WRITES = ("worker", "attempt", "started_at", "heartbeat_at", "lateness_ms", "retry_at")
"""The fields a claim writes itself (a row its claim creates does not take them from ``create``)."""

TRANSITIONS: dict[str, Transition] = {
    t.name: t
    for t in (
        Transition(
            "insert",
            NoRow(),
            (Insert("row"),),
            "scheduler (skipped fires), API (manual runs, backfill, the cancel of a fire listed queued), worker and sweeper (chained runs): a run"
            " exists once per (job_id, scheduled_for)",
            answers="before",
        ),
        Transition(
            "claim",
            either(
                IfGiven("create", NoRow()),
                every(
                    IfGiven(
                        "queued_by", either(Absent("enqueued_at"), Compare("enqueued_at", "<=", "queued_by"))
                    ),
                    either(
                        status(RunStatus.QUEUED),
                        every(
                            status(RunStatus.RETRYING),
                            either(Absent("retry_at"), Compare("retry_at", "<=", "due")),
                        ),
                        every(status(RunStatus.RUNNING), Compare("heartbeat_at", "<", "stale_before")),
                    ),
                ),
            ),
            (
                Set("status", Const(RunStatus.RUNNING)),
                Set("worker", Param("worker")),
                Set("attempt", PlusOne("attempt")),
                Set("started_at", Param("now")),
                Set("heartbeat_at", Param("now")),
                Set("lateness_ms", StoredOr("lateness_ms", "late")),
                Remove("retry_at"),
                Fill("create", ("status", "attempt", "sweep_at", *CLAIM_WRITES)),
            ),
            "worker, sweeper (dead letters): one try; a retry once due; a lost worker's run (stale beat); a"
            " scheduled run's row made from its message; the drain's claim (queued_by) takes no row queued after"
            " its letter was sent (a later round's)",
            answers="before",
        ),
        Transition(
            "heartbeat",
            OURS,
            (Set("heartbeat_at", Param("now")),),
            "worker: the try is alive; a refusal answers the row (cancelled: the worker stops the try)",
            answers="before",
        ),
        Transition(
            "succeed",
            OURS,
            (
                Set("status", Const(RunStatus.SUCCEEDED)),
                Set("finished_at", Param("now")),
                Set("tries", Param("tries"), given_only=True),
                Set("sweep_at", Param("chain_sweep_at")),
                Remove("error"),
                Remove("retry_at"),
            ),
            "worker: the try succeeded; the run leaves the sweep index, unless its job has downstream jobs"
            " (chain_sweep_at: swept until the worker has made their runs, design §2.1)",
        ),
        Transition(
            "retry",
            OURS,
            (
                Set("status", Const(RunStatus.RETRYING)),
                Set("error", Param("error")),
                Set("retry_at", Param("retry_at")),
                Set("sweep_at", Param("sweep_at")),
                Set("owner", Param("owner"), given_only=True),
                Set("tries", Param("tries"), given_only=True),
            ),
            "worker, sweeper (lost try): the try failed, attempts are left; swept if the retry message never comes",
        ),
        Transition(
            "dead",
            OURS,
            (
                Set("status", Const(RunStatus.DEAD)),
                Set("error", Param("error")),
                Set("finished_at", Param("now")),
                Set("attempt", Param("final_attempt")),
                Set("notify_pending", Const(True)),
                Set("sweep_at", Param("notify_at")),
                Set("owner", Param("owner"), given_only=True),
                Set("tries", Param("tries"), given_only=True),
                Remove("retry_at"),
            ),
            "worker, sweeper: out of attempts; swept until its notifications are confirmed",
        ),
        Transition(
            "skip",
            OURS,
            (
                Set("status", Const(RunStatus.SKIPPED)),
                Set("error", Param("reason")),
                Set("finished_at", Param("now")),
                Set("owner", Param("owner"), given_only=True),
                Remove("sweep_at"),
                Remove("retry_at"),
            ),
            "worker, sweeper: the try will not run (job deleted, overlap held; under buffer_one, another fire waits)",
        ),
        Transition(
            "give_back",
            OURS,
            (
                Set("status", Param("before_status")),
                Set("attempt", Param("before_attempt")),
                Set("worker", Param("before_worker")),
                Set("started_at", Param("before_started_at")),
                Set("heartbeat_at", Param("before_heartbeat_at")),
                Set("retry_at", Param("before_retry_at")),
                Set("lateness_ms", Param("before_lateness_ms")),
                Set("owner", Param("before_owner"), given_only=True),
            ),
            "worker, sweeper: undo a claim whose try never started (a storage error; a wait for the overlap lock, as"
            " the fire that waits under buffer_one); the row is as the claim found it",
        ),
        Transition(
            "cancel",
            status(RunStatus.QUEUED, RunStatus.RETRYING, RunStatus.RUNNING),
            (
                Set("status", Const(RunStatus.CANCELLED)),
                Set("cancelled_from", Stored("status")),
                Set("cancelled_by", Param("by")),
                Set("cancel_reason", Param("reason"), given_only=True),
                Set("finished_at", Param("now")),
                Remove("sweep_at"),
                Remove("retry_at"),
            ),
            "API (POST .../cancel), worker (overlap: replace): an unfinished run ends; a queued or retrying run is"
            " never claimed again, a running try's next beat is refused and its worker stops it (design §5.8)",
            answers="before",
        ),
        Transition(
            "stopped",
            every(
                status(RunStatus.CANCELLED),
                Compare("attempt", "=", "claim_attempt"),
                Compare("worker", "=", "claim_worker"),
            ),
            (Set("tries", Param("tries")),),
            "worker: the try a cancel stopped is recorded in the cancelled run's tries",
        ),
        Transition(
            "watch",
            every(OURS, Absent("sweep_at")),
            (Set("sweep_at", Param("sweep_at")),),
            "worker: a duplicate delivery of a running run made by its claim puts it in the sweep index",
        ),
        Transition(
            "notified",
            status(RunStatus.DEAD),
            (Remove("notify_pending"), Remove("sweep_at")),
            "worker, sweeper: a dead run's message and alert went out; it leaves the sweep index",
        ),
        Transition(
            "defer_sweep",
            every(Compare("status", "=", "seen_status"), Compare("sweep_at", "=", "seen_sweep_at")),
            (Set("sweep_at", Param("sweep_at")), Set("sweeps", Param("sweeps"), given_only=True)),
            "sweeper: looked at the run; next look at sweep_at, unless the row changed since it read it",
        ),
        Transition(
            "clear_sweep",
            either(
                status(RunStatus.SUCCEEDED, RunStatus.SKIPPED, RunStatus.CANCELLED),
                every(status(RunStatus.DEAD), Absent("notify_pending")),
            ),
            (Remove("sweep_at"),),
            "sweeper, worker (a succeeded run once its chained runs are made): a finished run (not a dead one owing"
            " its alert) leaves the sweep index",
        ),
        Transition(
            "rerun",
            either(
                every(status(RunStatus.DEAD), Absent("notify_pending")),
                every(
                    status(RunStatus.SKIPPED),
                    either(Absent("skipped_count"), IfGiven("summary", status(RunStatus.SKIPPED))),
                ),
            ),
            (
                Set("status", Const(RunStatus.QUEUED)),
                Set("attempt", Const(0)),
                Set("reruns", PlusOne("reruns")),
                Set("rerun_key", Param("key_digest")),
                Set("enqueued_at", Param("now")),
                Set("sweep_at", Param("sweep_at")),
                Set("expires_at_s", Param("expires_at")),
                Remove("worker"),
                Remove("started_at"),
                Remove("heartbeat_at"),
                Remove("finished_at"),
                Remove("retry_at"),
                Remove("error"),
                Remove("skipped_count"),
                Remove("skipped_through"),
            ),
            "API (POST .../retry), backfill: a dead (notified) run or one skipped fire starts a new round of tries;"
            " with summary, a skipped summary row's first fire (the row then stands for it alone)",
            answers="after",
        ),
    )
}
"""The run state machine: every write a run store makes to a run row is one of these, by name."""


# --- the condition algebra ----------------------------------------------------------------------------------


def resolve(condition: Condition, params: Mapping[str, Any]) -> Condition | None:
    """``condition`` with each :class:`IfGiven` clause whose parameter is None left out (None: nothing left), and
    each :class:`All` or :class:`AnyOf` left with one part replaced by that part (so a rendering has no redundant
    parentheses, which DynamoDB refuses). An :class:`AnyOf` left with no part is refused with ``ValueError``:
    no table entry may leave a transition no alternative."""
    if isinstance(condition, IfGiven):
        return resolve(condition.condition, params) if params.get(condition.param) is not None else None
    if isinstance(condition, All | AnyOf):
        parts = tuple(p for p in (resolve(part, params) for part in condition.parts) if p is not None)
        if not parts and isinstance(condition, AnyOf):
            raise ValueError(f"no alternative of {condition} is left without its parameters")
        if len(parts) == 1:
            return parts[0]
        return type(condition)(parts) if parts else None
    return condition


def written_fields(transition: Transition) -> frozenset[str]:
    """The fields the transition's :class:`Set` and :class:`Remove` writes name."""
    return transition._written


# --- the table as text ---------------------------------------------------------------------------------------


def condition_text(condition: Condition) -> str:
    """``condition`` in the notation of ``docs/protocol.md``."""
    if isinstance(condition, NoRow):
        return "no row"
    if isinstance(condition, StatusIn):
        names = ", ".join(s.value for s in condition.statuses)
        return f"status = {names}" if len(condition.statuses) == 1 else f"status in {{{names}}}"
    if isinstance(condition, Compare):
        return f"{condition.field} {condition.op} {condition.param}"
    if isinstance(condition, Absent):
        return f"no {condition.field}"
    if isinstance(condition, IfGiven):
        return f"[{condition_text(condition.condition)}]"
    joiner = " and " if isinstance(condition, All) else " or "
    return joiner.join(
        f"({condition_text(p)})" if isinstance(p, All | AnyOf) else condition_text(p) for p in condition.parts
    )


def _value_text(value: Value) -> str:
    if isinstance(value, Param):
        return value.name
    if isinstance(value, Const):
        return value.value.value if isinstance(value.value, RunStatus) else str(value.value).lower()
    if isinstance(value, PlusOne):
        return f"{value.field} + 1"
    if isinstance(value, Stored):
        return value.field
    return f"{value.field} or {value.param}"


def writes_text(transition: Transition) -> str:
    """``transition``'s writes in the notation of ``docs/protocol.md``."""
    parts: list[str] = []
    for write in transition.writes:
        if isinstance(write, Set):
            parts.append(f"{write.field} = {_value_text(write.value)}{'?' if write.given_only else ''}")
        elif isinstance(write, Remove):
            parts.append(f"-{write.field}")
        elif isinstance(write, Fill):
            parts.append(f"fill from {write.param}")
        else:
            parts.append(f"every field from {write.param}")
    return ", ".join(parts)


def markdown_table() -> str:
    """The transition table as Markdown (``docs/protocol.md`` holds it verbatim): transition, the statuses it
    applies from, condition (``[...]``: only when that parameter is given), writes (``-f``: remove ``f``; ``f =
    p?``: only when ``p`` is given; a None parameter removes the field), and who makes it, why."""
    lines = [
        "| transition | from status | condition | writes | by whom, why |",
        "|---|---|---|---|---|",
    ]
    for t in TRANSITIONS.values():
        origins = ", ".join(s.value for s in from_statuses(t)) or "-"
        if admits_no_row(t.condition):
            origins = f"(no row), {origins}" if origins != "-" else "(no row)"
        lines.append(f"| {t.name} | {origins} | {condition_text(t.condition)} | {writes_text(t)} | {t.doc} |")
    return "\n".join(lines) + "\n"


def admits_no_row(condition: Condition) -> bool:
    """Whether ``condition`` has a :class:`NoRow` clause (its transition can create the row)."""
    return any(isinstance(node, NoRow) for node in nodes(condition))


def from_statuses(transition: Transition) -> list[RunStatus]:
    """The statuses in which ``transition`` can apply (for some parameters): the statuses its condition names
    (every status when it names none: e.g. ``defer_sweep``'s ``status = seen_status``)."""
    named = {s for node in nodes(transition.condition) if isinstance(node, StatusIn) for s in node.statuses}
    if not named and not isinstance(transition.condition, NoRow):
        return list(STATUSES)
    return [s for s in STATUSES if s in named]
