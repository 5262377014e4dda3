"""Priority and fairness under a backlog (design §4.10): a ``high`` fire is never behind a ``normal`` one due in the
same second, ``low`` ones go last, owners share a backlog in fair rounds, and no fire is lost or sent twice. On
the in-memory fakes with the injected clock."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from jobsched.api.schemas import JobCreate, JobPatch
from jobsched.api.service import JobService
from jobsched.clock import from_ms, to_ms
from jobsched.domain.planning import TickLimits
from jobsched.domain.quotas import QuotaExceeded, QuotaTable
from jobsched.models import Priority
from jobsched.ports.run_messages import RunMessage
from tests.support.api import job_body

LIMITS = TickLimits(max_jobs=30, page_size=50, threads=1)


def _keys(messages: list[RunMessage]) -> Counter[tuple[str, int]]:
    return Counter((m.job_id, m.scheduled_for) for m in messages)


def test_high_fires_go_first_in_the_same_second_whatever_their_place_in_the_due_index(harness: Any) -> None:
    # Given 100 normal jobs and then 5 high ones (later job ids: the due index's order puts them last), all due
    # at T0 and registered 30 s before, and ticks of at most 30 jobs
    harness.clock.now_ms = harness.T0 - 30_000
    normal = harness.add_many(100, "* * * * *")
    high = harness.add_many(5, "* * * * *", priority=Priority.HIGH)
    harness.clock.now_ms = harness.T0
    a = harness.contender(limits=LIMITS)

    # When the scheduler works through the backlog
    ticks = harness.ticks(a, 6)

    # Then the first tick sent the 5 high fires before any normal one, and every fire went out exactly once
    assert {m.job_id for m in ticks[0][:5]} == set(high)
    assert all(m.job_id in normal for m in ticks[0][5:])
    sent = _keys([m for tick in ticks for m in tick])
    assert set(sent) == {(job_id, harness.T0) for job_id in normal + high}
    assert set(sent.values()) == {1}


def test_a_normal_backlog_does_not_hold_back_a_high_fire_due_later(harness: Any) -> None:
    # Given a carried backlog of 100 normal fires due at T0 (ticks of 30), and a high one-off due at T0 + 2 s,
    # all registered 30 s before (early lanes)
    harness.clock.now_ms = harness.T0 - 30_000
    normal = harness.add_many(100, "* * * * *")
    at = from_ms(harness.T0 + 2_000).strftime("%Y-%m-%dT%H:%M:%SZ")
    high = harness.add_many(1, f"at {at}", priority=Priority.HIGH)
    harness.clock.now_ms = harness.T0
    a = harness.contender(limits=LIMITS)

    # When the scheduler ticks through the backlog
    ticks = harness.ticks(a, 6)

    # Then the tick of T0 + 2 s sent the high fire first, while normal fires of T0 were still waiting, and
    # every fire went out exactly once
    assert ticks[1][0].job_id == high[0]
    assert len(ticks[1]) == 30 and all(m.job_id in normal for m in ticks[1][1:] + ticks[2])
    sent = _keys([m for tick in ticks for m in tick])
    assert set(sent) == {(job_id, harness.T0) for job_id in normal} | {(high[0], harness.T0 + 2_000)}
    assert set(sent.values()) == {1}


def test_low_fires_wait_for_the_normal_ones_due_with_them(harness: Any) -> None:
    # Given 20 low jobs and then 20 normal ones, all due at T0, and ticks of at most 30 jobs
    harness.clock.now_ms = harness.T0 - 30_000
    low = harness.add_many(20, "* * * * *", priority=Priority.LOW)
    normal = harness.add_many(20, "* * * * *")
    harness.clock.now_ms = harness.T0
    a = harness.contender(limits=LIMITS)

    # When the scheduler works through them
    ticks = harness.ticks(a, 3)

    # Then the first tick sent the 20 normal fires, then 10 low ones; the next the other 10
    assert [m.job_id for m in ticks[0][:20]] == sorted(normal)
    assert len(ticks[0]) == 30 and all(m.job_id in low for m in ticks[0][20:] + ticks[1])
    assert _keys([m for tick in ticks for m in tick]) == Counter({(j, harness.T0): 1 for j in low + normal})


def test_owners_share_a_backlog_in_fair_rounds(harness: Any) -> None:
    # Given a noisy owner with 90 jobs due at T0 (registered first: the due index's order puts them first) and two
    # quiet owners with 5 each, and ticks of at most 30 jobs
    harness.clock.now_ms = harness.T0 - 30_000
    noisy = harness.add_many(90, "* * * * *", owner="noisy")
    quiet = {owner: harness.add_many(5, "* * * * *", owner=owner) for owner in ("quiet-1", "quiet-2")}
    harness.clock.now_ms = harness.T0
    a = harness.contender(limits=LIMITS)

    # When the scheduler works through the backlog
    ticks = harness.ticks(a, 5)

    # Then the first tick took every quiet fire and 20 of the noisy owner's, in rounds of one per owner, each
    # message naming its owner (its MessageGroupId); the rest drained after, each fire exactly once
    first = ticks[0]
    assert len(first) == 30
    assert [m.owner for m in first[:15]] == ["noisy", "quiet-1", "quiet-2"] * 5
    assert all(m.owner == "noisy" for m in first[15:])
    assert {m.job_id for m in first} >= set(quiet["quiet-1"]) | set(quiet["quiet-2"])
    sent = _keys([m for tick in ticks for m in tick])
    every = noisy + quiet["quiet-1"] + quiet["quiet-2"]
    assert sent == Counter({(job_id, harness.T0): 1 for job_id in every})
    assert all(m.owner is not None for tick in ticks for m in tick)


def test_a_patched_priority_sends_the_next_fire_in_its_lane_once_whatever_the_owners_quotas(
    harness: Any,
) -> None:
    # Given an owner's normal job registered through the API 30 s before T0, behind 100 normal fires due with it
    harness.clock.now_ms = harness.T0 - 30_000
    quotas = {"default": {"jobs": 1, "fires_per_minute": 1, "triggers_per_minute": 1}}
    api = _api_with_quotas(harness, quotas)
    job = api.create_job("team-q", JobCreate.model_validate(job_body("q", schedule="* * * * *"))).job
    normal = harness.add_many(100, "* * * * *")
    # and then its owner's quotas lowered to nothing: creates, schedule raises and triggers are refused
    api = _api_with_quotas(harness, {"default": {"jobs": 0, "fires_per_minute": 0, "triggers_per_minute": 0}})
    with pytest.raises(QuotaExceeded):
        api.trigger_job("team-q", job.id)
    with pytest.raises(QuotaExceeded):
        api.update_job("team-q", job.id, JobPatch.model_validate({"schedule": "*/30 * * * * *"}))

    # When a PATCH makes it high (allowed: it adds no job and no fire) and the scheduler ticks through the backlog
    patched = api.update_job("team-q", job.id, JobPatch.model_validate({"priority": "high"}))
    harness.clock.now_ms = harness.T0
    ticks = harness.ticks(harness.contender(limits=LIMITS), 6)

    # Then its fire went out first and every fire exactly once
    assert patched.priority is Priority.HIGH and to_ms(patched.next_run_at) == harness.T0
    assert ticks[0][0].job_id == job.id
    sent = _keys([m for tick in ticks for m in tick])
    assert set(sent) == {(job_id, harness.T0) for job_id in [*normal, job.id]}
    assert set(sent.values()) == {1}


def _api_with_quotas(harness: Any, quotas: dict[str, Any]) -> JobService:
    """The API's service on the harness's stores, counting quota usage on its job store under ``quotas``."""
    settings = harness.settings.model_copy(update={"quotas": QuotaTable.model_validate(quotas)})
    parts = harness.parts() | {"settings": settings}
    return JobService(**parts, partition_marks=harness.control, counters=harness.jobs)
