"""end_at edge cases: sub-millisecond digits (no fire may come after the end_at its owner wrote), and an end_at
already past on a rate anchored at creation."""

from __future__ import annotations

from datetime import UTC, datetime

from tests.support.api import job_body


def test_an_end_at_with_sub_millisecond_digits_never_lets_a_later_fire_run(http):
    """Rounding an instant UP keeps a fire from being early; for end_at (the last instant a fire may have) it
    moved the bound later, so end_at 2026-03-04T01:59:59.9999Z became 02:00:00.000Z and the daily 02:00 fire
    of 2026-03-04, a tenth of a millisecond after the bound, was still listed (and run)."""
    job = http.create(schedule="0 2 * * *", timezone="UTC", end_at="2026-03-04T01:59:59.9999Z")

    reply = http("GET", f"/jobs/{job['id']}/fires", query={"count": "5"})

    assert reply.status == 200, reply.body
    fires = [datetime.fromisoformat(f["scheduled_for"]) for f in reply.body["items"]]
    assert fires == [datetime(2026, 3, 3, 2, tzinfo=UTC)]
    assert all(fire <= datetime(2026, 3, 4, 1, 59, 59, 999900, tzinfo=UTC) for fire in fires)
    assert reply.body["reason"] == "ended: the schedule has no further fire"


def test_a_rate_without_start_at_whose_end_at_is_past_is_told_so_not_about_a_start_at_it_never_gave(http):
    """A rate is anchored at creation when start_at is not given; an end_at already past was refused with
    "end_at must be after start_at", naming a field the request did not have."""
    reply = http(
        "POST", "/jobs", body=job_body("rated", schedule="rate(1 hour)", end_at="2026-03-01T00:00:00Z")
    )

    assert reply.status == 400, reply.body
    assert reply.error["field"] == "end_at"
    assert "start_at" not in reply.error["message"]
