"""Item layouts of the jobs and runs tables, and the pure functions that build and read them.

Jobs table (``resources.JOBS``, keys ``pk``/``sk``), three items per job:
- spec ``pk=job#<id> sk=spec``: the owner's settings (``doc``, JSON, holds the large ``input``), ``owner``,
  ``name`` (the ``by_owner`` index), ``created_at``/``updated_at`` (epoch ms), ``labels`` (a map of strings,
  absent when the job has none: a top-level attribute so a listing filters on it, ``labels.#key = :value``);
  and on a job with ``after`` its
  upstream's id ``after_job`` (the sparse ``by_upstream`` index: a job's downstream jobs, design §2.1).
- scheduling state ``pk=job#<id> sk=sched``: small and hot; what the scheduler reads and moves every run:
  ``next_run_at`` (epoch ms, nominal fire), ``due_at`` with ``timer_pk``/``timer_sk`` (the keys of its current
  timer item; present only while the job is active; ``due_pk``/``due_at``, the sparse ``due`` GSI's keys, on
  items of the GSI layout: design, Upgrades in flight), ``term`` (fencing token of the last scheduler that moved
  it), schedule fields.
- timer items ``pk=due#p<partition>#b<bucket>#s<shard>#<lane> sk=<position>#<job_id>#<due_at>#<version>``: the
  due index (``ports.jobs.DueEntry``), one per entry ever written, never deleted (they expire by TTL,
  ``expires_at``, free of write units): a job's move writes its scheduling item and its next timer, 2 units,
  where the GSI's entry cost 3 (the item, and the index entry's delete and put). Read strongly consistent.
  Keeping it apart from the spec makes the per-run write cost independent of the size of ``input``.
- name lock ``pk=name#<owner>#<name> sk=name``: makes ``name`` unique per owner (conditional write).
- overlap lock ``pk=job#<id> sk=running`` (only ``overlap: skip``, ``buffer_one`` and ``replace`` jobs, only while a
  try runs or a fire waits): the run holding it, refreshed by its heartbeats (``JobStore.acquire_overlap``), and under
  ``buffer_one`` the fire that waits for it (``buffered``).

Audit events (design §3.2) ``pk=events#<job id> sk=<at, 13 digits>#<key>``, newest last: ``kind``, ``actor``,
``at`` (epoch ms), ``detail`` (JSON), ``expires_at`` (epoch s, the TTL: kept as long as run history). Under a
partition key of their own, so reading a job (one query of ``job#<id>``) never reads its history.

A deleted job leaves one item: its tombstone, in the spec item's place (``pk=job#<id> sk=spec``), so the
owner can still read the job's run history (design §2: a deleted job's tombstone). It holds
``job_id``, ``deleted_owner``, ``deleted_name``, ``deleted_at`` (epoch ms) and ``expires_at`` (epoch s, the
jobs table's TTL attribute: deletion + retention, when the last run row has expired too); no ``doc`` (so
nothing runs it) and no ``owner``/``name`` (so it is not in the ``by_owner`` index).

Runs table (``resources.RUNS``): ``job_id`` + ``scheduled_for`` (epoch ms) is the key, so the pair is unique.
Unfinished runs carry ``sweep_pk``/``sweep_at`` (the sparse sweeper index); failing runs of a known owner carry
``fail_owner`` (the sparse ``failures`` index: the owner's failed runs across their jobs). ``expires_at`` (epoch s) is the TTL.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from jobsched.clock import from_ms, to_ms
from jobsched.domain.quotas import stored_count
from jobsched.domain.runs import sweep_shard
from jobsched.models import Job, JobEventKind, JobSettings, MissedPolicy, Priority, RunKind, RunStatus
from jobsched.ports.jobs import (
    DEFAULT_CATCH_UP_WINDOW_S,
    DEFAULT_MISFIRE_GRACE_S,
    INDEX,
    TIMER_LANES,
    AuditEvent,
    DueEntry,
    SchedulingState,
    hinted_priority,
)
from jobsched.ports.runs import FAILURE_STATUSES, RunRow
from jobsched.ports.tries import TryRecord

SPEC_SK = "spec"
SCHED_SK = "sched"
RUNNING_SK = "running"
"""Sort key of a job's overlap lock (``JobStore.acquire_overlap``), held while a try of an ``overlap: skip``,
``buffer_one`` or ``replace`` job runs."""


def job_pk(job_id: str) -> str:
    return f"job#{job_id}"


def job_id_of(pk: str) -> str:
    """The job id of a job item's partition key (``job#<id>``, :func:`job_pk`)."""
    return pk.removeprefix("job#")


def label_filter(labels: Mapping[str, str]) -> dict[str, Any]:
    """The query arguments (``FilterExpression`` and its names and values) that keep the spec items whose
    ``labels`` map holds every ``key: value`` of ``labels`` (keys as names: they may hold ``.`` and ``/``)."""
    terms = sorted(labels.items())
    return {
        "FilterExpression": " AND ".join(f"#labels.#l{i} = :l{i}" for i in range(len(terms))),
        "ExpressionAttributeNames": {"#labels": "labels", **{f"#l{i}": k for i, (k, _) in enumerate(terms)}},
        "ExpressionAttributeValues": {f":l{i}": v for i, (_, v) in enumerate(terms)},
    }


def name_key(owner: str, name: str) -> dict[str, str]:
    """Key of the item that makes ``name`` unique per owner."""
    return {"pk": f"name#{owner}#{name}", "sk": "name"}


def due_pk(partition: int, bucket: int, shard: int) -> str:
    """Partition key of the due index: ``p<partition>#b<bucket>#s<shard>``; bucket = due_at // bucket width."""
    return f"p{partition}#b{bucket}#s{shard}"


def parse_due_pk(value: str) -> tuple[int, int, int]:
    """Inverse of ``due_pk``: ``(partition, bucket, shard)``. Raises ValueError for anything else."""
    parts = value.split("#")
    if len(parts) != 3 or [p[:1] for p in parts] != ["p", "b", "s"]:
        raise ValueError(f"not a due-index key: {value!r}")
    try:
        return int(parts[0][1:]), int(parts[1][1:]), int(parts[2][1:])
    except ValueError:
        raise ValueError(f"not a due-index key: {value!r}") from None


TIMER_TTL_DAYS = 7
"""A timer item expires (DynamoDB's TTL, free of write units) this many days after its position: long after any
tick has passed it (the watermark trails now by a minute or so; a partition down longer reads it at its return,
when the item is still there unless it was down for a week)."""


def timer_pk(partition: int, bucket: int, shard: int, lane: str) -> str:
    """Partition key of a due-index lane's timer items: ``due#p<partition>#b<bucket>#s<shard>#<lane>``."""
    return f"due#p{partition}#b{bucket}#s{shard}#{lane}"


def timer_sk(order: tuple[int, str, int, int]) -> str:
    """Sort key of a timer item whose entry's ``DueEntry.order`` is ``order``: ``<at, 13 digits>#<job_id>#<due_at,
    13 digits>#<version, 10 digits, or - for none>``. No key is a prefix of another, so ``key + "\x01"`` is
    below every key sorted after ``key``."""
    at, job_id, due_at, version = order
    return f"{at:013d}#{job_id}#{due_at:013d}#{'-' if version < 0 else f'{version:010d}'}"


def timer_entry(pk: str, sk: str, *, owner: str | None = None, priority: str | None = None) -> DueEntry:
    """The entry of a timer item (its keys, and its ``owner`` and ``priority`` attributes when it has them: None
    on items written before they were kept, a ``normal`` priority: ``ports.jobs.hinted_priority``). Raises
    ValueError for keys ``timer_pk``/``timer_sk`` did not make."""
    parts = pk.split("#")
    if len(parts) != 5 or parts[0] != "due" or parts[4] not in TIMER_LANES:
        raise ValueError(f"not a timer key: {pk!r}")
    partition, bucket, shard = parse_due_pk("#".join(parts[1:4]))
    try:
        at, rest = sk.split("#", 1)
        job_id, due_at, version = rest.rsplit("#", 2)
        return DueEntry(
            job_id,
            partition,
            bucket,
            shard,
            int(due_at),
            lane=parts[4],
            position=int(at),
            version=None if version == "-" else int(version),
            owner=owner,
            priority=hinted_priority(priority),
        )
    except ValueError:
        raise ValueError(f"not a timer key: {sk!r}") from None


def timer_item(entry: DueEntry) -> dict[str, Any]:
    """The timer item of ``entry`` (keys, ``job_id``, ``expires_at`` epoch s: ``TIMER_TTL_DAYS`` after its
    position; ``owner`` when known and ``priority`` when not ``normal``: the tick's dispatch order, design §4.10)."""
    item: dict[str, Any] = {
        "pk": timer_pk(entry.partition, entry.bucket, entry.shard, entry.lane),
        "sk": timer_sk(entry.order),
        "job_id": entry.job_id,
        "expires_at": entry.at // 1000 + TIMER_TTL_DAYS * 86_400,
    }
    if entry.owner is not None:
        item["owner"] = entry.owner
    if entry.priority is not Priority.NORMAL:
        item["priority"] = entry.priority.value
    return item


def timer_entry_of_item(
    item: dict[str, Any], *, pk: str = "pk", sk: str = "sk", owner: str = "owner"
) -> DueEntry:
    """The entry of a timer item as stored (plain values), or of the timer keys a scheduling item keeps (``pk`` and
    ``sk`` name the key attributes, ``owner`` the owner's; ``priority`` either way): :func:`timer_entry`'s errors."""
    who, priority = item.get(owner), item.get("priority")
    return timer_entry(
        str(item[pk]),
        str(item[sk]),
        owner=str(who) if who is not None else None,
        priority=str(priority) if priority is not None else None,
    )


def due_attributes(entry: DueEntry) -> dict[str, Any]:
    """The attributes of a scheduling item whose due entry is ``entry``: ``due_at`` and the keys of its timer
    item (``timer_pk``, ``timer_sk``); ``due_pk``/``due_at`` (the ``due`` GSI's keys) for an :data:`INDEX`
    entry (the GSI layout: design, Upgrades in flight)."""
    if entry.lane == INDEX:
        return {"due_pk": due_pk(entry.partition, entry.bucket, entry.shard), "due_at": entry.due_at}
    item = timer_item(entry)
    return {"due_at": entry.due_at, "timer_pk": item["pk"], "timer_sk": item["sk"]}


def due_entry_from_item(item: dict[str, Any]) -> DueEntry:
    """The due entry of a scheduling item (``timer_pk``/``timer_sk``) or of an item of the ``due`` GSI
    (``job_id``, ``due_pk``, ``due_at``: an :data:`INDEX` entry). Raises ValueError (KeyError/TypeError wrapped)
    for anything else."""
    try:
        if item.get("timer_pk") is not None:
            return timer_entry_of_item(item, pk="timer_pk", sk="timer_sk", owner="job_owner")
        partition, bucket, shard = parse_due_pk(str(item["due_pk"]))
        return DueEntry(str(item["job_id"]), partition, bucket, shard, int(item["due_at"]), lane=INDEX)
    except (KeyError, TypeError) as error:
        raise ValueError(f"not a due-index item: {error}") from error


def plain(value: Any) -> Any:
    """DynamoDB resource values -> plain Python (Decimal -> int/float, recursively)."""
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


DOWNSTREAM = "downstream"
"""The spec item's chain mark (design §2.1): how many live jobs name this one in ``after`` (a number; absent: 0).
Added to in the transaction that creates or re-points a downstream job, taken from after one is deleted or
re-pointed (so it is never below the true count); the worker queries ``by_upstream`` only when it is above 0."""

QUOTA_RATE = "quota_rate"
"""The spec item's count in its owner's quota usage (``Job.quota_rate``, micro-fires per minute; absent: not
counted), written in the transaction that adds it to the usage item (``dynamodb.quotas``, design §4.11)."""


def spec_item(job: Job) -> dict[str, Any]:
    """The spec item of ``job`` (settings as one JSON document, so any ``input`` JSON round-trips; its labels
    beside it, as a map the listing filters on)."""
    doc = job.model_dump(mode="json", include=set(JobSettings.model_fields) - {"paused", "labels"})
    audit = {
        "updated_by": job.updated_by,
        "paused_by": job.paused_by,
        "paused_at": to_ms(job.paused_at) if job.paused_at is not None else None,
        "paused_reason": job.paused_reason,
    }
    return {
        "pk": job_pk(job.id),
        "sk": SPEC_SK,
        "job_id": job.id,
        "owner": job.owner,
        "name": job.name,
        "doc": json.dumps(doc, separators=(",", ":")),
        "created_at": to_ms(job.created_at),
        "updated_at": to_ms(job.updated_at),
        **({"after_job": job.after.job} if job.after is not None else {}),
        **({DOWNSTREAM: job.downstream_count} if job.downstream_count else {}),
        **({QUOTA_RATE: job.quota_rate} if job.quota_rate is not None else {}),
        **{name: value for name, value in audit.items() if value is not None},
        **({"labels": dict(job.labels)} if job.labels else {}),
    }


EVENTS_PK_PREFIX = "events#"
"""The start of every audit event's partition key (:func:`events_pk`): the archive's stream filter matches it."""


def events_pk(job_id: str) -> str:
    """The partition key of ``job_id``'s audit events."""
    return f"{EVENTS_PK_PREFIX}{job_id}"


def event_item(event: AuditEvent) -> dict[str, Any]:
    """The item of an audit event (see the module docstring)."""
    item: dict[str, Any] = {
        "pk": events_pk(event.job_id),
        "sk": event.position,
        "job_id": event.job_id,
        "at": event.at,
        "key": event.key,
        "kind": event.kind.value,
        "actor": event.actor,
        "detail": json.dumps(event.detail, separators=(",", ":")),
    }
    if event.expires_at is not None:
        item["expires_at"] = event.expires_at
    return item


def event_from_item(item: dict[str, Any]) -> AuditEvent:
    """The audit event of an item written by :func:`event_item`. Raises KeyError/ValueError when malformed."""
    item = plain(item)
    return AuditEvent(
        job_id=str(item["job_id"]),
        at=int(item["at"]),
        key=str(item["key"]),
        kind=JobEventKind(item["kind"]),
        actor=str(item["actor"]),
        detail=json.loads(item["detail"]),
        expires_at=int(item["expires_at"]) if item.get("expires_at") is not None else None,
    )


def tombstone_item(spec: dict[str, Any], *, deleted_at_ms: int, retention_days: int) -> dict[str, Any]:
    """The item that replaces the spec item ``spec`` of a job deleted at ``deleted_at_ms`` (epoch ms).

    It expires (``expires_at``, epoch s) ``retention_days`` after the deletion: every run row of the job was
    written before then and expires no later (``jobsched.domain.runs.new_run``).
    """
    return {
        "pk": job_pk(spec["job_id"]),
        "sk": SPEC_SK,
        "job_id": spec["job_id"],
        "deleted_owner": spec["owner"],
        "deleted_name": spec["name"],
        "deleted_at": deleted_at_ms,
        "expires_at": deleted_at_ms // 1000 + retention_days * 86400,
    }


def is_tombstone(item: dict[str, Any]) -> bool:
    """Whether a spec-key item is a deleted job's tombstone rather than a job's spec."""
    return "deleted_at" in item


def history_owner(item: dict[str, Any]) -> str | None:
    """The owner of the run history of the job whose spec-key item this is (live job or tombstone)."""
    owner = item.get("deleted_owner") if is_tombstone(item) else item.get("owner")
    return str(owner) if owner is not None else None


def sched_item(state: SchedulingState) -> dict[str, Any]:
    """The scheduling item of ``state`` (``pk=job#<id> sk=sched``): in the due index iff ``state.due`` is set."""
    item: dict[str, Any] = {
        "pk": job_pk(state.job_id),
        "sk": SCHED_SK,
        "job_id": state.job_id,
        "partition": state.partition,
        "schedule": state.schedule,
        "timezone": state.timezone,
        "missed": state.missed.value,
        "catch_up_window_s": state.catch_up_window_s,
        "misfire_grace_s": state.misfire_grace_s,
        "jitter_offset_ms": state.jitter_offset_ms,
        "paused": state.paused,
        "term": state.term,
    }
    optional = {
        "anchor_at": state.anchor_at,
        "version": state.version,
        "on_time_from": state.on_time_from,
        "end_at": state.end_at,
        "next_run_at": state.next_run_at,
        "job_owner": state.owner,
    }
    item.update({name: value for name, value in optional.items() if value is not None})
    if state.alert_on_skipped:
        item["alert_on_skipped"] = True
    if state.priority is not Priority.NORMAL:
        item["priority"] = state.priority.value
    if state.due is not None:
        item.update(due_attributes(state.due))
    return item


def state_items(state: SchedulingState) -> list[dict[str, Any]]:
    """What storing ``state`` writes: its scheduling item, and the timer item of its due entry if it has one
    (for writers that put items themselves, e.g. a batch writer loading jobs)."""
    due = state.due
    return [sched_item(state), *([timer_item(due)] if due is not None and due.lane != INDEX else [])]


def state_from_item(item: dict[str, Any]) -> SchedulingState:
    """The ``SchedulingState`` of a scheduling item (plain Python values; attributes missing on items written
    before they existed take their defaults). Raises KeyError/TypeError/ValueError when malformed."""

    def optional(name: str) -> int | None:
        return int(item[name]) if item.get(name) is not None else None

    due = due_entry_from_item(item) if item.get("timer_pk") or item.get("due_pk") is not None else None
    if due is not None and item.get("next_run_at") is None:
        raise ValueError("in the due index without next_run_at")
    return SchedulingState(
        job_id=str(item["job_id"]),
        partition=int(item.get("partition", due.partition if due else 0)),
        schedule=str(item["schedule"]),
        timezone=str(item.get("timezone", "UTC")),
        anchor_at=optional("anchor_at"),
        end_at=optional("end_at"),
        missed=MissedPolicy(item.get("missed", MissedPolicy.CATCH_UP.value)),
        catch_up_window_s=int(item.get("catch_up_window_s", DEFAULT_CATCH_UP_WINDOW_S)),
        misfire_grace_s=int(item.get("misfire_grace_s", DEFAULT_MISFIRE_GRACE_S)),
        jitter_offset_ms=int(item.get("jitter_offset_ms", 0)),
        paused=bool(item.get("paused", False)),
        term=int(item.get("term", 0)),
        version=optional("version"),
        next_run_at=optional("next_run_at"),
        on_time_from=optional("on_time_from"),
        due=due,
        owner=str(item["job_owner"]) if item.get("job_owner") is not None else None,
        alert_on_skipped=bool(item.get("alert_on_skipped", False)),
        priority=Priority(item.get("priority", Priority.NORMAL.value)),
    )


def job_from_items(spec: dict[str, Any], sched: dict[str, Any] | None) -> Job:
    """Rebuild the API's ``Job`` from its spec and scheduling items."""
    spec = plain(spec)
    sched = plain(sched) if sched else {}
    doc = json.loads(spec["doc"])
    next_ms = sched.get("next_run_at")
    return Job.model_validate(
        {
            **doc,
            "labels": spec.get("labels") or {},
            "id": spec["job_id"],
            "name": spec["name"],
            "owner": spec["owner"],
            "paused": bool(sched.get("paused", False)),
            "next_run_at": from_ms(next_ms) if next_ms is not None else None,
            "created_at": from_ms(spec["created_at"]),
            "updated_at": from_ms(spec["updated_at"]),
            "updated_by": spec.get("updated_by"),
            "paused_by": spec.get("paused_by"),
            "paused_at": from_ms(spec["paused_at"]) if spec.get("paused_at") is not None else None,
            "paused_reason": spec.get("paused_reason"),
            "downstream_count": int(spec.get(DOWNSTREAM) or 0),
            "quota_rate": stored_count(spec.get(QUOTA_RATE)),
        }
    )


RUN_ATTRIBUTES = {
    "status": "status",
    "kind": "kind",
    "attempt": "attempt",
    "enqueued_at": "enqueued_at",
    "dispatch_at": "dispatch_at",
    "started_at": "started_at",
    "heartbeat_at": "heartbeat_at",
    "retry_at": "retry_at",
    "finished_at": "finished_at",
    "lateness_ms": "lateness_ms",
    "worker": "worker",
    "error": "error",
    "owner": "owner",
    "term": "term",
    "skipped_count": "skipped_count",
    "skipped_through": "skipped_through",
    "sweep_at": "sweep_at",
    "sweeps": "sweeps",
    "notify_pending": "notify_pending",
    "expires_at_s": "expires_at",
    "reruns": "reruns",
    "rerun_key": "rerun_key",
    "cancelled_by": "cancelled_by",
    "cancel_reason": "cancel_reason",
    "cancelled_from": "cancelled_from",
    "upstream_run_id": "upstream_run_id",
}
"""``RunRow`` field -> runs-table attribute (the key ``job_id``/``scheduled_for`` and ``run_id``, ``sweep_pk``
aside; ``tries`` is ``TRIES_ATTRIBUTE``)."""

TRIES_ATTRIBUTE = "tries"
TRY_ATTRIBUTES = {
    "attempt": "n",
    "started_at": "s",
    "finished_at": "f",
    "worker": "w",
    "error": "e",
    "output": "o",
    "round": "r",
}
"""``TryRecord`` field -> key in a ``tries`` list entry (a map): one letter each, since every byte of a run row
counts toward its write units. Unset values (None, round 0) are left out."""


def tries_value(tries: tuple[TryRecord, ...]) -> list[dict[str, Any]]:
    """The ``tries`` attribute of a row's tries: a list of maps (``TRY_ATTRIBUTES``), oldest first."""
    return [
        {
            key: getattr(record, name)
            for name, key in TRY_ATTRIBUTES.items()
            if getattr(record, name) is not None and not (name == "round" and record.round == 0)
        }
        for record in tries
    ]


def tries_of(value: Any) -> tuple[TryRecord, ...]:
    """The ``TryRecord`` s of a stored ``tries`` attribute (``plain`` values: numbers already ints; absent: none)."""
    return tuple(
        TryRecord(**{name: entry[key] for name, key in TRY_ATTRIBUTES.items() if entry.get(key) is not None})
        for entry in value or ()
    )


FAIL_OWNER = "fail_owner"
"""Partition key of the sparse ``failures`` index of the runs table: the owner, on failing rows only."""


def sweep_pk(shard: int) -> str:
    """Partition key of shard ``shard`` of the sparse sweep index: ``sweep#<shard>`` (a run's shard is
    ``domain.runs.sweep_shard(job_id)``)."""
    return f"sweep#{shard}"


def sweep_keys(job_id: str, sweep_at_ms: int) -> dict[str, Any]:
    """The attributes that file a run of ``job_id`` in the sparse sweep index, due at ``sweep_at_ms`` (epoch ms):
    its shard's ``sweep_pk`` and ``sweep_at`` (a row its claim made has neither until a transition sets them)."""
    return {"sweep_pk": sweep_pk(sweep_shard(job_id)), "sweep_at": sweep_at_ms}


def run_item(row: RunRow) -> dict[str, Any]:
    """The runs-table item of ``row``: its attributes that are set (None and defaults left out, so the
    sparse index and ``attribute_not_exists`` conditions see them absent), plus ``run_id`` and, while the row
    is in the sweep index, ``sweep_pk``."""
    item: dict[str, Any] = {
        "job_id": row.job_id,
        "scheduled_for": row.scheduled_for,
        "run_id": row.run_id,
        "status": row.status.value,
        "kind": row.kind.value,
        "attempt": row.attempt,
    }
    for name, attribute in RUN_ATTRIBUTES.items():
        value = getattr(row, name)
        if (
            attribute not in item
            and value is not None
            and value is not False
            and not (name in ("sweeps", "reruns") and value == 0)
        ):
            item[attribute] = value
    if row.tries:
        item[TRIES_ATTRIBUTE] = tries_value(row.tries)
    if row.sweep_at is not None:
        item.update(sweep_keys(row.job_id, row.sweep_at))
    if row.status in FAILURE_STATUSES and row.owner is not None:
        item[FAIL_OWNER] = row.owner
    return item


def run_row(item: dict[str, Any]) -> RunRow:
    """The ``RunRow`` of a runs-table item (DynamoDB or plain values)."""
    return run_row_of_plain(plain(item))


def run_row_of_plain(item: dict[str, Any]) -> RunRow:
    """The ``RunRow`` of a runs-table item whose values are already plain (numbers ints or floats, no
    ``Decimal``): :func:`run_row` without the walk that converts them. Raises ``KeyError``/``ValueError`` for an
    item that is no run row."""
    values = {
        name: item[attribute] for name, attribute in RUN_ATTRIBUTES.items() if item.get(attribute) is not None
    }
    values["status"] = RunStatus(item["status"])
    if "cancelled_from" in values:
        values["cancelled_from"] = RunStatus(values["cancelled_from"])
    values["kind"] = RunKind(item.get("kind", RunKind.SCHEDULED.value))
    values["notify_pending"] = bool(item.get("notify_pending", False))
    values["tries"] = tries_of(item.get(TRIES_ATTRIBUTE))
    return RunRow(job_id=str(item["job_id"]), scheduled_for=int(item["scheduled_for"]), **values)


def trigger_key_item(
    job_id: str, owner: str, idempotency_key: str, *, scheduled_for_ms: int, expires_at_s: int
) -> dict[str, Any]:
    """The runs-table item that binds a manual trigger's ``Idempotency-Key`` to the run it created.

    Key: ``job_id = trigger#<job_id>`` (no job's id, so no listing of runs sees it) and ``scheduled_for`` = 48
    bits of ``sha256(owner, key)``; ``run_scheduled_for`` names the run (epoch ms). Written in one transaction
    with the run, so the key decides the run's identity as durably as the run itself; it expires with it.
    """
    digest = hashlib.sha256(f"{owner}\0{idempotency_key}".encode()).digest()
    return {
        "job_id": f"trigger#{job_id}",
        "scheduled_for": int.from_bytes(digest[:6], "big"),
        "run_scheduled_for": scheduled_for_ms,
        "expires_at": expires_at_s,
    }
