"""A deployment upgraded mid-stream from the due index's GSI layout (each job's entry on its scheduling item,
the ``due`` GSI) to timer items (design, Upgrades in flight), on moto: while the new scheduler ticks, the
sweeper's migration passes (``DueRepair.migrate_due_index``) move what is left of the GSI a few entries at a time,
and every fire runs exactly once, on time, before, during and after; once the GSI has stayed empty long enough,
a new leader reads the timer lanes only."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from typing import Any

from boto3.dynamodb.conditions import Attr

from jobsched.dynamodb import layout
from jobsched.dynamodb.due_index import LAYOUT_KEY
from jobsched.ports.jobs import INDEX, TIMER_LANES

MIN = 60_000


def _old_layout(harness: Any, count: int, schedule: str) -> list[str]:
    """``count`` jobs stored in the GSI layout: the scheduling item in the ``due`` GSI
    (``due_pk``/``due_at``), no timer item."""
    table = harness.aws.table(harness.settings.jobs_table)
    ids = []
    with table.batch_writer() as batch:
        for _ in range(count):
            job = harness.job(schedule)
            state = harness.sched_for(job)
            assert state.due is not None
            old = replace(state, due=replace(state.due, lane=INDEX, position=None, version=None))
            item = layout.sched_item(old)
            assert "due_pk" in item and "timer_pk" not in item
            batch.put_item(Item=item)
            ids.append(job.id)
    return ids


def _in_gsi(harness: Any) -> int:
    table = harness.aws.table(harness.settings.jobs_table)
    return len(table.scan(IndexName="due")["Items"])


def test_a_deployment_moved_to_timer_items_mid_stream_runs_every_fire_exactly_once(harness: Any) -> None:
    # Given a deployment of the old layout (one due shard, so the test reads less), registered at T0 - 30 s:
    # jobs every minute, every 3 minutes, hourly (due at T0 = 10:00, then 11:00), daily at 03:00 (not due
    # today), and one-offs at 10:04
    harness.settings = harness.settings.model_copy(update={"due_shards": 1})
    harness.clock.now_ms = harness.T0 - 30_000
    every_minute = _old_layout(harness, 6, "* * * * *")
    every_3 = _old_layout(harness, 4, "*/3 * * * *")
    hourly = _old_layout(harness, 6, "0 * * * *")
    daily = _old_layout(harness, 12, "0 3 * * *")
    once = _old_layout(harness, 3, "at 2026-03-02T10:04:00Z")
    assert _in_gsi(harness) == 31
    store, bucket_ms = harness.jobs, harness.settings.due_bucket_s * 1000

    # When the new scheduler ticks every second for 14 minutes and, from 10:01:30, the sweeper makes one
    # migration pass a minute of at most 5 entries (the GSI's entries also leave it as their jobs fire)
    a = harness.contender("a")
    sent: Counter[tuple[str, int]] = Counter()
    passes = []
    for second in range(-25, 14 * 60):
        harness.run_seconds(a, 1)
        sent.update((m.job_id, m.scheduled_for) for m in harness.drain())
        if second >= 90 and second % 60 == 30:
            passes.append(store.repair.migrate_due_index(harness.clock, bucket_ms=bucket_ms, budget=5))

    # Then the passes moved what no fire moved, a few at a time, and marked the layout once the GSI had been
    # empty for five minutes
    # (the 12 daily jobs and the 3 one-offs due at 10:04: the others left the GSI as they fired)
    assert [p.moved for p in passes[:4]] == [5, 5, 5, 0]
    assert _in_gsi(harness) == 0
    assert [p.done for p in passes].index(True) == 8  # empty from the 4th pass (10:04:30), done at 10:09:30
    assert store.due_lanes() == TIMER_LANES
    table = harness.aws.table(harness.settings.jobs_table)
    states = table.scan(FilterExpression=Attr("sk").eq(layout.SCHED_SK))["Items"]
    assert all("timer_pk" in item and "due_pk" not in item for item in states if "due_at" in item)

    # And a new leader (the next invocation) reads the timer lanes only, and the fires go on
    a.lease.release()
    b = harness.contender("b")
    harness.run_seconds(b, 3 * 60)
    sent.update((m.job_id, m.scheduled_for) for m in harness.drain())
    queried = {args[0].lane for name, args, _ in b.recorder.calls if name == "query_due"}
    assert queried == set(TIMER_LANES)

    # And every fire from 10:00 to 10:16 was sent exactly once
    end = harness.T0 + 17 * MIN
    expected = Counter(
        {(job_id, harness.T0 + k * MIN): 1 for job_id in every_minute for k in range(17)}
        | {(job_id, harness.T0 + k * MIN): 1 for job_id in every_3 for k in range(0, 17, 3)}
        | {(job_id, harness.T0): 1 for job_id in hourly}
        | {(job_id, harness.T0 + 4 * MIN): 1 for job_id in once}
    )
    assert Counter({key: n for key, n in sent.items() if key[1] < end}) == expected
    assert not [key for key in sent if key[0] in daily]
    assert all(harness.sched(job_id)["due_at"] == harness.T0 + 17 * 3600_000 for job_id in daily)
    # (the stored layout item says so, for every later leader)
    assert table.get_item(Key=LAYOUT_KEY)["Item"]["timers_only"] is True
