"""Quotas per owner through the API (design §4.11): ``jobs``, ``fires_per_minute`` and ``triggers_per_minute``
with a default and per-owner overrides, refusals ``quota_exceeded`` naming the quota with the owner's numbers,
and ``GET /limits``. No test reads a store directly: tests/integration/api/test_quotas.py runs them on DynamoDB."""

from __future__ import annotations

import json
import threading
from dataclasses import replace
from typing import Any

from jobsched.api.schemas import JobCreate
from jobsched.domain.quota_recount import recount_pass
from jobsched.domain.quotas import QuotaExceeded, QuotaTable
from jobsched.ports.errors import Conflict


def _quotas(http: Any, table: dict[str, Any]) -> None:
    http.reconfigure(http.settings, quotas=QuotaTable.model_validate(table))


def _refused(reply: Any, status: int, field: str, *numbers: str) -> None:
    assert reply.status == status, reply.body
    assert reply.error["code"] == "quota_exceeded" and reply.error["field"] == field
    for number in numbers:
        assert number in reply.error["message"], reply.error["message"]


def test_a_create_over_the_jobs_quota_is_a_429_naming_jobs_with_the_owners_numbers(http):
    _quotas(http, {"default": {"jobs": 2}})
    first = http.create("one")
    http.create("two")

    refused = http("POST", "/jobs", body=http.job_body("three"))

    _refused(refused, 429, "jobs", "limit 2", "in use 2", "make it 3")
    assert "retry-after" not in refused.headers  # waiting alone frees no room under a capacity quota
    assert [job["name"] for job in http("GET", "/jobs").body["items"]] == ["one", "two"]
    http.create("other-team", caller="bob")  # another owner's count is its own
    assert http("DELETE", f"/jobs/{first['id']}").status == 204
    http.create("three")


def test_an_identical_repeat_of_a_create_at_the_jobs_quota_returns_the_existing_job(http):
    _quotas(http, {"default": {"jobs": 1}})
    job = http.create("one")

    repeat = http("POST", "/jobs", body=http.job_body("one"))

    assert repeat.status == 200 and repeat.body["id"] == job["id"]


def test_an_owners_entry_overrides_the_default_field_by_field(http):
    _quotas(
        http,
        {
            "default": {"jobs": 1, "triggers_per_minute": 5},
            "owners": {http.alice_owner: {"jobs": 3}, http.bob_owner: {"jobs": None}},
        },
    )
    for name in ("a", "b", "c"):
        http.create(name)
    _refused(http("POST", "/jobs", body=http.job_body("d")), 429, "jobs", "limit 3")
    for name in ("a", "b", "c", "d"):
        http.create(name, caller="bob")  # null: no limit for bob

    limits = http("GET", "/limits").body
    assert limits["jobs"] == {"limit": 3, "use": 3}
    assert limits["triggers_per_minute"]["limit"] == 5  # the default's, kept for alice


def test_fires_per_minute_sums_the_schedules_long_run_rates_on_create_and_patch(http):
    _quotas(http, {"default": {"fires_per_minute": 1.5}})
    minutely = http.create("minutely", schedule="every 1 minute")

    created = http("POST", "/jobs", body=http.job_body("twice", schedule="every 30 seconds"))
    patched = http("PATCH", f"/jobs/{minutely['id']}", body={"schedule": "every 20 seconds"})

    _refused(created, 429, "fires_per_minute", "limit 1.5", "in use 1", "make it 3")
    _refused(patched, 429, "fires_per_minute", "limit 1.5", "in use 1", "make it 3")
    assert http("PATCH", f"/jobs/{minutely['id']}", body={"schedule": "*/2 * * * *"}).status == 200
    http.create("daily", schedule="0 2 * * *")  # 1/1440 a minute
    assert http("GET", "/limits").body["fires_per_minute"] == {"limit": 1.5, "use": 0.501}


def test_a_change_that_does_not_raise_the_rate_passes_over_a_lowered_quota(http):
    job = http.create("fast", schedule="every 10 seconds")
    _quotas(http, {"default": {"fires_per_minute": 1, "jobs": 0}})

    assert http("POST", f"/jobs/{job['id']}/pause", body={}).status == 200
    assert http("PATCH", f"/jobs/{job['id']}", body={"input": {"n": 2}}).status == 200
    assert http("PATCH", f"/jobs/{job['id']}", body={"schedule": "every 20 seconds"}).status == 200
    assert http("GET", "/limits").body["fires_per_minute"] == {"limit": 1, "use": 3}
    assert http("DELETE", f"/jobs/{job['id']}").status == 204
    limits = http("GET", "/limits").body
    assert (limits["jobs"]["use"], limits["fires_per_minute"]["use"]) == (0, 0)


def test_triggers_and_backfills_over_the_minute_quota_are_429_until_the_next_minute(http):
    _quotas(http, {"default": {"triggers_per_minute": 2}})
    job = http.create("report", schedule="every 1 minute")
    http.clock.advance(600_000)
    first = http("POST", f"/jobs/{job['id']}/trigger")
    start = "2026-01-01T00:00:00Z"
    backfill = http("POST", f"/jobs/{job['id']}/backfill", body={"start": start, "end": job["next_run_at"]})
    assert (first.status, backfill.status) == (202, 200), backfill.body

    refused = http("POST", f"/jobs/{job['id']}/trigger")

    _refused(refused, 429, "triggers_per_minute", "limit 2", "in use 2")
    assert 1 <= int(refused.headers["retry-after"]) <= 60
    assert http("GET", "/limits").body["triggers_per_minute"] == {"limit": 2, "use": 2}
    http.clock.advance(int(refused.headers["retry-after"]) * 1000)
    assert http("POST", f"/jobs/{job['id']}/trigger").status == 202


def test_get_limits_shows_no_limits_and_the_use_by_default(http):
    http.create("a", schedule="every 30 seconds")

    limits = http("GET", "/limits")

    assert limits.status == 200
    assert limits.body == {
        "owner": http.alice_owner,
        "jobs": {"limit": None, "use": 1},
        "fires_per_minute": {"limit": None, "use": 2.0},
        "triggers_per_minute": {"limit": None, "use": 0},
        "runs_in_flight": None,
    }


def test_two_concurrent_creates_at_the_owners_last_place_take_it_once(http):
    _quotas(http, {"default": {"jobs": 1}})
    stored_usage = http.backend.jobs.usage
    both_checked = threading.Barrier(2, timeout=10)

    def usage_read_by_both(owner: str) -> Any:  # each request checks before either writes
        held = stored_usage(owner)
        both_checked.wait()
        return held

    http.backend.jobs.usage = usage_read_by_both
    services = [http.environment().service, http.environment().service]  # two API environments, one store
    outcomes: list[Any] = []

    def create(number: int) -> None:
        request = JobCreate.model_validate(http.job_body(f"job-{number}"))
        try:
            outcomes.append(services[number].create_job(http.alice_owner, request).created)
        except QuotaExceeded as refused:
            outcomes.append(refused)

    threads = [threading.Thread(target=create, args=(number,)) for number in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    http.backend.jobs.usage = stored_usage

    refused = [outcome for outcome in outcomes if isinstance(outcome, QuotaExceeded)]
    assert len(outcomes) == 2 and True in outcomes and len(refused) == 1
    assert (refused[0].field, refused[0].limit, refused[0].use, refused[0].wanted) == ("jobs", 1, 1, 2)
    assert len(http("GET", "/jobs").body["items"]) == 1
    assert http("GET", "/limits").body["jobs"] == {"limit": 1, "use": 1}


def _created_before_quotas(http: Any, name: str, **overrides: Any) -> dict[str, Any]:
    """A job as an API that keeps no quota usage writes it (a deployment from before quotas): not counted."""
    counting = http.api
    http.api = replace(counting, service=replace(counting.service, counters=None))
    try:
        return http.create(name, **overrides)
    finally:
        http.api = counting


def _use(http: Any) -> tuple[float, float]:
    limits = http("GET", "/limits").body
    return limits["jobs"]["use"], limits["fires_per_minute"]["use"]


def test_deleting_a_job_never_counted_leaves_the_usage_at_zero(http):
    old = _created_before_quotas(http, "old", schedule="every 1 minute")
    assert _use(http) == (0, 0)

    assert http("DELETE", f"/jobs/{old['id']}").status == 204

    assert _use(http) == (0, 0)


def test_an_edit_of_a_job_never_counted_counts_it_whole_once(http):
    old = _created_before_quotas(http, "old", schedule="every 1 minute")
    other = _created_before_quotas(http, "other", schedule="every 1 minute")

    assert http("POST", f"/jobs/{old['id']}/pause", body={}).status == 200  # any edit counts it
    assert http("PATCH", f"/jobs/{other['id']}", body={"schedule": "every 30 seconds"}).status == 200
    assert _use(http) == (2, 3)
    assert http("POST", f"/jobs/{old['id']}/resume").status == 200  # counted once only
    assert http("PATCH", f"/jobs/{other['id']}", body={"schedule": "every 1 minute"}).status == 200
    assert _use(http) == (2, 2)
    for job in (old, other):
        assert http("DELETE", f"/jobs/{job['id']}").status == 204
    assert _use(http) == (0, 0)


def test_an_edit_raising_a_job_never_counted_over_the_rate_quota_is_refused(http):
    _quotas(http, {"default": {"fires_per_minute": 2}})
    old = _created_before_quotas(http, "old", schedule="every 1 minute")
    http.create("new", schedule="every 1 minute")

    refused = http("PATCH", f"/jobs/{old['id']}", body={"schedule": "every 30 seconds"})
    _refused(refused, 429, "fires_per_minute", "limit 2", "in use 1", "make it 3")
    assert http("PATCH", f"/jobs/{old['id']}", body={"schedule": "every 1 minute"}).status == 200
    assert _use(http) == (2, 2)


def test_a_delete_that_meets_the_recount_reads_the_job_again_and_takes_what_was_counted(http):
    old = _created_before_quotas(http, "old", schedule="every 1 minute")
    store, delete = http.backend.jobs, http.backend.jobs.delete

    def counted_first(
        *args: Any, **kwargs: Any
    ) -> None:  # the sweeper's recount lands between read and delete
        store.delete = delete
        assert recount_pass(store, now_ms=0, settle_ms=0, seconds=60).counted == 1
        delete(*args, **kwargs)

    store.delete = counted_first
    assert http("DELETE", f"/jobs/{old['id']}").status == 204

    assert _use(http) == (0, 0)
    assert http("GET", f"/jobs/{old['id']}").status == 404


def test_a_delete_whose_job_keeps_being_counted_is_a_409_and_deletes_nothing(http):
    job = http.create("counted")

    def recounted(*args: Any, **kwargs: Any) -> None:
        raise Conflict("the job's quota count changed meanwhile; read it again")

    http.backend.jobs.delete = recounted
    refused = http("DELETE", f"/jobs/{job['id']}")

    assert refused.status == 409 and refused.error["code"] == "conflict", refused.body
    assert http("GET", f"/jobs/{job['id']}").status == 200


def test_a_jobs_quota_count_is_in_no_answer_nor_in_the_openapi_document(http):
    counted = http.create("counted", schedule="every 1 minute")
    old = _created_before_quotas(http, "old", schedule="every 1 minute")
    answers = [
        counted,
        old,
        http("GET", f"/jobs/{counted['id']}").body,
        http("GET", "/jobs").body,
        http("PATCH", f"/jobs/{old['id']}", body={"input": {"counted": "now"}}).body,
        http("POST", f"/jobs/{counted['id']}/pause", body={}).body,
        http("GET", "/openapi.json").body,
    ]
    assert _use(http) == (2, 2)  # both counted (the PATCH counted the old one), yet no answer shows a count
    assert all("quota_rate" not in json.dumps(answer) for answer in answers)
