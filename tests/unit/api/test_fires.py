"""GET /jobs/{id}/fires through the handler on the in-memory fakes: what will run next, as the scheduler will run it."""

from __future__ import annotations

from datetime import datetime


def test_fires_lists_the_next_fires_with_their_dispatch_instants_and_local_times(http):
    job = http.create(schedule="30 2 * * *", timezone="Europe/Berlin", jitter_s=60)

    reply = http("GET", f"/jobs/{job['id']}/fires", query={"count": "3"})

    assert reply.status == 200, reply.body
    items = reply.body["items"]
    assert [f["scheduled_for"] for f in items] == [
        "2026-03-03T01:30:00Z",
        "2026-03-04T01:30:00Z",
        "2026-03-05T01:30:00Z",
    ]
    assert items[0]["scheduled_for"] == job["next_run_at"]
    assert items[0]["local_time"] == "2026-03-03T02:30:00+01:00"
    assert len({f["dispatch_at"] for f in items}) == 3
    # compared as instants: as text, a dispatch under a second after its fire ("01:30:00.500Z") sorts before it
    # ("01:30:00Z"), which made this test fail for the one job id in 60 whose jitter offset is under a second
    assert all(
        datetime.fromisoformat(f["dispatch_at"]) >= datetime.fromisoformat(f["scheduled_for"]) for f in items
    )
    assert reply.body["reason"] is None


def test_fires_notes_a_fire_daylight_saving_moves(http):
    job = http.create(schedule="30 2 * * *", timezone="Europe/Berlin")

    reply = http("GET", f"/jobs/{job['id']}/fires", query={"count": "30"})

    moved = [f for f in reply.body["items"] if f["note"]]
    assert [(f["local_time"], f["note"]) for f in moved] == [
        (
            "2026-03-29T03:00:00+02:00",
            "clocks go forward on 2026-03-29 from 02:00 to 03:00: 02:30 does not exist and runs at 03:00",
        )
    ]


def test_a_paused_job_answers_no_fires_and_the_reason(http):
    job = http.create()
    assert http("POST", f"/jobs/{job['id']}/pause").status == 200

    reply = http("GET", f"/jobs/{job['id']}/fires")

    assert reply.status == 200
    assert reply.body == {
        "items": [],
        "reason": "paused: no fire runs while the job is paused; a resume continues with the first fire after it",
    }


def test_count_out_of_range_is_a_400_naming_count(http):
    job = http.create()
    for count in ("0", "101", "ten"):
        reply = http("GET", f"/jobs/{job['id']}/fires", query={"count": count})
        assert reply.status == 400, (count, reply.body)
        assert reply.error["field"] == "count"
