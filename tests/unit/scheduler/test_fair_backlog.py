"""Fairness across a backlog larger than a tick's pages (design §4.10): a full tick reads ahead up to
``TickLimits.read_ahead`` entries, so the fair rounds between owners cover the backlog, not only the entries one
tick's pages return, and quiet owners' fires go out in the first ticks while the noisy owner keeps every other
slot. On the in-memory fakes with the injected clock."""

from __future__ import annotations

from collections import Counter
from typing import Any

from jobsched.domain.planning import TickLimits

BIG = 400
SMALL = {f"quiet-{n}": 5 for n in range(1, 5)}
LIMITS = TickLimits(max_jobs=20, page_size=10, threads=2, read_ahead=1_000)


def _rush(harness: Any) -> tuple[list[str], dict[str, list[str]]]:
    """The noisy owner's 400 jobs and four quiet owners' 5 each, all due at T0, registered 30 s before (their
    entries spread over the bucket's shards in job id order, the quiet owners' among the noisy one's)."""
    harness.clock.now_ms = harness.T0 - 30_000
    big = harness.add_many(BIG, "* * * * *", owner="noisy")
    small = {owner: harness.add_many(count, "* * * * *", owner=owner) for owner, count in SMALL.items()}
    harness.clock.now_ms = harness.T0
    return big, small


def test_quiet_owners_fires_go_out_in_the_first_ticks_of_a_backlog_larger_than_a_ticks_pages(
    harness: Any,
) -> None:
    # Given 420 fires due at T0, 400 of one owner, and ticks of 20 reading pages of 10 per lane
    big, small = _rush(harness)
    a = harness.contender(limits=LIMITS)

    # When the scheduler works through the backlog
    ticks = harness.ticks(a, 25)

    # Then the quiet owners' 20 fires all went out in the first two ticks (five rounds of one per owner), the
    # noisy owner took every other slot of every tick until its backlog was drained (21 full ticks), and every
    # fire went out exactly once
    quiet = {job_id for ids in small.values() for job_id in ids}
    assert {m.job_id for m in ticks[0] + ticks[1]} >= quiet
    assert [len(tick) for tick in ticks[:21]] == [20] * 21
    assert sum(len(tick) for tick in ticks[21:]) == 0
    sent = Counter((m.job_id, m.scheduled_for) for tick in ticks for m in tick)
    assert sent == Counter({(job_id, harness.T0): 1 for job_id in big + sorted(quiet)})


def test_a_read_ahead_backlog_is_read_once_and_its_positions_follow_the_drain(harness: Any) -> None:
    # Given the same backlog
    big, small = _rush(harness)
    a = harness.contender(limits=LIMITS)

    # When the scheduler works through it
    harness.ticks(a, 25)

    # Then the due index returned each entry of the rush's bucket once (the first tick read it all ahead; the
    # carried ticks asked only for entries filed before it), and the read positions passed every entry
    bucket = harness.T0 // (harness.settings.due_bucket_s * 1000)
    pages = [
        page for name, args, page in a.recorder.results if name == "query_due" and args[0].bucket == bucket
    ]
    returned = [entry.job_id for entries, _ in pages for entry in entries]
    assert Counter(returned) == Counter(big + [j for ids in small.values() for j in ids])
    lanes = {key: lane for key, lane in harness.jobs.states.timers.items() if key[1] == bucket and lane}
    assert lanes
    cursors = a.scheduler.reader._cursors
    assert all(cursors.get(key[1:]) == lane[-1].order for key, lane in lanes.items())
