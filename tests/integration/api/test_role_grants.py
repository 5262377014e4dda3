"""The API function's deployed IAM role against the requests its routes make on moto: every DynamoDB, SQS and
SNS request (recorded by ``tests.support.grants``) must be allowed by the role the stack gives the API function,
or the route answers 503 in AWS (AccessDenied) while passing on moto, which enforces no IAM."""

from __future__ import annotations

from typing import Any

from jobsched.models import RunStatus
from jobsched.ports.runs import run_id
from tests.support.grants import granted, record_requests

MARCH_1 = 1_772_323_200_000  # 2026-03-01T00:00:00Z, before the job's creation (NOW_MS, 2026-03-02T10:00Z)


def test_the_api_role_allows_every_route(http: Any) -> None:
    # Given a job of alice's with a dead run
    job = http.create("role-tour", schedule="0 * * * *")
    http.put_run(job["id"], MARCH_1, RunStatus.DEAD)
    jid, dead = job["id"], run_id(job["id"], MARCH_1)
    # When alice calls every route of the API, as deployed
    calls: list[tuple[str, str, dict[str, Any]]] = [
        ("POST", "/jobs", {"body": http.job_body("role-tour-2"), "headers": {"Idempotency-Key": "k-tour"}}),
        ("GET", "/jobs", {}),
        ("GET", "/runs", {}),
        ("GET", "/runs", {"query": {"status": "dead"}}),
        ("GET", "/runs", {"query": {"job_id": jid}}),
        ("GET", f"/jobs/{jid}", {}),
        ("PATCH", f"/jobs/{jid}", {"body": {"schedule": "30 * * * *"}}),
        ("POST", f"/jobs/{jid}/pause", {}),
        ("POST", f"/jobs/{jid}/resume", {}),
        ("POST", f"/jobs/{jid}/trigger", {"headers": {"Idempotency-Key": "k-trigger"}}),
        ("GET", f"/jobs/{jid}/runs", {}),
        ("GET", f"/jobs/{jid}/fires", {}),
        ("GET", f"/jobs/{jid}/events", {}),
        (
            "POST",
            f"/jobs/{jid}/backfill",
            {"body": {"start": "2026-03-01T01:00:00Z", "end": "2026-03-01T03:00:00Z"}},
        ),
        ("GET", f"/jobs/{jid}/runs/{dead}", {}),
        ("POST", f"/jobs/{jid}/runs/{dead}/retry", {}),
        ("DELETE", f"/jobs/{jid}", {}),
    ]
    with record_requests(http.settings) as requests:
        statuses = {
            (method, path, str(kw.get("query"))): http(method, path, **kw).status
            for method, path, kw in calls
        }
    # Then each route succeeded, and every request it made is one the API role allows
    assert all(status < 300 for status in statuses.values()), statuses
    assert requests.needed - granted("api") == set()
