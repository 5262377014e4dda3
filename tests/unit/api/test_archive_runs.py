"""The API across the retention boundary: a runs window before ``retention_days`` is answered from the caller's
archive query (202, ``Location``, then the poll's rows), another owner's poll is 404, and a deployment without an
archive answers 410 naming ``since`` and where the history went."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from jobsched.api.archive_reads import ArchiveReads
from jobsched.domain.archive import archive_row
from jobsched.memory.archive_queries import MemoryArchiveQueries
from jobsched.models import RunStatus
from jobsched.ports.runs import RunRow

DAY_MS = 86_400_000


def _iso(epoch_ms: int) -> str:
    return datetime.fromtimestamp(epoch_ms / 1000, tz=UTC).isoformat()


def _with_archive(http, polls: int = 1) -> MemoryArchiveQueries:
    fake = MemoryArchiveQueries(polls_before_done=polls)
    recent = http.api.service.run_listing.window_rows
    http.api = replace(http.api, archive=ArchiveReads(fake, retention_days=90, recent=recent))
    return fake


def test_a_window_before_the_retention_is_202_then_the_poll_answers_the_owners_archived_runs(http):
    fake = _with_archive(http)
    job = http.create()
    old = http.NOW_MS - 200 * DAY_MS
    for owner, job_id in ((http.alice_owner, job["id"]), (http.bob_owner, job["id"])):
        row = RunRow(job_id=job_id, scheduled_for=old, status=RunStatus.DEAD, attempt=3, owner=owner)
        fake.add(owner, archive_row(row))
    since = _iso(http.NOW_MS - 365 * DAY_MS)

    for path, query in ((f"/jobs/{job['id']}/runs", {"since": since}), ("/runs", {"since": since})):
        started = http("GET", path, query=query)
        assert started.status == 202, started.body
        assert started.body["status"] == "running"
        location = started.headers["location"]
        assert location == f"/archive/queries/{started.body['query_id']}"
        assert fake.started[-1].parameters[0] != since  # the owner, never a request field, leads the values

        stranger = http("GET", location, caller="bob")
        assert stranger.status == 404 and stranger.error["field"] == "query_id"

        done = http("GET", location)
        assert done.status == 200, done.body
        assert done.body["status"] == "succeeded"
        assert done.body["runs"] == [
            {
                "job_id": job["id"],
                "scheduled_for": old,
                "status": "dead",
                "kind": "scheduled",
                "attempt": 3,
                "reruns": 0,
                "archived": True,
            }
        ]


def test_a_window_inside_the_retention_lists_the_runs_table(http):
    fake = _with_archive(http)
    job = http.create()
    http.put_run(job["id"], http.NOW_MS - DAY_MS, RunStatus.SUCCEEDED)
    reply = http("GET", f"/jobs/{job['id']}/runs", query={"since": _iso(http.NOW_MS - 30 * DAY_MS)})
    assert reply.status == 200 and len(reply.body["items"]) == 1
    assert fake.started == []


def test_an_unknown_query_id_is_404(http):
    _with_archive(http)
    reply = http("GET", "/archive/queries/q-404")
    assert reply.status == 404 and reply.error["field"] == "query_id"


def test_without_an_archive_a_window_before_the_retention_is_410_saying_where_the_history_went(http):
    job = http.create()
    reply = http("GET", f"/jobs/{job['id']}/runs", query={"since": _iso(http.NOW_MS - 365 * DAY_MS)})
    assert reply.status == 410, reply.body
    assert reply.error["code"] == "beyond_retention" and reply.error["field"] == "since"
    assert "archive" in reply.error["message"]


def test_a_window_across_the_retention_answers_the_runs_table_and_the_archive_once_each(http):
    """A window from before the retention to now holds archived runs and runs still in the runs table: a recent
    run, a backfill of an old fire (kept from when it was saved) and a run TTL has not deleted yet. The poll
    answers every one of them once, newest first, the runs table's copy over an archived one."""
    fake = _with_archive(http)
    job = http.create()
    recent, backfilled, old = (http.NOW_MS - d * DAY_MS for d in (1, 150, 200))
    http.put_run(job["id"], recent, RunStatus.SUCCEEDED)
    http.put_run(job["id"], backfilled, RunStatus.SUCCEEDED)
    for scheduled_for, status in ((old, RunStatus.DEAD), (backfilled, RunStatus.DEAD)):
        row = RunRow(job_id=job["id"], scheduled_for=scheduled_for, status=status, owner=http.alice_owner)
        fake.add(http.alice_owner, archive_row(row))
    since = _iso(http.NOW_MS - 365 * DAY_MS)

    for path, query in ((f"/jobs/{job['id']}/runs", {"since": since}), ("/runs", {"since": since})):
        started = http("GET", path, query=query)
        done = http("GET", started.headers["location"])
        assert done.status == 200, done.body
        found = [(run["scheduled_for"], run["status"], run["archived"]) for run in done.body["runs"]]
        assert found == [(recent, "succeeded", False), (backfilled, "succeeded", False), (old, "dead", True)]


def test_a_window_before_the_retention_with_no_offset_or_with_a_cursor_is_refused_by_field(http):
    """The archive reads instants as the runs table does (an offset is required, never the server's zone), and
    its answer is one page and issues no cursor: a cursor is one this listing did not issue (404, as any other),
    never answered with the first page again."""
    fake = _with_archive(http)
    job = http.create()
    old = "2025-01-01T00:00:00"
    for path in (f"/jobs/{job['id']}/runs", "/runs"):
        naive = http("GET", path, query={"since": old})
        assert naive.status == 400 and naive.error["field"] == "since", naive.body
        naive_until = http("GET", path, query={"since": old + "Z", "until": "2025-02-01T00:00:00"})
        assert naive_until.status == 400 and naive_until.error["field"] == "until", naive_until.body
        paged = http("GET", path, query={"since": old + "Z", "cursor": "c2Vjb25kIHBhZ2U"})
        assert paged.status == 404 and paged.error["field"] == "cursor", paged.body
    assert fake.started == []


def test_a_window_with_only_an_until_before_the_retention_is_answered_by_the_archive(http):
    """``until`` alone, before the retention (the runs before a day in March, asked in June): the runs table can
    hold none of them, so the archive answers from its first month, as a ``since`` before the retention would;
    a 200 with no runs would say they never ran. An ``until`` inside the retention still lists the runs table."""
    fake = _with_archive(http)
    job = http.create()
    old = http.NOW_MS - 200 * DAY_MS
    fake.add(
        http.alice_owner,
        archive_row(
            RunRow(job_id=job["id"], scheduled_for=old, status=RunStatus.DEAD, owner=http.alice_owner)
        ),
    )
    http.put_run(job["id"], http.NOW_MS - DAY_MS, RunStatus.SUCCEEDED)

    for path in (f"/jobs/{job['id']}/runs", "/runs"):
        started = http("GET", path, query={"until": _iso(http.NOW_MS - 150 * DAY_MS)})
        assert started.status == 202, started.body
        window = fake.started[-1].window
        assert (window.owner, window.since_ms) == (http.alice_owner, 0)
        done = http("GET", started.headers["location"])
        assert [(run["scheduled_for"], run["archived"]) for run in done.body["runs"]] == [(old, True)]

        recent = http("GET", path, query={"until": _iso(http.NOW_MS - 30 * DAY_MS)})
        assert recent.status == 200 and recent.body["items"] == [], recent.body
    assert len(fake.started) == 2


def test_without_an_archive_a_window_with_only_an_until_before_the_retention_is_410(http):
    job = http.create()
    reply = http("GET", f"/jobs/{job['id']}/runs", query={"until": _iso(http.NOW_MS - 150 * DAY_MS)})
    assert reply.status == 410, reply.body
    assert reply.error["code"] == "beyond_retention" and reply.error["field"] == "since"
