"""Lateness by priority and owner in the metrics, with a bounded number of owners (design §8,
``jobsched.domain.lateness``): the top owners by backlog keep their name, every other owner is ``other``; the
tick labels each run's message; the leader saves a summary at most once a minute. On the in-memory fakes with
the injected clock."""

from __future__ import annotations

import logging
import random
from typing import Any

import pytest

from jobsched.aws.lateness import JsonLateness
from jobsched.domain.lateness import (
    LATENESS_SAVE_MS,
    TOP_OWNER_MIN_BACKLOG,
    TOP_OWNERS,
    Histogram,
    LatenessBoard,
    backlog_of,
    labels_for,
    top_owners,
)
from jobsched.domain.planning import TickLimits
from jobsched.memory.control import MemoryControlStore
from jobsched.models import Priority
from jobsched.ports.lateness import OTHER_OWNERS, LatenessLabels

# --- the top owners and the labels -------------------------------------------------------------------------------


def test_the_top_owners_are_the_k_largest_backlogs_of_at_least_the_minimum_largest_first_ties_by_name() -> (
    None
):
    backlog = {"big": 900, "mid-b": 300, "mid-a": 300, "small": 150, "tiny": 99, "": 5_000}

    assert top_owners(backlog, k=3, min_backlog=100) == ("big", "mid-a", "mid-b")
    assert top_owners(backlog, k=10, min_backlog=100) == (
        "big",
        "mid-a",
        "mid-b",
        "small",
    )  # not tiny, not ""
    assert top_owners(backlog, k=10, min_backlog=1_000) == ()


def test_an_owner_named_like_the_other_owners_label_is_never_named_and_counts_among_them() -> None:
    """An owner called ``other`` (a team tag, a token's owner) with the largest backlog: naming it would give its
    label to every other owner's runs too, so ``GET /health`` would show them all as its own and the other
    owners' line empty. It is counted among the others instead."""
    backlog = {OTHER_OWNERS: 5_000, "big": 900}
    assert top_owners(backlog, k=10, min_backlog=100) == ("big",)
    board, _ = _board()
    board.record(0, 1, [(LatenessLabels("normal", OTHER_OWNERS), 100)], [(OTHER_OWNERS, 5_000), ("big", 900)])

    summary = board.summary(1_000, 1)

    assert summary.backlog == (("big", 900),)


def test_backlog_of_counts_each_due_job_under_its_owner_and_jobs_without_one_under_the_empty_owner() -> None:
    assert backlog_of(["a", "b", "a", None, ""]) == {"a": 2, "b": 1, "": 2}


def test_a_named_owner_keeps_its_name_and_every_other_owner_is_other() -> None:
    top = ("big",)

    assert labels_for("high", "big", top) == LatenessLabels("high", "big")
    assert labels_for("normal", "small", top) == LatenessLabels("normal", OTHER_OWNERS)
    assert labels_for("low", None, top) == LatenessLabels("low", OTHER_OWNERS)


def test_however_many_owners_a_tick_has_its_labels_are_at_most_three_times_k_plus_one() -> None:
    # Given ticks whose backlogs spread 3 priorities over 5,000 owners, some of them with thousands of jobs
    rng = random.Random(7)
    for _ in range(20):
        owners = [f"team-{rng.randrange(5_000)}" for _ in range(20_000)]
        owners += [f"big-{rng.randrange(40)}" for _ in range(20_000)]
        top = top_owners(backlog_of(owners))

        # When every job is labelled, whatever its priority
        labels = {labels_for(rng.choice(list(Priority)).value, owner, top) for owner in owners}

        # Then there are at most 3 x (K + 1) distinct labels, the named owners among those with a backlog
        assert len(top) <= TOP_OWNERS
        assert len(labels) <= 3 * (TOP_OWNERS + 1)
        assert {lb.owner for lb in labels} - {OTHER_OWNERS} <= set(top)
        assert all(owners.count(owner) >= TOP_OWNER_MIN_BACKLOG for owner in top)


# --- the histogram -----------------------------------------------------------------------------------------------


def test_the_histograms_quantiles_are_at_most_5_percent_above_the_exact_ones_and_never_above_the_maximum() -> (
    None
):
    rng = random.Random(3)
    values = [int(rng.lognormvariate(7, 2)) for _ in range(5_000)] + [0, 0, 1]
    histogram = Histogram()
    for value in values:
        histogram.add(value)
    ordered = sorted(values)

    for q in (0.5, 0.9, 0.99, 1.0):
        exact = ordered[max(1, -(-int(q * 1000) * len(ordered) // 1000)) - 1]
        assert exact <= histogram.quantile(q) <= max(exact * 1.05 + 1, exact)
    figures = histogram.figures()
    assert figures.runs == len(values) and figures.max_ms == max(values) and figures.p99_ms <= figures.max_ms


def test_an_empty_histogram_has_no_quantile() -> None:
    with pytest.raises(ValueError):
        Histogram().quantile(0.5)


# --- the board ---------------------------------------------------------------------------------------------------


def _board(store: Any = None) -> tuple[LatenessBoard, MemoryControlStore]:
    control = store or MemoryControlStore()
    return LatenessBoard(0, control, JsonLateness()), control


def test_the_board_saves_once_a_minute_of_dispatches_and_not_while_idle() -> None:
    board, control = _board()
    high, other = LatenessLabels("high", "big"), LatenessLabels("normal", OTHER_OWNERS)

    assert not board.record(0, 1, [(high, 10)], [("big", 500)])
    assert not board.record(LATENESS_SAVE_MS - 1, 1, [(other, 30)], [])
    assert board.record(LATENESS_SAVE_MS, 1, [(other, 50)], [("big", 700)])

    summary = JsonLateness().decode(control.read_lateness(0) or "")
    assert (summary.since_ms, summary.at_ms, summary.term) == (0, LATENESS_SAVE_MS, 1)
    assert [(lb, f.runs, f.max_ms) for lb, f in summary.groups] == [(high, 1, 10), (other, 2, 50)]
    assert [(p, f.runs) for p, f in summary.priorities] == [("high", 1), ("normal", 2)]
    assert summary.backlog == (("big", 700),)
    # an idle minute (no run dispatched) saves nothing
    assert not board.record(3 * LATENESS_SAVE_MS, 1, [], [])
    assert control.read_lateness(0) == JsonLateness().encode(summary)


def test_the_board_names_at_most_k_owners_folding_the_rest_into_other() -> None:
    board, _ = _board()
    owners = [f"team-{i:02d}" for i in range(TOP_OWNERS + 5)]
    for i, owner in enumerate(owners):  # each owner the top one in its own tick, team-14 with the most
        board.record(i, 1, [(LatenessLabels("normal", owner), 100 + i)], [(owner, 200 + i)])

    summary = board.summary(1_000, 1)

    named = [lb.owner for lb, _ in summary.groups if lb.owner != OTHER_OWNERS]
    assert named == sorted(owners[-TOP_OWNERS:]) and len(summary.backlog) == TOP_OWNERS
    folded = dict(summary.groups)[LatenessLabels("normal", OTHER_OWNERS)]
    assert folded.runs == 5 and folded.max_ms == 104


def test_a_failed_save_is_logged_and_its_figures_kept_for_the_next_tick(
    caplog: pytest.LogCaptureFixture,
) -> None:
    board, control = _board()
    labels = LatenessLabels("low", OTHER_OWNERS)
    board.record(0, 1, [(labels, 3)], [])
    control.fail_next.append(RuntimeError("throttled"))

    with caplog.at_level(logging.WARNING, logger="jobsched.domain.lateness"):
        assert not board.record(LATENESS_SAVE_MS, 1, [(labels, 5)], [])
    assert control.read_lateness(0) is None
    assert "lateness summary not saved" in caplog.text

    assert board.record(LATENESS_SAVE_MS + 1_000, 1, [(labels, 7)], [])
    saved = JsonLateness().decode(control.read_lateness(0) or "")
    assert dict(saved.groups)[labels].runs == 3 and saved.since_ms == 0


# --- the tick ----------------------------------------------------------------------------------------------------


def test_the_tick_labels_each_run_by_priority_and_names_only_owners_with_a_top_backlog(harness: Any) -> None:
    # Given a noisy owner with 150 jobs due at T0, a quiet one with 3 (one of them high), all registered 30 s before
    harness.clock.now_ms = harness.T0 - 30_000
    noisy = harness.add_many(150, "* * * * *", owner="noisy")
    quiet = harness.add_many(2, "* * * * *", owner="quiet")
    quiet_high = harness.add_many(1, "* * * * *", owner="quiet", priority=Priority.HIGH)
    harness.clock.now_ms = harness.T0
    a = harness.contender(limits=TickLimits(threads=1))

    # When a tick dispatches them
    [result] = harness.run_seconds(a, 1)
    sent = harness.drain()

    # Then each message carries its run's labels: the noisy owner by name, the quiet one as other
    labels = {m.job_id: m.labels for m in sent}
    assert {labels[j] for j in noisy} == {LatenessLabels("normal", "noisy")}
    assert {labels[j] for j in quiet} == {LatenessLabels("normal", OTHER_OWNERS)}
    assert labels[quiet_high[0]] == LatenessLabels("high", OTHER_OWNERS)
    assert result.top_owners == (("noisy", 150),)
    # and the tick's dispatch lateness comes per label, one value per new run
    assert sorted(lb.owner for lb, _ in result.labelled_lateness) == sorted(
        ["noisy"] * 150 + [OTHER_OWNERS] * 3
    )
    assert len(result.labelled_lateness) == len(result.dispatch_lateness_ms) == 153


def test_the_loop_saves_the_partitions_summary_after_a_minute_of_ticks(harness: Any) -> None:
    # Given a noisy owner's 120 jobs every minute and a loop with a board on the control store
    harness.clock.now_ms = harness.T0 - 30_000
    harness.add_many(120, "* * * * *", owner="noisy")
    harness.clock.now_ms = harness.T0 - 1_000
    a = harness.contender(limits=TickLimits(threads=1))
    a.loop.board = LatenessBoard(0, harness.control, JsonLateness())

    # When it ticks for a minute and a bit
    harness.run_seconds(a, 62)

    # Then the summary names the noisy owner with its backlog and the lateness of its 120 + 120 runs
    summary = JsonLateness().decode(harness.control.read_lateness(0) or "")
    assert summary.backlog == (("noisy", 120),)
    assert [(lb, f.runs) for lb, f in summary.groups] == [(LatenessLabels("normal", "noisy"), 240)]
    assert summary.at_ms - summary.since_ms >= LATENESS_SAVE_MS


# --- the stored form ---------------------------------------------------------------------------------------------


def test_a_summary_is_stored_as_json_and_read_back_whole() -> None:
    board, _ = _board()
    board.record(
        5, 3, [(LatenessLabels("high", "big"), 10), (LatenessLabels("low", OTHER_OWNERS), 99)], [("big", 120)]
    )
    summary = board.summary(LATENESS_SAVE_MS, 3)

    assert JsonLateness().decode(JsonLateness().encode(summary)) == summary


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        "[]",
        '{"partition": 0, "since": 0, "at": 1, "term": 1, "groups": [], "priorities": []}',  # no backlog
        '{"partition": 0, "since": 0, "at": 1, "term": 1, "groups": [["high", "a", 1, 2, 3]], "priorities": [],'
        ' "backlog": []}',  # a group short of a figure
        '{"partition": 0, "since": "0", "at": 1, "term": 1, "groups": [], "priorities": [], "backlog": []}',
        '{"partition": 0, "since": 0, "at": 1, "term": true, "groups": [], "priorities": [], "backlog": []}',
    ],
)
def test_text_no_board_wrote_is_not_a_summary(text: str) -> None:
    with pytest.raises(ValueError, match="not a stored lateness summary"):
        JsonLateness().decode(text)


def test_idle_ticks_do_not_widen_the_window_it_begins_at_the_first_dispatch() -> None:
    board, control = _board()
    labels = LatenessLabels("normal", OTHER_OWNERS)
    for second in range(3 * 60):  # three idle minutes
        assert not board.record(second * 1_000, 1, [], [])

    assert not board.record(200_000, 1, [(labels, 10)], [])
    assert board.record(200_000 + LATENESS_SAVE_MS, 1, [(labels, 20)], [])

    summary = JsonLateness().decode(control.read_lateness(0) or "")
    assert (summary.since_ms, summary.at_ms) == (200_000, 200_000 + LATENESS_SAVE_MS)
