"""GET /jobs/{id}/fires for instants far in the future (start_at may be any year up to 8999)."""

from __future__ import annotations

from datetime import UTC, datetime


def test_fires_of_a_rate_anchored_off_the_whole_second_in_2300_are_each_listed_once(http):
    """The listing continues from the stored next_run_at (epoch ms). Past year 2242 ``from_ms`` landed a few
    microseconds before that instant, so the first fire was listed twice (once as next_run_at, once as the
    "next" fire after it)."""
    job = http.create(schedule="rate(1 minute)", start_at="2300-01-01T00:00:00.001Z")

    reply = http("GET", f"/jobs/{job['id']}/fires", query={"count": "3"})

    assert reply.status == 200, reply.body
    assert [datetime.fromisoformat(f["scheduled_for"]) for f in reply.body["items"]] == [
        datetime(2300, 1, 1, 0, minute, 0, 1000, tzinfo=UTC) for minute in (0, 1, 2)
    ]
