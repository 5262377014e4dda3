"""The scale simulation's model (bench/scale_sim.py): the per-key write budget and its back-off, the simulated
clock and executor's latency accounting, and a tiny rush whose every figure is worked out by hand."""

from __future__ import annotations

import pytest

from bench.scale_sim import (
    ENQUEUE_TARGET_S,
    LAMBDA_MB_PER_VCPU,
    MIDNIGHT_MS,
    READ_CPU_MS_PER_ENTRY,
    Latencies,
    Model,
    Rush,
    SimClock,
    SimExecutor,
    Throttled,
    lag_samples,
    meets_targets,
    percentile,
    recommend,
    simulate,
    sweep_weight,
)

NO_LATENCY = Latencies(
    put_ms=0, update_ms=0, batch_get_ms=0, query_ms=0, query_item_ms=0, sqs_batch_ms=0, control_ms=0
)


# --- throttling at 1,000 write units per second per key ----------------------------------------------


def test_a_key_takes_1000_units_a_second_and_the_next_write_backs_off_into_the_next_second() -> None:
    clock = SimClock(0)
    model = Model(clock)
    for _ in range(1000):
        model.call("PutItem", 0.1, [("hot", 1.0)])
    assert model.throttles == 0
    assert clock.now == pytest.approx(100.0)
    # 1,001st unit in second 0: refused at 100.1 ms, backs off 500 ms (half of base 1 s), refused again at
    # 600.2 ms, backs off 1,000 ms, accepted at 1,600.3 ms in second 1
    model.call("PutItem", 0.1, [("hot", 1.0)])
    assert model.throttles == 2
    assert clock.now == pytest.approx(1600.3)
    assert model.used[("hot", 0)] == 1000
    assert model.used[("hot", 1)] == 1
    assert model.requests["PutItem"] == 1003  # 1,000 + the three attempts of the 1,001st
    assert model.hottest() == ("hot", 1000)


def test_a_write_refused_on_every_attempt_raises_throttled_naming_the_key() -> None:
    clock = SimClock(0)
    model = Model(clock, key_wcu_per_s=1, max_attempts=2, backoff_base_ms=100)
    model.call("UpdateItem", 1, [("cold", 1.0), ("gsi", 1.0)])
    with pytest.raises(Throttled) as raised:
        model.call("UpdateItem", 1, [("cold2", 1.0), ("gsi", 1.0)])
    assert raised.value.key == "gsi"
    # 1 + (1 + 50 back-off + 1): the refused write charged no key, not even the one with room
    assert clock.now == pytest.approx(53)
    assert model.used.get(("cold2", 0), 0) == 0


def test_keys_have_budgets_of_their_own() -> None:
    model = Model(SimClock(0), key_wcu_per_s=2)
    for key in ("a", "a", "b", "b"):
        model.call("PutItem", 1, [(key, 1.0)])
    assert model.throttles == 0


# --- latency accounting -----------------------------------------------------------------------------


def test_the_executor_runs_a_batch_on_parallel_lanes_of_simulated_time() -> None:
    clock = SimClock(1000)
    pool = SimExecutor(clock, workers=2)
    starts: list[float] = []

    def request(ms: float) -> float:
        starts.append(clock.now)
        clock.advance(ms)
        return clock.now

    futures = [pool.submit(request, ms) for ms in (10, 30, 10, 10)]
    assert clock.now == 1000  # the caller has not waited yet
    # lanes: [10, 10] on lane 0 after the 30 ms one... lane 0: 10 -> 20 -> 30; lane 1: 30
    assert starts == [1000, 1000, 1010, 1020]
    assert [f.result() for f in futures] == [1010, 1030, 1020, 1030]
    assert clock.now == 1030  # the longest lane, not the 60 ms sum
    # the next batch starts from the caller's time
    assert pool.submit(request, 5).result() == 1035


def test_the_executor_hands_a_task_error_to_the_waiter() -> None:
    pool = SimExecutor(SimClock(0), workers=4)

    def boom() -> None:
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        pool.submit(boom).result()
    assert list(pool.map(lambda x: x * 2, [1, 2, 3])) == [2, 4, 6]


def test_each_request_advances_the_clock_by_its_latency() -> None:
    clock = SimClock(0)
    model = Model(clock, Latencies(put_ms=5))
    model.call("PutItem", model.latencies.put_ms)
    model.call("Query", 6 + 0.02 * 500)
    assert clock.now == pytest.approx(21)
    assert dict(model.requests) == {"PutItem": 1, "Query": 1}


def test_the_schedulers_cpu_serves_one_request_at_a_time_at_its_share_of_a_vcpu() -> None:
    clock = SimClock(0)
    model = Model(clock, vcpu=0.5)
    pool = SimExecutor(clock, workers=4)
    ends = [
        f.result()
        for f in [pool.submit(lambda: (model.call("PutItem", 10, cpu_ms=1), clock.now)[1]) for _ in range(3)]
    ]
    # 2 ms of CPU each at half a vCPU, one after another (the GIL), then 10 ms of waiting each, in parallel
    assert ends == [12, 14, 16]
    model.owner = 1  # another partition's scheduler has a CPU of its own
    clock.now = 0
    model.call("PutItem", 10, cpu_ms=1)
    assert clock.now == 12
    assert model.cpu_busy_ms == 8


def test_a_tiny_rush_on_a_tenth_of_a_vcpu_is_bound_by_the_schedulers_cpu() -> None:
    """10 runs at 0.75 ms of CPU per move on a tenth of a vCPU (every latency 0): the batch goes out once the
    query's 10 entries are read (``READ_CPU_MS_PER_ENTRY`` each: 1.5 ms at a tenth of a vCPU; no write comes
    before it: a scheduled run's row is made by its worker's claim), then the 10 moves take 75 ms of the
    scheduler's CPU one after another, however many threads."""
    result = simulate(
        Rush(10, jittered_share=0),
        partitions=1,
        shards=1,
        latencies=NO_LATENCY,
        scheduler_memory_mb=round(LAMBDA_MB_PER_VCPU / 10),
    )
    read_ms = 10 * READ_CPU_MS_PER_ENTRY * 10
    assert result["enqueue_non_jittered_s"] == pytest.approx(read_ms / 1000, abs=0.001)
    assert result["created"] == 10
    assert "PutItem" not in result["requests"] and result["requests"]["UpdateItem"] == 10
    # busy CPU ms (the read, then the 10 moves, 7.5 ms each at a tenth of a vCPU) over the enqueue span (the
    # read's 1.5 ms, floored at 1 ms)
    assert result["scheduler_cpu_busy"] == pytest.approx(
        (read_ms + 10 * 0.75 * 10) / max(1.0, read_ms), abs=0.1
    )


def test_lag_is_the_age_of_the_oldest_due_run_not_yet_enqueued() -> None:
    dispatch = {"a": 0, "b": 500, "c": 5000}
    enqueued = {"a": 100.0, "b": 2100.0, "c": 5000.0}
    # samples at 0, 1000, 2000, 3000, 4000, 5000: a due and waiting at 0 (0 ms), b waiting at 1000 and 2000
    assert lag_samples(dispatch, enqueued, start_ms=0) == [0, 500, 1500, 0, 0, 0]


def test_percentile_is_nearest_rank() -> None:
    assert percentile([5, 1, 3, 2, 4], 0.5) == 3
    assert percentile(list(range(1, 101)), 0.99) == 99
    assert percentile([], 0.99) == 0


def test_one_partition_stands_for_the_partitions_sharing_its_sweep_keys() -> None:
    assert sweep_weight(4, None) == 1
    assert sweep_weight(4, 0) == 1  # 4 partitions split the 16 sweep keys 4 ways: no key shared
    assert sweep_weight(3, 0) == 3  # 3 and 16 coprime: every partition writes every key
    assert sweep_weight(6, 0) == 3
    assert sweep_weight(32, 0) == 2


def test_a_scaled_rush_keeps_its_arrival_rates() -> None:
    rush = Rush(1_000_000, jitter_s=600)
    small = rush.scaled(10)
    assert (small.runs, small.jitter_s) == (100_000, 60)
    assert (
        small.runs * small.jittered_share / small.jitter_s == rush.runs * rush.jittered_share / rush.jitter_s
    )
    jobs = Rush(4, jitter_s=2).jobs()
    assert jobs == [
        ("j_000000000000", None),
        ("j_000000000001", 500),
        ("j_000000000002", None),
        ("j_000000000003", 1500),
    ]


# --- a tiny rush, by hand ---------------------------------------------------------------------------


def test_a_tiny_rush_matches_the_hand_computation() -> None:
    """20 jobs, 1 partition, 1 shard, every latency 0 but SQS's 100 ms. The 10 non-jittered are due at 00:00:00
    and go in one batch at the 00:00:00 tick: enqueued at 0.1 s. The 10 jittered have offsets 0.5, 1.5, ...,
    9.5 s: each is found by the tick of the next whole second and enqueued 0.1 s later, the last at 10.1 s,
    0.6 s after its instant. Each move files the job's next timer item under tomorrow's early timer key (one
    BatchWriteItem a tick): 10 units in second 0, one a second after. The scheduler lags 0.5 s at each of the
    seconds 1-10."""
    result = simulate(
        Rush(20, jitter_s=10),
        partitions=1,
        shards=1,
        latencies=Latencies(
            put_ms=0,
            update_ms=0,
            batch_write_ms=0,
            batch_get_ms=0,
            query_ms=0,
            query_item_ms=0,
            sqs_batch_ms=100,
            control_ms=0,
        ),
        scheduler_memory_mb=None,
    )
    assert result["runs"] == 20
    assert result["created"] == 20
    assert result["enqueue_non_jittered_s"] == 0.1
    assert result["enqueue_all_s"] == 10.1
    assert result["hottest_key_wcu_per_s"] == 10
    assert result["hottest_key"] == "p0#b29980800#s0#early"  # tomorrow's bucket, the early lane
    assert result["throttled_requests"] == 0
    assert result["dispatch_lateness_ms"] == {"p50": 100, "p99": 600}
    assert result["scheduler_lag_ms_p99"] == 500
    assert result["peak_enqueue_runs_per_s"] == 10
    assert result["lambda_concurrency"] == 10
    assert "PutItem" not in result["requests"]  # a scheduled run's row is made by its worker's claim
    assert result["requests"]["UpdateItem"] == 20
    assert result["requests"]["BatchWriteItem"] == 11
    assert result["requests"]["SendMessageBatch"] == 11
    assert MIDNIGHT_MS // 60_000 == 29979360


def test_a_throttled_filing_of_next_entries_backs_off_and_every_run_is_created_once() -> None:
    """With 4 units a second per key, the 10 next timer items of the 00:00 tick cannot all land: the key takes 4
    a second, the rest come back unprocessed and are sent again after a back-off, and the key never takes more
    than its budget."""
    result = simulate(
        Rush(10, jittered_share=0),
        partitions=1,
        shards=1,
        latencies=NO_LATENCY,
        key_wcu_per_s=4,
        scheduler_memory_mb=None,
    )
    assert result["throttled_requests"] > 0
    assert result["created"] == 10
    assert result["enqueue_non_jittered_s"] == 0.0
    assert result["hottest_key_wcu_per_s"] == 4
    assert result["requests"]["BatchWriteItem"] == 3


def test_meets_targets_and_recommend() -> None:
    def row(
        p: int, s: int, factor: float, done: float | None, hot: float, throttled: int = 0
    ) -> dict[str, object]:
        result = {
            "partitions": p,
            "due_shards": s,
            "latency_factor": factor,
            "enqueue_non_jittered_s": done,
            "hottest_key_wcu_per_s": hot,
            "throttled_requests": throttled,
        }
        result["meets_targets"] = meets_targets(result)
        return result

    target = ENQUEUE_TARGET_S
    rows = [
        row(2, 2, 1.0, 0.9 * target, 500),
        row(2, 2, 1.5, 1.3 * target, 400),  # too slow on a slower day
        row(4, 1, 1.0, 0.6 * target, 1000),
        row(4, 1, 1.5, 0.75 * target, 900, throttled=3),
        row(4, 2, 1.0, 0.6 * target, 550),
        row(4, 2, 1.5, 0.95 * target, 450),
        row(8, 2, 1.0, 0.3 * target, 550),
        row(8, 2, 1.5, 0.45 * target, 450),
    ]
    assert [r["meets_targets"] for r in rows] == [True, False, True, False, True, True, True, True]
    assert recommend(rows) == (4, 2)
    assert recommend(rows[:4]) is None
    assert not meets_targets(
        {"enqueue_non_jittered_s": None, "hottest_key_wcu_per_s": 0, "throttled_requests": 0}
    )


def test_a_rush_cut_short_extrapolates_the_non_jittered_drain_from_its_rate() -> None:
    """3,000 non-jittered runs, 1,000 a tick (``TickLimits.max_jobs``), no latency, stopped after 1.5 s: the ticks
    at 0 s and 1 s enqueued 2,000 by 1.0 s, so 2,000 runs/s and 3,000 / 2,000 = 1.5 s (the real answer, 2.0 s,
    comes from the tick cadence, which a drain of hundreds of ticks averages out)."""
    result = simulate(
        Rush(3000, jittered_share=0),
        partitions=1,
        shards=1,
        latencies=NO_LATENCY,
        scheduler_memory_mb=None,
        horizon_s=1.5,
    )
    assert result["non_jittered_extrapolated"] is True
    assert result["non_jittered_drain_runs_per_s"] == 2000
    assert result["enqueue_non_jittered_s"] == 1.5
    assert result["scheduler_lag_ms_p99"] is None
    assert result["enqueue_all_s"] is None
    assert result["created"] == 2000
