"""The tick against moto, where DynamoDB itself is what is tested: the AWS requests per run, and a stored item
that no longer reads as a scheduling state. The tick's logic tests run on the fakes
(tests/unit/scheduler/test_tick.py)."""

from __future__ import annotations

from typing import Any

from jobsched.domain.due_reader import WATERMARK_MARGIN_MS
from jobsched.dynamodb import layout
from jobsched.dynamodb.due_index import LAYOUT_KEY
from jobsched.ports.jobs import HIGH_LANES


def test_requests_per_run_stay_under_target(harness: Any) -> None:
    # Given a deployment whose due index is all timer items (its GSI entries moved), and 100 jobs due in the
    # same second, a minute from now
    harness.aws.table(harness.settings.jobs_table).put_item(Item={**LAYOUT_KEY, "timers_only": True})
    harness.add_many(100, "1 10 * * *")
    a = harness.contender()
    harness.clock.now_ms = harness.T0 + 58_000
    assert harness.run_seconds(a, 1)[0].due == 0  # lease acquired, watermark loaded: an idle tick
    counts = harness.count_requests()

    # When the tick at T0+60 s runs all 100 (the lease, taken a second ago, needs no renewal yet)
    (result,) = harness.run_seconds(a, 1)

    # Then: no run row (a scheduled run's row is made by its worker's claim), 100 moves and their next timer
    # items in 4 batches of 25, 10 message batches of 10, one query per lane (early, late) and shard, and per high
    # lane of the high shard, for each of two buckets (the previous minute's stays open for the watermark margin), one consistent BatchGetItem of
    # the 100 scheduling items (planning never trusts the due index); the read positions were stored by the
    # tick before (at most every 5 s)
    assert result.created == 100 and result.enqueued == 100 and result.moved == 100
    assert counts["UpdateItem"] == 100 and counts["SendMessageBatch"] == 10
    assert counts["BatchWriteItem"] == 4
    assert counts["Query"] == 2 * (2 * harness.settings.due_shards + len(HIGH_LANES))
    assert counts["BatchGetItem"] == 1
    assert set(counts) == {"UpdateItem", "SendMessageBatch", "Query", "BatchGetItem", "BatchWriteItem"}
    # (1.35: the queries are per tick, not per run: 0.2 at 100 runs a tick, 0.02 at 1,000)
    assert sum(counts.values()) / 100 <= 1.35
    # And the renewal comes once less than half of the lease's validity is left: one in the next two ticks
    # (one write every three ticks instead of every tick)
    harness.run_seconds(a, 2)
    assert counts["UpdateItem"] == 101


def test_a_malformed_due_entry_is_logged_and_left_alone(harness: Any) -> None:
    job = harness.add("every 1 minute")
    table = harness.aws.table(harness.settings.jobs_table)
    table.update_item(
        Key={"pk": layout.job_pk(job.id), "sk": layout.SCHED_SK},
        UpdateExpression="SET missed = :bad",
        ExpressionAttributeValues={":bad": "sometimes"},
    )
    good = harness.add("every 1 minute")
    a = harness.contender()
    (result,) = harness.run_seconds(a, 1)
    assert result.malformed == 1 and result.created == 1 and result.errors == 0
    assert harness.runs_of(job.id) == [] and len(harness.runs_of(good.id)) == 1
    # It does not hold the watermark back once its bucket is over
    harness.clock.now_ms = harness.T0 + 5 * 60_000
    (later,) = harness.run_seconds(a, 1)
    assert later.watermark == (harness.clock() - WATERMARK_MARGIN_MS) // 60_000
