"""The rush-to-start model (bench/rush_fair.py): the scenario's owners and priorities, the worker side's
concurrency, batches, fair queue and runs-table budget worked out by hand, the jobs table's table-level write
budget, and a small rush end to end (high first, fairness keeps the small owners' starts far ahead of the big
owner's). Simulated time only: no wall-time assertion."""

from __future__ import annotations

from dataclasses import replace

import pytest

from bench.rush_fair import (
    BIG_OWNER,
    Config,
    FairRush,
    Workers,
    run_config,
    start_runs,
    weighted_percentile,
)
from bench.scale_sim import TABLE_KEY, Model, Rush, SimClock, Throttled
from jobsched.models import Priority

# one invocation lasts 1 s (0 overhead + 1 s target), its targets start at receipt, no cold start
PLAIN = Workers(
    maximum_concurrency=None,
    initial_concurrency=1,
    ramp_per_minute=0.0,
    overhead_s=0.0,
    before_target_s=0.0,
    target_s=1.0,
    cold_start_s=0.0,
    runs_table_wcu_per_s=None,
    fair_queue=False,
)


def starts(runs: list[tuple[float, float, str, bool, float]], workers: Workers) -> list[float]:
    return [round(s, 3) for s, _ in start_runs(runs, workers)]


def test_one_invocation_takes_a_batch_of_10_and_frees_its_slot_when_its_slowest_target_ends() -> None:
    runs = [(0.0, 0.0, "a", False, 1.0) for _ in range(25)]
    # one slot: runs 0-9 at 0 s, 10-19 at 1 s, 20-24 at 2 s
    assert starts(runs, PLAIN) == [0.0] * 10 + [1.0] * 10 + [2.0] * 5


def test_a_run_waits_for_its_enqueue_and_a_start_adds_the_hand_off_and_a_new_environments_cold_start() -> (
    None
):
    workers = replace(PLAIN, before_target_s=0.1, cold_start_s=0.5, overhead_s=0.2)
    first, again = starts([(0.0, 0.0, "a", False, 1.0), (3.0, 0.0, "a", False, 1.0)], workers)
    assert first == pytest.approx(0.6)  # 0 + 0.5 cold + 0.1
    assert again == pytest.approx(3.1)  # the environment exists: no cold start


def test_the_event_source_ramps_its_concurrency_while_messages_wait() -> None:
    # 5 at first, +60 a minute = +1 a second; 10 runs a slot-second
    workers = replace(PLAIN, initial_concurrency=5, ramp_per_minute=60.0)
    result = starts([(0.0, 0.0, "a", False, 1.0) for _ in range(200)], workers)
    # second 0: the first step already ramps (5.05 slots: 5 invocations), so 50 start at 0
    assert result.count(0.0) == 50
    # 6 slots from 0.95 s (5 + 19 steps of 0.05): 10 more then, and the first 5 slots' 50 again at 1 s
    assert result.count(0.95) == 10
    assert result.count(1.0) == 50
    capped = replace(workers, maximum_concurrency=5)
    assert starts([(0.0, 0.0, "a", False, 1.0) for _ in range(100)], capped).count(1.0) == 50


def test_a_batching_window_holds_a_short_batch_until_its_oldest_message_is_that_old() -> None:
    # batches of 20 with a 1-s window: 3 runs alone wait out the window; 25 at once go as a full batch at once,
    # and their 5 left over wait for the window (from their enqueue at 0)
    workers = replace(PLAIN, initial_concurrency=2, batch_size=20, batching_window_s=1.0)
    assert starts([(0.0, 0.0, "a", False, 1.0) for _ in range(3)], workers) == [1.0] * 3
    assert starts([(0.0, 0.0, "a", False, 1.0) for _ in range(25)], workers) == [0.0] * 20 + [1.0] * 5
    assert (
        starts([(0.0, 0.0, "a", False, 1.0) for _ in range(3)], replace(workers, batching_window_s=0.0))
        == [0.0] * 3
    )


def test_the_ceiling_is_the_least_of_the_mode_the_maximum_concurrency_and_the_accounts_share() -> None:
    assert Workers().ceiling == 50
    assert Workers(maximum_concurrency=None).ceiling == 998  # 1,000 less the scheduler's 2 reserved
    assert Workers(maximum_concurrency=None, account_concurrency=5_000).ceiling == 1_250


def test_the_runs_table_budget_caps_starts_at_half_its_units_a_second() -> None:
    workers = replace(PLAIN, initial_concurrency=100, runs_table_wcu_per_s=20.0)
    result = starts([(0.0, 0.0, "a", False, 1.0) for _ in range(25)], workers)
    assert result == [0.0] * 10 + [1.0] * 10 + [2.0] * 5  # 10 runs (20 units) a second


def test_fair_queue_delivers_a_quiet_owner_before_a_noisy_owners_backlog() -> None:
    # "big" has 400 waiting at 0; "small" 10 enqueued at 0.5 s; 4 slots of 10: 40 runs a second
    big = [(0.0, 0.0, BIG_OWNER, False, 1.0) for _ in range(400)]
    small = [(0.5, 0.0, "team-01", False, 1.0) for _ in range(10)]
    workers = replace(PLAIN, initial_concurrency=4)
    fifo = starts(big + small, workers)
    fair = starts(big + small, replace(workers, fair_queue=True))
    assert fifo[-10:] == [10.0] * 10  # behind the whole backlog
    # big holds 40 in flight (100 %, >= 30): noisy; the small owner takes the first slot freed at 1 s
    assert fair[-10:] == [1.0] * 10
    assert max(fair[:400]) == 10.0  # the big owner loses one batch's time, not more


def test_an_owner_with_fewer_than_30_in_flight_is_not_noisy() -> None:
    big = [(0.0, 0.0, BIG_OWNER, False, 1.0) for _ in range(100)]
    small = [(0.5, 0.0, "team-01", False, 1.0) for _ in range(10)]
    workers = replace(PLAIN, initial_concurrency=2, fair_queue=True)  # 20 in flight at most
    result = starts(big + small, workers)
    assert result[-10:] == [5.0] * 10  # FIFO: after the big owner's 100


def test_weights_stand_for_many_runs_alike() -> None:
    assert starts([(0.0, 0.0, "a", False, 20.0)], PLAIN) == [0.5]  # 10 at 0 s and 10 at 1 s
    assert weighted_percentile([(1.0, 1.0), (5.0, 99.0)], 0.99) == 5.0
    assert weighted_percentile([(1.0, 99.0), (5.0, 1.0)], 0.99) == 1.0
    assert weighted_percentile([], 0.5) is None


def test_the_scenario_gives_90_percent_to_one_owner_and_spreads_99_small_owners_and_high_over_the_jitter() -> (
    None
):
    scenario = FairRush(Rush(20_000, jitter_s=60.0), high=100)
    jobs = scenario.rush.jobs()
    owners = [scenario.owner(i) for i in range(len(jobs))]
    assert owners.count(BIG_OWNER) == 18_000
    assert len(set(owners)) == 100
    high = [i for i in range(len(jobs)) if scenario.priority(i, 20_000) is Priority.HIGH]
    assert len(high) == 100
    assert all(owners[i] != BIG_OWNER for i in high)
    assert sum(1 for i in high if jobs[i][1] is None) == 50  # half of them jittered
    small_plain = [i for i, o in enumerate(owners) if o != BIG_OWNER and jobs[i][1] is None]
    assert len(small_plain) == 1_000


def test_the_jobs_table_budget_throttles_once_the_whole_table_is_full() -> None:
    model = Model(SimClock(0), key_wcu_per_s=1000, max_attempts=1)
    model.table_wcu_per_s = 3
    for key in ("a", "b", "c"):
        model.call("UpdateItem", 1, [(key, 1.0), (TABLE_KEY, 1.0)])
    with pytest.raises(Throttled) as raised:
        model.call("UpdateItem", 1, [("d", 1.0), (TABLE_KEY, 1.0)])
    assert raised.value.key == TABLE_KEY
    assert model.hottest() == ("a", 1.0)  # the table's own key is no partition key


def test_a_batch_write_leaves_unprocessed_the_items_the_table_has_no_units_left_for() -> None:
    model = Model(SimClock(0))
    model.table_wcu_per_s = 5
    accepted, unprocessed = model.batch("BatchWriteItem", 1, list("abcd"), key=lambda k: k, table_units=2.0)
    assert accepted == ["a", "b"] and unprocessed == ["c", "d"]  # 2 units each: the third would make 6
    assert model.used[(TABLE_KEY, 0)] == 4 and model.throttles == 1


SMALL = Config(
    "small",
    partitions=1,
    shards=2,
    scheduler_memory_mb=1769,
    jobs_table_wcu_per_s=None,
    workers=Workers(maximum_concurrency=20, initial_concurrency=20, runs_table_wcu_per_s=None),
)


def test_a_small_rush_end_to_end_starts_high_first_and_keeps_small_owners_far_ahead_of_the_big_one() -> None:
    scenario = FairRush(Rush(4_000, jitter_s=20.0), high=100)
    fair = run_config(SMALL, scenario, fair=True, scale=1.0)
    unfair = run_config(SMALL, scenario, fair=False, scale=1.0)
    assert fair["not_enqueued"] == 0 and fair["throttled_requests"] == 0
    p99 = {name: fair[name]["start_lateness_s"]["p99"] for name in ("high", "small_owners", "big_owner")}
    assert fair["high"]["runs"] == 100 and fair["small_owners"]["runs"] == 150
    assert p99["high"] < p99["big_owner"] / 4 and p99["small_owners"] < p99["big_owner"] / 4
    # high first: every non-jittered high run is out with the first batches
    assert fair["high"]["start_lateness_s"]["p50"] <= fair["small_owners"]["start_lateness_s"]["p50"]
    # a jittered high run arriving mid-rush waits for the next freed slot (an invocation's length at most)
    assert p99["high"] <= p99["small_owners"] + SMALL.workers.overhead_s + SMALL.workers.target_s
    assert unfair["high"]["start_lateness_s"]["p99"] > 3 * p99["high"]
    # without fairness the small owners wait behind the big owner's backlog
    assert unfair["small_owners"]["start_lateness_s"]["p99"] > 3 * p99["small_owners"]
    # fairness costs the big owner little
    assert p99["big_owner"] <= 1.2 * unfair["big_owner"]["start_lateness_s"]["p99"]
    assert fair["all"]["runs"] == 4_000
