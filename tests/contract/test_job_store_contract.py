"""One contract for the job store, run against the in-memory fake, the DynamoDB adapter (on moto) and the SQLite adapter:
conditional writes, fencing by partition and term, version conditions, paging, due-index queries."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from jobsched.clock import from_ms, to_ms
from jobsched.dynamodb.jobs import JobStore
from jobsched.memory.jobs import MemoryJobStore
from jobsched.models import After, CommandTarget, Job, JobEventKind, Priority
from jobsched.ports.errors import Conflict, NameTaken, NotFound
from jobsched.ports.jobs import (
    EARLY,
    EARLY_HIGH,
    LATE,
    LATE_HIGH,
    AuditEvent,
    DueEntry,
    DueQuery,
    Move,
    Rewrite,
    SchedulingState,
)
from jobsched.sqlite.jobs import SqliteJobStore

from .conftest import BACKENDS, adapter_on, on_table

T0 = to_ms(datetime(2026, 3, 2, 10, 0, tzinfo=UTC))


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest) -> Any:
    return adapter_on(request, MemoryJobStore, SqliteJobStore, on_table(JobStore, "jobs_table"))


def job(number: int, *, owner: str = "team-a", name: str | None = None) -> Job:
    return Job(
        id=f"j_{number:020x}",
        name=name or f"job-{number:03d}",
        owner=owner,
        schedule="* * * * *",
        target=CommandTarget(name="echo"),
        created_at=from_ms(T0),
        updated_at=from_ms(T0),
    )


def state(
    of: Job,
    *,
    next_run_at: int | None = T0,
    partition: int = 0,
    bucket: int = 5,
    shard: int = 0,
    **fields: Any,
) -> SchedulingState:
    due = DueEntry(of.id, partition, bucket, shard, next_run_at) if next_run_at is not None else None
    values: dict[str, Any] = {"anchor_at": T0, "version": 1, "next_run_at": next_run_at, "due": due}
    values.update(fields)
    return SchedulingState(job_id=of.id, partition=partition, schedule=of.schedule or "", **values)


def current(store: Any, query: DueQuery) -> list[DueEntry]:
    """The entries ``query`` finds that are still their job's current one (a store may keep stale ones: the
    DynamoDB adapter's timer items expire, they are not deleted)."""
    entries, _ = store.query_due(query)
    states = store.scheduling_states([entry.job_id for entry in entries])
    return [entry for entry in entries if getattr(states.get(entry.job_id), "due", None) == entry]


def test_a_created_job_reads_back_with_its_state(store: Any) -> None:
    first = job(1)
    stored_state = state(first, term=4, on_time_from=T0 + 3)
    store.create(first, stored_state)
    found = store.get(first.id)
    assert found.state == stored_state
    assert found.job.id == first.id and found.job.owner == "team-a" and found.job.name == "job-001"
    assert to_ms(found.job.next_run_at) == T0 and found.job.paused is False
    assert store.job_id_by_name("team-a", "job-001") == first.id
    assert store.history_owner(first.id) == "team-a"


def test_a_taken_name_is_refused_with_its_holder_and_other_owners_are_apart(store: Any) -> None:
    first = job(1, name="report")
    store.create(first, state(first))
    with pytest.raises(NameTaken) as taken:
        store.create(job(2, name="report"), state(job(2, name="report")))
    assert taken.value.job_id == first.id
    other = job(3, owner="team-b", name="report")
    store.create(other, state(other))
    assert store.job_id_by_name("team-b", "report") == other.id


def test_unknown_jobs_are_not_found(store: Any) -> None:
    with pytest.raises(NotFound):
        store.get("j_" + "0" * 20)
    assert store.history_owner("j_" + "0" * 20) is None
    assert store.scheduling_states(["j_" + "0" * 20]) == {}


def test_replace_is_conditional_on_updated_at_and_on_the_state_read(store: Any) -> None:
    first = job(1)
    store.create(first, state(first, term=2))
    edited = first.model_copy(update={"updated_at": from_ms(T0 + 1), "paused": True})
    paused = state(first, term=2, version=2, paused=True, due=None)
    with pytest.raises(Conflict):  # an older updated_at than stored
        store.replace(Rewrite(edited, paused, T0 - 1))
    with pytest.raises(Conflict):  # a scheduler moved it since it was read
        store.replace(Rewrite(edited, paused, T0, expected_state=(T0 - 60_000, 2)))
    with pytest.raises(Conflict):  # a newer leader stamped it since
        store.replace(Rewrite(edited, paused, T0, expected_state=(T0, 1)))
    assert store.get(first.id).state.version == 1
    store.replace(Rewrite(edited, paused, T0, expected_state=(T0, 2)))
    found = store.get(first.id)
    assert found.state == paused and found.job.paused is True and to_ms(found.job.updated_at) == T0 + 1
    assert current(store, DueQuery(0, 5, 0, T0 + 1)) == []  # out of the due index


def test_delete_frees_the_name_keeps_the_history_owner_and_refuses_a_repeat(store: Any) -> None:
    first = job(1, name="report")
    store.create(first, state(first))
    store.delete(first, deleted_at_ms=T0, retention_days=1)
    with pytest.raises(NotFound):
        store.get(first.id)
    with pytest.raises(NotFound):
        store.delete(first, deleted_at_ms=T0, retention_days=1)
    assert store.history_owner(first.id) == "team-a"
    assert store.job_id_by_name("team-a", "report") is None
    assert current(store, DueQuery(0, 5, 0, T0 + 1)) == []
    newer = job(2, name="report")
    store.create(newer, state(newer))
    with pytest.raises(NotFound):  # a late repeat of the first delete leaves the newer job's name alone
        store.delete(first, deleted_at_ms=T0, retention_days=1)
    assert store.job_id_by_name("team-a", "report") == newer.id
    gone = job(3)
    store.create(gone, state(gone))
    store.delete(gone, deleted_at_ms=T0, retention_days=None)
    assert store.history_owner(gone.id) is None


def test_list_by_owner_pages_by_name(store: Any) -> None:
    for number in (5, 1, 4, 2, 3):
        store.create(job(number), state(job(number)))
    store.create(job(9, owner="team-b"), state(job(9, owner="team-b")))
    names: list[str] = []
    after = None
    for _ in range(10):
        page, after = store.list_by_owner("team-a", 2, after)
        assert len(page) <= 2
        names += [found.job.name for found in page]
        if after is None:
            break
    assert names == [f"job-{n:03d}" for n in (1, 2, 3, 4, 5)]


def labelled(number: int, labels: dict[str, str], *, owner: str = "team-a") -> Job:
    return job(number, owner=owner).model_copy(update={"labels": labels})


def every_page(store: Any, owner: str, limit: int, labels: dict[str, str] | None) -> list[str]:
    """The names of every job a listing with ``labels`` pages through, ``limit`` jobs read at a time."""
    names: list[str] = []
    after = None
    for _ in range(20):
        page, after = store.list_by_owner(owner, limit, after, labels)
        assert len(page) <= limit
        names += [found.job.name for found in page]
        if after is None:
            return names
    raise AssertionError("the listing never ended")


def test_labels_are_stored_with_the_job_and_replaced_by_a_rewrite(store: Any) -> None:
    tagged = labelled(1, {"team": "billing", "app.kubernetes.io/part-of": "invoices", "empty": ""})
    store.create(tagged, state(tagged))
    assert store.get(tagged.id).job.labels == tagged.labels
    assert store.get_spec(tagged.id).labels == tagged.labels
    edited = tagged.model_copy(update={"updated_at": from_ms(T0 + 1), "labels": {"team": "ops"}})
    store.replace(Rewrite(edited, state(tagged, version=2), T0))
    assert store.get(tagged.id).job.labels == {"team": "ops"}
    cleared = edited.model_copy(update={"updated_at": from_ms(T0 + 2), "labels": {}})
    store.replace(Rewrite(cleared, state(tagged, version=3), T0 + 1))
    assert store.get(tagged.id).job.labels == {}
    page, _ = store.list_by_owner("team-a", 10)
    assert [found.job.labels for found in page] == [{}]


def test_list_by_owner_keeps_the_jobs_carrying_every_label_asked(store: Any) -> None:
    carrying = {
        1: {"team": "billing", "tier": "gold"},
        2: {"team": "billing"},
        3: {"team": "billing", "tier": "gold", "x.y/z": "1"},
        4: {"team": "ops", "tier": "gold"},
        5: {},
        6: {"team": "billing", "tier": "gold"},
        7: {"tier": "gold", "team": "billing-2"},
    }
    for number, labels in carrying.items():
        store.create(labelled(number, labels), state(labelled(number, labels)))
    other = labelled(9, {"team": "billing", "tier": "gold"}, owner="team-b")
    store.create(other, state(other))
    gold_billing = ["job-001", "job-003", "job-006"]
    for limit in (1, 2, 10):
        assert every_page(store, "team-a", limit, {"team": "billing", "tier": "gold"}) == gold_billing
    assert every_page(store, "team-a", 3, {"team": "billing"}) == ["job-001", "job-002", "job-003", "job-006"]
    assert every_page(store, "team-a", 3, {"x.y/z": "1"}) == ["job-003"]
    assert every_page(store, "team-a", 3, {"team": "nobody"}) == []
    assert every_page(store, "team-a", 3, {}) == [f"job-{n:03d}" for n in range(1, 8)]


def test_query_due_reads_one_bucket_and_shard_oldest_first_in_pages(store: Any) -> None:
    jobs = [job(n) for n in range(1, 8)]
    for n, one in enumerate(jobs):
        store.create(one, state(one, next_run_at=T0 + 1000 * (7 - n)))
    other_shard, other_bucket, later = job(20), job(21), job(22)
    store.create(other_shard, state(other_shard, shard=1))
    store.create(other_bucket, state(other_bucket, bucket=6))
    store.create(later, state(later, next_run_at=T0 + 60_000))
    found: list[DueEntry] = []
    token = None
    for _ in range(10):
        page, token = store.query_due(DueQuery(0, 5, 0, T0 + 10_000, 3, token))
        assert len(page) <= 3
        found += page
        if token is None:
            break
    assert [e.due_at for e in found] == [T0 + 1000 * k for k in range(1, 8)]
    assert all(e.partition == 0 and e.bucket == 5 and e.shard == 0 for e in found)
    assert {e.job_id for e in found} == {one.id for one in jobs}
    assert store.oldest_due_bucket(0) == 5 and store.oldest_due_bucket(1) is None
    assert store.highest_due_partition() == 0 and store.highest_due_shard() == 1  # other_shard's


def test_query_due_reads_one_lane_in_its_order_after_a_read_position(store: Any) -> None:
    # Given entries in both lanes of one bucket and shard: early ones at their due instant, late ones at their
    # writing (after their due instant), and an early one of another job filed by put_timers before its move
    early = [job(n) for n in (1, 2, 3)]
    for n, one in enumerate(early):
        store.create(one, state(one, next_run_at=T0 + n, due=DueEntry(one.id, 0, 5, 0, T0 + n, lane=EARLY)))
    late = job(4)
    written_late = DueEntry(late.id, 0, 5, 0, T0 - 5_000, lane=LATE, position=T0 + 1, version=1)
    store.create(late, state(late, next_run_at=T0 - 5_000, due=written_late))
    moved = job(5)
    store.create(moved, state(moved, next_run_at=T0 - 60_000, bucket=4))
    filed = DueEntry(moved.id, 0, 5, 0, T0 + 2, lane=EARLY, version=1)
    store.put_timers([filed])
    store.move(
        Move(
            moved.id,
            expected_next_run_at=T0 - 60_000,
            expected_version=1,
            partition=0,
            term=1,
            next_run_at=T0 + 2,
            due=filed,
        )
    )

    # Then each lane is read in its order (position, job id), only up to up_to_ms, from after a start
    lane, _ = store.query_due(DueQuery(0, 5, 0, T0 + 10, lane=EARLY))
    assert [(e.job_id, e.at) for e in lane] == [
        (early[0].id, T0),
        (early[1].id, T0 + 1),
        (early[2].id, T0 + 2),
        (moved.id, T0 + 2),
    ]
    assert store.query_due(DueQuery(0, 5, 0, T0 + 10, lane=LATE))[0] == [written_late]
    assert store.query_due(DueQuery(0, 5, 0, T0, lane=LATE))[0] == []  # filed at T0 + 1, its writing
    after, _ = store.query_due(DueQuery(0, 5, 0, T0 + 10, lane=EARLY, start=lane[1].order))
    assert after == lane[2:]
    paged, token = store.query_due(DueQuery(0, 5, 0, T0 + 10, 1, lane=EARLY, start=lane[0].order))
    assert paged == [lane[1]] and token is not None
    assert store.query_due(DueQuery(0, 5, 0, T0 + 10, 1, token, lane=EARLY, start=lane[0].order))[0] == [
        lane[2]
    ]
    assert set(store.due_lanes()) >= {EARLY, LATE}


def test_due_entries_read_back_with_their_owner_and_priority(store: Any) -> None:
    # Given a high job (its entry in the early high lane) and a low one (the early lane), of two owners
    high, low = job(1, owner="team-h"), job(2, owner="team-l")
    high_due = DueEntry(
        high.id, 0, 5, 0, T0, lane=EARLY_HIGH, version=1, owner="team-h", priority=Priority.HIGH
    )
    low_due = DueEntry(low.id, 0, 5, 0, T0, lane=EARLY, version=1, owner="team-l", priority=Priority.LOW)
    store.create(high, state(high, due=high_due, owner="team-h", priority=Priority.HIGH))
    store.create(low, state(low, due=low_due, owner="team-l", priority=Priority.LOW))

    # Then each lane's query returns its entry with the owner and priority it was filed with, as does the state
    (found_high,) = store.query_due(DueQuery(0, 5, 0, T0 + 10, lane=EARLY_HIGH))[0]
    (found_low,) = store.query_due(DueQuery(0, 5, 0, T0 + 10, lane=EARLY))[0]
    assert (found_high.owner, found_high.priority) == ("team-h", Priority.HIGH)
    assert (found_low.owner, found_low.priority) == ("team-l", Priority.LOW)
    states = store.scheduling_states([high.id, low.id])
    assert states[high.id].priority is Priority.HIGH and states[low.id].priority is Priority.LOW
    assert (states[high.id].due.owner, states[high.id].due.priority) == ("team-h", Priority.HIGH)
    assert set(store.due_lanes()) >= {EARLY_HIGH, LATE_HIGH}

    # And a move onto a next entry filed by put_timers keeps them
    nxt = DueEntry(
        high.id, 0, 5, 0, T0 + 5, lane=LATE_HIGH, version=1, owner="team-h", priority=Priority.HIGH
    )
    store.put_timers([nxt])
    store.move(
        Move(
            high.id,
            expected_next_run_at=T0,
            expected_version=1,
            partition=0,
            term=1,
            next_run_at=T0 + 5,
            due=nxt,
        )
    )
    (moved,) = current(store, DueQuery(0, 5, 0, T0 + 10, lane=LATE_HIGH))
    assert (moved.job_id, moved.owner, moved.priority) == (high.id, "team-h", Priority.HIGH)


def test_a_move_lands_only_on_the_state_it_was_planned_from(store: Any) -> None:
    first = job(1)
    store.create(first, state(first, term=3, version=2))
    nxt = DueEntry(first.id, 0, 6, 0, T0 + 60_000)
    move: dict[str, Any] = {
        "expected_next_run_at": T0,
        "expected_version": 2,
        "partition": 0,
        "term": 3,
        "next_run_at": T0 + 60_000,
        "due": nxt,
    }
    refusals = [
        {"term": 2},  # fenced: a newer leader (term 3) wrote it
        {"expected_next_run_at": T0 - 60_000},  # someone else moved it
        {"expected_version": 1},  # the API rewrote it
        {"expected_version": None},
        {"partition": 1},  # homed elsewhere
    ]
    for change in refusals:
        with pytest.raises(Conflict) as refused:
            store.move(Move(first.id, **{**move, **change}))
        assert refused.value.current == state(first, term=3, version=2), change
    store.put_timers([nxt])  # (the tick files the next entry before the move)
    store.move(Move(first.id, **{**move, "term": 4}))
    assert store.scheduling_states([first.id])[first.id] == state(
        first, term=4, version=2, next_run_at=T0 + 60_000, bucket=6
    )
    assert current(store, DueQuery(0, 6, 0, T0 + 60_000)) == [nxt]


def test_a_move_can_end_the_schedule_and_rehome_the_job(store: Any) -> None:
    first, second = job(1), job(2)
    store.create(first, state(first, term=3))
    store.create(second, state(second, term=3))
    moved = DueEntry(first.id, 2, 6, 1, T0 + 60_000)
    planned = {"expected_next_run_at": T0, "expected_version": 1, "partition": 0}
    store.move(Move(first.id, **planned, term=5, next_run_at=T0 + 60_000, due=moved, to_partition=2))
    assert store.scheduling_states([first.id])[first.id] == replace(
        state(first), partition=2, term=0, next_run_at=T0 + 60_000, due=moved
    )
    assert store.highest_due_partition() == 2 and store.oldest_due_bucket(2) == 6
    assert store.highest_due_shard() == 1  # the moved entry's shard (the other job's is 0)
    store.move(Move(second.id, **planned, term=3, next_run_at=None, due=None))
    ended = store.scheduling_states([second.id])[second.id]
    assert ended.next_run_at is None and ended.due is None and ended.term == 3
    with pytest.raises(Conflict):  # out of the due index: nothing to move
        store.move(Move(second.id, **planned, term=3, next_run_at=1, due=None))


def event(of: Job, at: int, key: str, kind: JobEventKind, **detail: Any) -> AuditEvent:
    return AuditEvent(
        of.id, at, key, kind, "arn:aws:sts::1:assumed-role/ops/ana", dict(detail), at // 1000 + 86400
    )


def test_events_are_written_with_the_change_they_record_or_not_at_all(store: Any) -> None:
    first = job(1)
    created = event(first, T0, "v1", JobEventKind.CREATED)
    store.create(first, state(first), created)
    paused = event(first, T0 + 5, "v2", JobEventKind.PAUSED, reason="freeze")
    refused = event(first, T0 + 6, "v2b", JobEventKind.UPDATED)
    changed = first.model_copy(
        update={"updated_at": from_ms(T0 + 5), "paused_by": "ana", "paused_reason": "freeze"}
    )
    store.replace(Rewrite(changed, state(first, paused=True, next_run_at=None), T0, event=paused))

    with pytest.raises(Conflict):
        store.replace(Rewrite(changed, state(first), T0, event=refused))  # stale updated_at: no event either
    with pytest.raises(NameTaken):
        store.create(job(2, name="job-001"), state(job(2)), event(job(2), T0, "v1", JobEventKind.CREATED))

    assert store.list_events(first.id, 10) == ([paused, created], None)
    assert store.list_events(job(2).id, 10) == ([], None)
    found = store.get(first.id).job
    assert (found.paused_by, found.paused_reason) == ("ana", "freeze")


def test_events_page_newest_first_and_outlive_the_job(store: Any) -> None:
    first = job(1)
    store.create(first, state(first), event(first, T0, "v1", JobEventKind.CREATED))
    runs = [event(first, T0 + i, f"run-{i}", JobEventKind.TRIGGERED, run_id=f"r{i}") for i in (1, 2, 3)]
    for one in runs:
        store.record_event(one)
    store.record_event(runs[1])  # a repeat lands on itself
    store.delete(
        first, deleted_at_ms=T0 + 9, retention_days=90, event=event(first, T0 + 9, "v2", JobEventKind.DELETED)
    )

    page, cursor = store.list_events(first.id, 2)
    rest, end = store.list_events(first.id, 10, cursor)

    assert [e.kind for e in page] == [JobEventKind.DELETED, JobEventKind.TRIGGERED] and cursor == page[
        -1
    ].position
    assert rest == [runs[1], runs[0], event(first, T0, "v1", JobEventKind.CREATED)] and end is None


def test_a_jobs_dependents_are_the_live_jobs_whose_after_names_it_by_name(store: Any) -> None:
    # design §2.1: the jobs that run after a job (the worker's and the API's read of a chain)
    upstream = job(1, name="extract")
    store.create(upstream, state(upstream))
    later = [
        job(n, name=name).model_copy(update={"schedule": None, "after": After(job=upstream.id)})
        for n, name in ((2, "load"), (3, "audit"), (4, "gone"))
    ]
    for each in later:
        store.create(each, state(each, next_run_at=None))
    unrelated = job(5, name="unrelated")
    store.create(unrelated, state(unrelated))
    gone = later[2]
    store.delete(gone, deleted_at_ms=T0, retention_days=90)
    paused = later[0].model_copy(update={"paused": True, "updated_at": from_ms(T0 + 1)})
    store.replace(Rewrite(paused, state(paused, next_run_at=None, paused=True), T0))

    found = store.dependents(upstream.id)

    assert [(d.job.name, d.job.after.job, d.job.paused) for d in found] == [
        ("audit", upstream.id, False),
        ("load", upstream.id, True),
    ]
    assert store.dependents(unrelated.id) == [] and store.dependents(later[1].id) == []
    assert store.get(later[1].id).job.schedule is None


def _after(of: Job, number: int, name: str, upstream: str | None) -> Job:
    return of.model_copy(
        update={
            "schedule": None,
            "after": After(job=upstream) if upstream else None,
            "updated_at": from_ms(T0 + number),
        }
    )


def _marks(store: Any, *jobs: Job) -> list[int]:
    specs = store.get_specs([j.id for j in jobs])
    counts = [store.get_spec(j.id).downstream_count for j in jobs]
    assert (
        counts
        == [specs[j.id].downstream_count for j in jobs]
        == [store.get(j.id).job.downstream_count for j in jobs]
    )
    return counts


def test_a_jobs_chain_mark_counts_the_jobs_that_run_after_it_through_create_repoint_and_delete(
    store: Any,
) -> None:
    # design §2.1: the worker reads a job's downstream jobs only when the spec it reads counts some
    extract, other = job(1, name="extract"), job(2, name="other")
    for each in (extract, other):
        store.create(each, state(each))
    assert _marks(store, extract, other) == [0, 0]
    load = _after(job(3, name="load"), 0, "load", extract.id)
    audit = _after(job(4, name="audit"), 0, "audit", extract.id)
    for each in (load, audit):
        store.create(each, state(each, next_run_at=None))
    assert _marks(store, extract, other, load) == [2, 0, 0]

    moved = _after(load, 1, "load", other.id)
    store.replace(Rewrite(moved, state(moved, next_run_at=None), T0, relink=(extract.id, other.id)))
    assert _marks(store, extract, other) == [1, 1]
    # a rewrite of the upstream itself (as read: mark and all) keeps its count
    read = store.get(extract.id).job
    renamed = read.model_copy(update={"input": {"v": 2}, "updated_at": from_ms(T0 + 1)})
    store.replace(Rewrite(renamed, state(renamed), T0))
    assert _marks(store, extract) == [1]

    store.delete(audit, deleted_at_ms=T0, retention_days=90)
    unchained = _after(moved, 2, "load", None).model_copy(update={"schedule": "* * * * *"})
    store.replace(Rewrite(unchained, state(unchained), T0 + 1, relink=(other.id, None)))
    assert _marks(store, extract, other) == [0, 0]


@pytest.fixture
def dynamo_store(aws: Any, settings: Any) -> JobStore:
    return JobStore(aws.table(settings.jobs_table))


def test_dynamodb_refuses_a_downstream_job_whose_upstream_was_deleted_meanwhile(
    dynamo_store: JobStore,
) -> None:
    # the count is added in the create's transaction, only while the upstream is live: nothing is written
    upstream = job(1, name="extract")
    dynamo_store.create(upstream, state(upstream))
    dynamo_store.delete(upstream, deleted_at_ms=T0, retention_days=90)
    late = _after(job(2, name="load"), 0, "load", upstream.id)
    with pytest.raises(Conflict, match="after"):
        dynamo_store.create(late, state(late, next_run_at=None))
    assert dynamo_store.job_id_by_name("team-a", "load") is None
    moved = _after(job(3, name="other"), 0, "other", None)
    dynamo_store.create(moved, state(moved))
    repointed = _after(moved, 1, "other", upstream.id)
    with pytest.raises(Conflict, match="after"):
        dynamo_store.replace(Rewrite(repointed, state(repointed), T0, relink=(None, upstream.id)))
    assert dynamo_store.get(moved.id).job.after is None


def test_dynamodb_refuses_a_rewrite_of_an_upstream_whose_count_moved_since_it_was_read(
    dynamo_store: JobStore,
) -> None:
    # a PATCH of the upstream writes the whole spec item: with a stale count it would undo a downstream's count
    upstream = job(1, name="extract")
    dynamo_store.create(upstream, state(upstream))
    read = dynamo_store.get(upstream.id).job
    load = _after(job(2, name="load"), 0, "load", upstream.id)
    dynamo_store.create(load, state(load, next_run_at=None))
    edited = read.model_copy(update={"input": {"v": 2}, "updated_at": from_ms(T0 + 1)})
    with pytest.raises(Conflict):
        dynamo_store.replace(Rewrite(edited, state(edited), T0))
    assert dynamo_store.get_spec(upstream.id).downstream_count == 1  # type: ignore[union-attr]
