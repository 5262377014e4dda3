"""``GET /health`` (as the metrics, design §8): the scheduler's dispatch lateness per priority, for the top owners
by backlog (another owner's name hidden) and for every other owner, from the partitions' saved lateness
summaries. On the fakes."""

from __future__ import annotations

from typing import Any

from jobsched.aws.lateness import JsonLateness
from jobsched.clock import iso_utc
from jobsched.domain.lateness import LATENESS_SAVE_MS, TOP_OWNERS, LatenessBoard
from jobsched.ports.lateness import OTHER_OWNERS, LatenessFigures, LatenessLabels, LatenessSummary
from tests.support.api import NOW_MS


def _save(
    http: Any, partition: int, ticks: list[tuple[list[tuple[LatenessLabels, int]], list[tuple[str, int]]]]
):
    """Feed ``ticks`` (labelled lateness, top owners) to partition ``partition``'s board a second apart from
    ``NOW_MS``, then save its summary a minute later."""
    board = LatenessBoard(partition, http.backend.control, JsonLateness())
    for second, (labelled, top) in enumerate(ticks):
        board.record(NOW_MS + second * 1000, 1, labelled, top)
    assert board.record(NOW_MS + LATENESS_SAVE_MS, 1, [], [])


def test_with_no_summary_saved_the_answer_has_no_window_and_no_figures(http: Any) -> None:
    reply = http("GET", "/health")

    assert reply.status == 200
    assert reply.body == {
        "since": None,
        "until": None,
        "partitions": 1,
        "reporting": 0,
        "by_priority": [],
        "top_owners": [],
        "other": [],
    }


def test_the_callers_own_name_is_shown_among_the_top_owners_and_another_owners_is_not(http: Any) -> None:
    # Given a minute where bob had the largest backlog, alice the next, and small owners ran as other
    alice, bob = http.alice_owner, http.bob_owner
    _save(
        http,
        0,
        [
            (
                [(LatenessLabels("normal", bob), ms) for ms in (1_000, 2_000, 3_000)]
                + [(LatenessLabels("high", alice), 20), (LatenessLabels("normal", alice), 400)]
                + [
                    (LatenessLabels("normal", OTHER_OWNERS), 50),
                    (LatenessLabels("low", OTHER_OWNERS), 9_000),
                ],
                [(bob, 5_000), (alice, 300)],
            )
        ],
    )

    # When alice asks
    body = http("GET", "/health").body

    # Then the window is the summary's, every priority's figures cover every owner, bob is rank 1 without his
    # name, alice rank 2 with hers, and the other owners' figures come apart
    assert (body["since"], body["until"]) == (iso_utc(NOW_MS), iso_utc(NOW_MS + LATENESS_SAVE_MS))
    assert body["reporting"] == 1
    assert [(p["priority"], p["runs"], p["max_ms"]) for p in body["by_priority"]] == [
        ("high", 1, 20),
        ("normal", 5, 3_000),
        ("low", 1, 9_000),
    ]
    first, second = body["top_owners"]
    assert first == {
        "rank": 1,
        "owner": None,
        "you": False,
        "backlog": 5_000,
        "by_priority": [{"priority": "normal", "runs": 3, "p50_ms": 2_021, "p99_ms": 3_000, "max_ms": 3_000}],
    }  # a median of 2,000 ms read from a bucket 5 % wide: its upper bound
    assert (second["rank"], second["owner"], second["you"], second["backlog"]) == (2, alice, True, 300)
    assert [p["priority"] for p in second["by_priority"]] == ["high", "normal"]
    assert [(p["priority"], p["runs"]) for p in body["other"]] == [("normal", 1), ("low", 1)]
    # and bob sees his own name and not alice's
    seen_by_bob = http("GET", "/health", caller="bob").body["top_owners"]
    assert [(o["owner"], o["you"]) for o in seen_by_bob] == [(bob, True), (None, False)]


def test_several_partitions_add_their_runs_and_keep_the_largest_percentiles(http: Any) -> None:
    # Given two partitions' summaries, the same owner the top one in both
    http.reconfigure(http.settings, scheduler_partitions=2)
    for partition, ms in ((0, 100), (1, 700)):
        http.backend.control.save_lateness(
            partition,
            JsonLateness().encode(
                LatenessSummary(
                    partition=partition,
                    since_ms=NOW_MS + partition * 1_000,
                    at_ms=NOW_MS + LATENESS_SAVE_MS + partition * 1_000,
                    term=1,
                    groups=((LatenessLabels("normal", "team-x"), LatenessFigures(10, ms, ms, ms)),),
                    priorities=(("normal", LatenessFigures(10, ms, ms, ms)),),
                    backlog=(("team-x", 200 * (partition + 1)),),
                )
            ),
            term=1,
        )

    body = http("GET", "/health").body

    assert (body["partitions"], body["reporting"]) == (2, 2)
    assert (body["since"], body["until"]) == (iso_utc(NOW_MS), iso_utc(NOW_MS + LATENESS_SAVE_MS + 1_000))
    assert body["by_priority"] == [
        {"priority": "normal", "runs": 20, "p50_ms": 700, "p99_ms": 700, "max_ms": 700}
    ]
    [owner] = body["top_owners"]
    assert owner["backlog"] == 400 and owner["by_priority"][0]["runs"] == 20


def test_at_most_k_top_owners_are_listed_the_rest_counted_as_other(http: Any) -> None:
    # Given two partitions that each named ten owners, twenty owners in all
    http.reconfigure(http.settings, scheduler_partitions=2)
    for partition in (0, 1):
        owners = [f"team-{partition}-{i}" for i in range(TOP_OWNERS)]
        _save(
            http,
            partition,
            [
                (
                    [(LatenessLabels("low", o), 10 * i) for i, o in enumerate(owners)],
                    [(o, 100 + i) for i, o in enumerate(owners)],
                )
            ],
        )

    body = http("GET", "/health").body

    assert len(body["top_owners"]) == TOP_OWNERS
    assert [o["rank"] for o in body["top_owners"]] == list(range(1, TOP_OWNERS + 1))
    assert [o["backlog"] for o in body["top_owners"]] == sorted(
        [100 + i for i in range(TOP_OWNERS)] * 2, reverse=True
    )[:TOP_OWNERS]
    assert body["other"][0]["runs"] == TOP_OWNERS  # the ten owners left out, folded together


def test_a_summary_no_scheduler_wrote_is_left_out_and_the_rest_answered(http: Any) -> None:
    http.reconfigure(http.settings, scheduler_partitions=2)
    http.backend.control.save_lateness(0, "garbage", term=1)
    _save(http, 1, [([(LatenessLabels("high", OTHER_OWNERS), 5)], [])])

    reply = http("GET", "/health")

    assert reply.status == 200
    assert reply.body["reporting"] == 1 and reply.body["other"][0]["runs"] == 1
