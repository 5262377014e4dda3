"""Idempotency-Key on POST /jobs and POST /jobs/{id}/trigger (IETF draft "The Idempotency-Key HTTP Header
Field": replay of the first response, 422 for another request under the key, 409 while the first is in flight),
on the fakes: the records are Powertools' own, in ``tests.support.backends.MemoryKeyRecords``."""

from __future__ import annotations

import threading
import time
from typing import Any

from aws_lambda_powertools.utilities.idempotency.exceptions import IdempotencyAlreadyInProgressError

from jobsched.api.schemas import JobCreate
from jobsched.api.wsgi import api_context
from tests.support.api import key_record_id


def key(value: str) -> dict[str, str]:
    return {"Idempotency-Key": value}


def test_a_repeat_with_the_same_key_replays_the_first_response(http):
    body = http.job_body("report")

    first = http("POST", "/jobs", body=body, headers=key("k-1"))
    http.clock.advance(60_000)
    again = http("POST", "/jobs", body=body, headers=key("k-1"))

    assert first.status == again.status == 201
    assert again.body == first.body  # same id, same timestamps: the stored response
    assert again.headers["idempotent-replayed"] == "true"
    assert "idempotent-replayed" not in first.headers
    assert [j["id"] for j in http("GET", "/jobs").body["items"]] == [first.body["id"]]


def test_a_replay_keeps_the_first_status_even_when_that_was_200(http):
    existing = http.create("report")

    first = http("POST", "/jobs", body=http.job_body("report"), headers=key("k-200"))
    again = http("POST", "/jobs", body=http.job_body("report"), headers=key("k-200"))

    assert first.status == again.status == 200
    assert first.body == again.body == existing


def test_the_same_key_with_a_different_body_is_422(http):
    http("POST", "/jobs", body=http.job_body("report"), headers=key("k-2"))

    reply = http("POST", "/jobs", body=http.job_body("report", schedule="0 3 * * *"), headers=key("k-2"))

    assert reply.status == 422
    assert reply.error["code"] == "idempotency_key_reused"
    assert reply.error["field"] == "Idempotency-Key"


def test_a_key_used_on_another_endpoint_is_422(http):
    job = http.create()
    http("POST", "/jobs", body=http.job_body("other"), headers=key("k-3"))

    reply = http("POST", f"/jobs/{job['id']}/trigger", headers=key("k-3"))

    assert reply.status == 422


def test_equivalent_bodies_are_the_same_request(http):
    shorthand = http("POST", "/jobs", body=http.job_body("report"), headers=key("k-4"))
    spelled_out = http(
        "POST",
        "/jobs",
        body={**http.job_body("report", target={"type": "command", "name": "echo"})},
        headers=key("k-4"),
        raw_body=None,
    )

    assert shorthand.status == spelled_out.status == 201
    assert spelled_out.headers.get("idempotent-replayed") == "true"


def test_keys_are_scoped_per_owner(http):
    mine = http("POST", "/jobs", body=http.job_body("report"), headers=key("shared-key"))
    same_team = http("POST", "/jobs", body=http.job_body("report"), headers=key("shared-key"), caller="carol")
    other_team = http("POST", "/jobs", body=http.job_body("report"), headers=key("shared-key"), caller="bob")

    assert same_team.body == mine.body and same_team.headers["idempotent-replayed"] == "true"
    assert other_team.status == 201 and "idempotent-replayed" not in other_team.headers
    assert other_team.body["id"] != mine.body["id"] and other_team.body["owner"] == http.bob_owner


def test_a_failed_request_stores_nothing_so_the_key_can_be_retried(http):
    bad = http("POST", "/jobs", body=http.job_body("report", schedule="61 * * * *"), headers=key("k-5"))
    good = http("POST", "/jobs", body=http.job_body("report"), headers=key("k-5"))

    assert bad.status == 400
    assert good.status == 201 and "idempotent-replayed" not in good.headers


def test_records_are_kept_24_hours(http):
    before = int(time.time())
    http("POST", "/jobs", body=http.job_body("report"), headers=key("k-6"))

    record = http.key_record(http.alice_owner, "k-6")
    assert record is not None and record["status"] == "COMPLETED"
    assert before + 86_400 <= int(record["expiration"]) <= int(time.time()) + 86_400


def test_trigger_with_a_key_creates_one_run_and_replays_it(http):
    job = http.create()
    event = http.sample("trigger_job", path_id=job["id"])

    first = http.invoke(event)
    http.clock.advance(5_000)
    again = http.invoke(http.sample("trigger_job", path_id=job["id"]))

    assert first.status == again.status == 202
    assert again.body == first.body and again.headers["idempotent-replayed"] == "true"
    runs = http("GET", f"/jobs/{job['id']}/runs").body["items"]
    assert [r["id"] for r in runs] == [first.body["id"]]


def test_a_trigger_of_another_owners_job_with_a_key_stores_nothing(http):
    job = http.create()

    refused = http("POST", f"/jobs/{job['id']}/trigger", headers=key("k-7"), caller="bob")
    bobs = http.create("bobs", caller="bob")
    accepted = http("POST", f"/jobs/{bobs['id']}/trigger", headers=key("k-7"), caller="bob")

    assert refused.status == 404
    assert accepted.status == 202 and "idempotent-replayed" not in accepted.headers


# --- in flight ------------------------------------------------------------------------------------


def test_the_same_key_while_the_first_request_is_in_flight_is_409(http):
    # Given: two API execution environments (Lambda runs one request per environment at a time)
    first_env = http.environment()
    second_env = http.api
    inside, release = threading.Event(), threading.Event()
    create = first_env.service.jobs.create

    def slow_create(*args: Any) -> None:
        inside.set()
        assert release.wait(10)
        create(*args)

    first_env.service.jobs.create = slow_create  # type: ignore[method-assign]
    request = JobCreate.model_validate(http.job_body("report"))
    outcome: dict[str, Any] = {}

    def first_request() -> None:
        first_env.service.idempotency.bind_invocation(api_context())
        outcome["first"] = first_env.service.create_job(http.alice_owner, request, idempotency_key="k-8")

    worker = threading.Thread(target=first_request)
    worker.start()
    try:
        assert inside.wait(10)
        # When: the retry arrives while the first request is still being processed
        in_flight = http.key_record(http.alice_owner, "k-8")
        http.api = second_env  # the retry reaches the other execution environment
        retry = http("POST", "/jobs", body=http.job_body("report"), headers=key("k-8"))
    finally:
        release.set()
        worker.join(10)

    # Then: 409 with Retry-After; once the first finishes, a retry replays its job
    assert in_flight is not None and in_flight["status"] == "INPROGRESS"
    assert retry.status == 409
    assert retry.error["code"] == "request_in_progress" and retry.error["field"] == "Idempotency-Key"
    assert retry.headers["retry-after"] == "1"
    created = outcome["first"]
    assert created.created and not created.replayed
    later = http("POST", "/jobs", body=http.job_body("report"), headers=key("k-8"))
    assert later.status == 201 and later.body["id"] == created.job.id
    assert [j["id"] for j in http("GET", "/jobs").body["items"]] == [created.job.id]


def test_an_in_flight_record_expires_with_the_invocation_that_wrote_it(http):
    inside, release = threading.Event(), threading.Event()
    create = http.api.service.jobs.create

    def slow_create(*args: Any) -> None:
        inside.set()
        assert release.wait(10)
        create(*args)

    http.api.service.jobs.create = slow_create  # type: ignore[method-assign]
    worker = threading.Thread(
        target=lambda: http("POST", "/jobs", body=http.job_body("report"), headers=key("k-9"))
    )
    started_ms = int(time.time() * 1000)
    worker.start()
    try:
        assert inside.wait(10)
        record = http.key_record(http.alice_owner, "k-9")
    finally:
        release.set()
        worker.join(10)

    # the handler's context allows 30 s: a crashed request frees its key then, not after 24 h
    assert record is not None and record["status"] == "INPROGRESS"
    assert started_ms + 25_000 <= int(record["in_progress_expiration"]) <= int(time.time() * 1000) + 30_000


def test_two_concurrent_identical_posts_with_one_key_create_one_job(http):
    # Given: two execution environments receiving the same request at the same moment
    environments = [http.environment() for _ in range(2)]
    request = JobCreate.model_validate(http.job_body("report"))
    start = threading.Barrier(2)
    results: list[Any] = []
    lock = threading.Lock()

    def post(env: Any) -> None:
        env.service.idempotency.bind_invocation(api_context())
        start.wait(10)
        try:
            result: Any = env.service.create_job(http.alice_owner, request, idempotency_key="k-10")
        except IdempotencyAlreadyInProgressError as error:
            result = error
        with lock:
            results.append(result)

    threads = [threading.Thread(target=post, args=(env,)) for env in environments]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(20)

    # Then: exactly one job; the other request saw it in flight (409) or replayed it
    jobs = http("GET", "/jobs").body["items"]
    assert len(jobs) == 1
    created = [r for r in results if not isinstance(r, Exception) and not r.replayed]
    assert len(results) == 2 and len(created) == 1 and created[0].job.id == jobs[0]["id"]
    other = next(r for r in results if r is not created[0])
    assert isinstance(other, IdempotencyAlreadyInProgressError) or other.job.id == jobs[0]["id"]


def test_a_trigger_retried_after_a_failure_past_its_run_names_the_same_run(http, monkeypatch):
    # The run is saved and enqueued, then completing the key's record fails (a throttle, a dead invocation): the
    # request fails and the key's record stays in flight until it expires. The client's retry with the same key
    # must not create a second run at a new instant (two run ids, both executed).
    from aws_lambda_powertools.utilities.idempotency.persistence.base import BasePersistenceLayer

    job = http.create()
    save_success = BasePersistenceLayer.save_success
    failures: list[int] = []

    def throttled(self: Any, *args: Any, **kwargs: Any) -> None:
        if not failures:
            failures.append(1)
            raise RuntimeError("ProvisionedThroughputExceededException")
        save_success(self, *args, **kwargs)

    monkeypatch.setattr(BasePersistenceLayer, "save_success", throttled)
    first = http("POST", f"/jobs/{job['id']}/trigger", headers=key("k-retry"))
    assert first.status >= 500 and failures
    # the in-flight record expires (the crashed invocation's time is up), and the client retries later
    http.backend.key_records.records[
        key_record_id(http.alice_owner, "k-retry")
    ].in_progress_expiry_timestamp = 0
    http.clock.advance(7_000)
    again = http("POST", f"/jobs/{job['id']}/trigger", headers=key("k-retry"))

    assert again.status == 202
    runs = http("GET", f"/jobs/{job['id']}/runs").body["items"]
    assert [r["id"] for r in runs] == [again.body["id"]]
    # and a new key is a new run
    other = http("POST", f"/jobs/{job['id']}/trigger", headers=key("k-other"))
    assert other.status == 202 and other.body["id"] != again.body["id"]


def test_a_body_giving_defaults_explicitly_is_the_same_request(http):
    # Equivalent bodies are one request (as the shorthand and the spelled-out target are); a repeat without a key
    # already treats them as the same job (200), so a repeat with the key must replay, not answer 422
    first = http("POST", "/jobs", body=http.job_body("report"), headers=key("k-defaults"))
    explicit = http.job_body("report", timezone="UTC", missed="catch_up", retry={"max_attempts": 4})
    without_key = http("POST", "/jobs", body=explicit)
    with_key = http("POST", "/jobs", body=explicit, headers=key("k-defaults"))

    assert first.status == 201 and without_key.status == 200
    assert with_key.status == 201, with_key.body
    assert with_key.headers.get("idempotent-replayed") == "true" and with_key.body["id"] == first.body["id"]


def test_a_create_keyed_before_the_fingerprint_took_defaults_still_replays(http):
    # Given a create with a key answered by the release before this one, whose fingerprint was the body as
    # sent (the fields given, ``exclude_unset``), as its record stays for 24 h across a deploy
    service = http.api.service
    request = JobCreate.model_validate(http.job_body("report"))
    first = service.create_job(http.alice_owner, request)
    service.idempotency.bind_invocation(api_context())
    service.idempotency.run(
        http.alice_owner,
        "k-deploy",
        {"op": "create_job", "body": request.model_dump(mode="json", exclude_unset=True)},
        lambda: {"job": first.job.model_dump(mode="json"), "created": True},
    )
    # When the client, which saw no answer, retries the same body with the same key after the deploy
    retry = http("POST", "/jobs", body=http.job_body("report"), headers=key("k-deploy"))
    # Then it gets the first answer again (expected the replay, 201), not 422 "key already used with a
    # different request": the request is the same, only how it is fingerprinted changed
    assert retry.status == 201, retry.body
    assert retry.headers.get("idempotent-replayed") == "true" and retry.body["id"] == first.job.id
