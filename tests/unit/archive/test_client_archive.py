"""The client follows a runs listing the API answered from the archive: it polls the query's ``Location`` (an
injected sleep, no waiting) until its runs come, and names a failed or too slow query."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from jobsched.client import ARCHIVE_POLL_S, ApiError, JobschedClient

JOB = "j_" + "a" * 20
ROW = {
    "job_id": JOB,
    "scheduled_for": 1_767_225_600_000,
    "status": "dead",
    "attempt": 3,
    "finished_at": 1_767_225_601_500,
}


def _client(
    answers: list[dict[str, Any]], seen: list[str], **options: Any
) -> tuple[JobschedClient, list[float]]:
    slept: list[float] = []

    def api(request: httpx.Request) -> httpx.Response:
        seen.append(f"{request.method} {request.url.path}?{request.url.query.decode()}")
        status = 202 if answers[0].get("status") == "running" else 200
        return httpx.Response(status, json=answers.pop(0))

    client = JobschedClient(
        "http://127.0.0.1:8080", token="t", transport=httpx.MockTransport(api), sleep=slept.append, **options
    )
    return client, slept


def test_a_listing_answered_from_the_archive_is_polled_to_its_runs() -> None:
    seen: list[str] = []
    client, slept = _client(
        [
            {"query_id": "q-1", "status": "running"},
            {"query_id": "q-1", "status": "running"},
            {"query_id": "q-1", "status": "succeeded", "runs": [ROW]},
        ],
        seen,
    )
    runs = list(client.iter_all_runs(job_id=JOB, since="2026-01-01T00:00:00Z"))
    assert seen[0].startswith("GET /runs?") and "since=2026-01-01T00%3A00%3A00Z" in seen[0]
    assert seen[1:] == ["GET /archive/queries/q-1?", "GET /archive/queries/q-1?"]
    assert slept == [ARCHIVE_POLL_S, ARCHIVE_POLL_S]
    assert runs == [
        {
            "id": f"{JOB}@1767225600000",
            "job_id": JOB,
            "scheduled_for": "2026-01-01T00:00:00.000Z",
            "status": "dead",
            "attempt": 3,
            "finished_at": "2026-01-01T00:00:01.500Z",
            "archived": True,
        }
    ]


def test_a_run_of_the_runs_table_in_an_archive_answer_stays_marked_not_archived() -> None:
    recent = {**ROW, "scheduled_for": ROW["scheduled_for"] + 1, "archived": False}
    client, _ = _client([{"query_id": "q-1", "status": "succeeded", "runs": [recent, ROW]}], [])
    runs = list(client.iter_all_runs(job_id=JOB, since="2026-01-01T00:00:00Z"))
    assert [run["archived"] for run in runs] == [False, True]


def test_a_failed_archive_query_is_named() -> None:
    client, _ = _client(
        [
            {"query_id": "q-1", "status": "running"},
            {"query_id": "q-1", "status": "failed", "reason": "scan limit"},
        ],
        [],
    )
    with pytest.raises(ApiError) as failed:
        client.list_runs(JOB)
    assert failed.value.code == "archive_query_failed" and "scan limit" in str(failed.value)


def test_an_archive_query_that_runs_too_long_is_given_up_by_name() -> None:
    running = {"query_id": "q-1", "status": "running"}
    client, slept = _client([running] * 10, [], archive_wait_s=3 * ARCHIVE_POLL_S)
    with pytest.raises(ApiError) as slow:
        client.list_runs(JOB)
    assert slow.value.code == "archive_query_timeout"
    assert len(slept) == 3


def test_every_run_of_a_window_longer_than_a_page_is_listed_once_across_archive_answers() -> None:
    """An archive answer is one page without a cursor: the client asks again with ``until`` at the oldest run it
    got (that instant included, so runs sharing it are not skipped), and lists each run once."""
    base = 1_767_225_600_000
    stored = [  # 250 runs, newest first; three share the instant at the end of the first page
        {
            "job_id": f"j_{i % 7:020x}",
            "scheduled_for": base - (i if i < 98 else 98 + max(0, i - 100)) * 60_000,
        }
        for i in range(250)
    ]
    stored.sort(key=lambda row: (-row["scheduled_for"], row["job_id"]))
    asked: list[dict[str, str]] = []

    def api(request: httpx.Request) -> httpx.Response:
        params = dict(request.url.params)
        asked.append(params)
        until = params.get("until")
        until_ms = 10**15 if until is None else _ms(until)
        rows = [row for row in stored if row["scheduled_for"] < until_ms][: int(params["limit"])]
        return httpx.Response(200, json={"query_id": f"q-{len(asked)}", "status": "succeeded", "runs": rows})

    client = JobschedClient("http://127.0.0.1:8080", token="t", transport=httpx.MockTransport(api))
    runs = list(client.iter_all_runs(page_size=100, since="2025-01-01T00:00:00Z"))
    assert [run["id"] for run in runs] == [f"{r['job_id']}@{r['scheduled_for']}" for r in stored]
    assert all(params["since"] == "2025-01-01T00:00:00Z" for params in asked) and len(asked) >= 3


def test_a_page_of_one_instant_only_is_passed_and_the_listing_ends() -> None:
    base = 1_767_225_600_000
    stored = [{"job_id": f"j_{i:020x}", "scheduled_for": base} for i in range(3)] + [
        {"job_id": JOB, "scheduled_for": base - 60_000}
    ]

    def api(request: httpx.Request) -> httpx.Response:
        until = request.url.params.get("until")
        rows = [r for r in stored if until is None or r["scheduled_for"] < _ms(until)]
        return httpx.Response(200, json={"query_id": "q", "status": "succeeded", "runs": rows[:2]})

    client = JobschedClient("http://127.0.0.1:8080", token="t", transport=httpx.MockTransport(api))
    runs = list(client.iter_all_runs(page_size=2, since="2025-01-01T00:00:00Z"))
    assert [run["id"] for run in runs] == [
        f"{r['job_id']}@{r['scheduled_for']}" for r in (*stored[:2], stored[3])
    ]


def _ms(text: str) -> int:
    from datetime import datetime

    return round(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)
