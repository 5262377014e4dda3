"""The provider's handler on a stubbed network (``httpx.MockTransport``): what it sends and how it answers
CloudFormation's requests, the failures included. Against local mode: ``tests/e2e/test_cdk_provider.py``."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from jobsched.cdk.provider import JobRefused, JobResource, changed_fields, idempotency_key
from jobsched.cdk.spec import complete_spec
from jobsched.client import JobschedClient

URL = "https://abc123.execute-api.eu-west-1.amazonaws.com/v1"
pytestmark = pytest.mark.usefixtures("aws_credentials")  # an API Gateway URL: calls are signed with SigV4

JOB = {"id": "j_0123456789abcdef0123", "name": "nightly"}


def handler_answering(status: int, body: Any, seen: list[httpx.Request]) -> JobResource:
    """A handler whose client gets ``status`` and ``body`` for every call, recording them in ``seen``."""

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(status, json=body)

    return JobResource(
        lambda url: JobschedClient(url, sigv4_region="eu-west-1", transport=httpx.MockTransport(answer))
    )


def props(name: str = "nightly", **fields: Any) -> dict[str, Any]:
    spec = complete_spec({"schedule": "0 2 * * *", "target": {"type": "command", "name": "echo"}, **fields})
    return {"ApiUrl": URL, "Name": name, "Spec": json.dumps(spec)}


def event(request: str, properties: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "RequestType": request,
        "RequestId": "r-1",
        "StackId": "arn:aws:cloudformation:eu-west-1:123456789012:stack/billing/1",
        "LogicalResourceId": "Nightly",
        "ResourceProperties": properties,
        **extra,
    }


def test_the_key_is_the_same_for_a_retried_request_and_differs_between_requests() -> None:
    first = event("Create", props())
    assert idempotency_key(first) == idempotency_key(dict(first))
    assert idempotency_key(first).startswith("cfn-") and len(idempotency_key(first)) == 44
    others = [
        {**first, "RequestId": "r-2"},
        {**first, "LogicalResourceId": "Other"},
        {**first, "StackId": "s"},
    ]
    assert len({idempotency_key(e) for e in [first, *others]}) == 4


def test_changed_fields_are_the_differing_ones_and_null_for_a_removed_one() -> None:
    old = {"schedule": "@daily", "timezone": "UTC", "input": {"a": 1}, "retry": {"max_attempts": 3}}
    new = {"schedule": "@hourly", "timezone": "UTC", "retry": {"max_attempts": 3}, "jitter_s": 5}
    assert changed_fields(old, new) == {"schedule": "@hourly", "jitter_s": 5, "input": None}
    assert changed_fields(new, dict(new)) == {}


def test_a_partial_policy_is_completed_so_removing_a_line_patches_the_default() -> None:
    # Given a job whose code sets an alert threshold and a backoff among other policy fields, then removes them
    before = complete_spec(
        {
            "schedule": "@daily",
            "target": {},
            "alerts": {"on_skipped": True, "late_after_s": 600},
            "retry": {"max_attempts": 3, "backoff_s": 5},
        }
    )
    after = complete_spec(
        {"schedule": "@daily", "target": {}, "alerts": {"on_skipped": True}, "retry": {"max_attempts": 3}}
    )

    # Then the PATCH names both with the API's defaults (the API merges these objects field by field, so a
    # field left out of the PATCH would keep its old value)
    patch = changed_fields(before, after)
    assert patch["alerts"]["late_after_s"] is None and patch["retry"]["backoff_s"] == 60
    assert set(patch) == {"alerts", "retry"}
    assert after["alerts"] == {
        "on_dead": True,
        "on_skipped": True,
        "on_cancelled": False,
        "late_after_s": None,
        "after_consecutive_failures": None,
        "pause_after_consecutive_dead": None,
    }


def test_create_posts_the_spec_with_the_derived_key() -> None:
    seen: list[httpx.Request] = []
    answer = handler_answering(201, JOB, seen).handle(event("Create", props()))

    assert answer == {"PhysicalResourceId": JOB["id"], "Data": {"JobId": JOB["id"], "Name": "nightly"}}
    [request] = seen
    assert (request.method, request.url.path) == ("POST", "/v1/jobs")
    assert request.headers["Idempotency-Key"] == idempotency_key(event("Create", props()))
    assert request.headers["Authorization"].startswith("AWS4-HMAC-SHA256 Credential=")
    assert "idempotency-key" in request.headers["Authorization"]  # the key is signed too
    body = json.loads(request.content)
    assert (
        body["name"] == "nightly" and body["schedule"] == "0 2 * * *" and body["retry"]["max_attempts"] == 4
    )


def scripted(
    answers: list[httpx.Response | None], seen: list[httpx.Request], slept: list[float]
) -> JobResource:
    """A handler whose client gets ``answers`` in turn (no answer, a read timeout, for None), recording the calls in
    ``seen`` and the pauses in ``slept``."""

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        response = answers.pop(0)
        if response is None:
            raise httpx.ReadTimeout("no answer", request=request)
        return response

    return JobResource(
        lambda url: JobschedClient(url, sigv4_region="eu-west-1", transport=httpx.MockTransport(answer)),
        sleep=slept.append,
    )


def test_a_create_without_an_answer_is_retried_with_the_same_key() -> None:
    # Given a create the API may have made while its answer was lost (a timeout, then a 502 of the gateway)
    seen: list[httpx.Request] = []
    slept: list[float] = []
    answers = [
        None,
        httpx.Response(502, json={"message": "Internal server error"}),
        httpx.Response(200, json=JOB),
    ]
    handler = scripted(answers, seen, slept)

    result = handler.handle(event("Create", props()))

    # Then the third attempt, with the same key, gets the job (the API replays it): one job, in the stack
    assert result["PhysicalResourceId"] == JOB["id"]
    assert [r.headers["Idempotency-Key"] for r in seen] == [idempotency_key(event("Create", props()))] * 3
    assert slept == [1.0, 2.0]


def test_a_refused_create_is_not_retried_and_a_create_never_answered_fails_after_three_attempts() -> None:
    refused: list[httpx.Request] = []
    bad = {"error": {"code": "invalid_schedule", "message": "nope", "field": "schedule"}}
    with pytest.raises(JobRefused, match="400 invalid_schedule: nope"):
        scripted([httpx.Response(400, json=bad)], refused, []).handle(event("Create", props()))
    assert len(refused) == 1
    lost: list[httpx.Request] = []
    with pytest.raises(JobRefused, match=r"job 'nightly' \(Create\): 503 "):
        scripted([httpx.Response(503, json={"message": "busy"})] * 3, lost, []).handle(
            event("Create", props())
        )
    assert len(lost) == 3


def test_an_update_patches_only_the_changed_fields() -> None:
    seen: list[httpx.Request] = []
    old, new = props(), props(jitter_s=30)
    handler_answering(200, JOB, seen).handle(
        event("Update", new, PhysicalResourceId=JOB["id"], OldResourceProperties=old)
    )
    [request] = seen
    assert (request.method, request.url.path) == ("PATCH", f"/v1/jobs/{JOB['id']}")
    assert json.loads(request.content) == {"jitter_s": 30}


@pytest.mark.parametrize("changed", ["Name", "ApiUrl"])
def test_a_new_name_or_api_is_a_new_job(changed: str) -> None:
    seen: list[httpx.Request] = []
    old = props()
    new = {**old, changed: "renamed" if changed == "Name" else URL.replace("abc123", "def456")}
    created = {"id": "j_ffffffffffffffffffff", "name": new["Name"]}

    answer = handler_answering(201, created, seen).handle(
        event("Update", new, PhysicalResourceId=JOB["id"], OldResourceProperties=old)
    )

    assert answer["PhysicalResourceId"] == created["id"]
    assert [(r.method, r.url.host) for r in seen] == [("POST", httpx.URL(new["ApiUrl"]).host)]


def test_an_api_url_written_with_a_trailing_slash_is_the_same_api() -> None:
    seen: list[httpx.Request] = []
    old, new = props(), {**props(jitter_s=30), "ApiUrl": URL + "/"}

    answer = handler_answering(200, JOB, seen).handle(
        event("Update", new, PhysicalResourceId=JOB["id"], OldResourceProperties=old)
    )

    assert answer["PhysicalResourceId"] == JOB["id"]
    assert [(r.method, r.url.path) for r in seen] == [("PATCH", f"/v1/jobs/{JOB['id']}")]


def test_an_update_of_a_job_deleted_outside_the_stack_creates_it_anew() -> None:
    # Given a job deleted by hand (the PATCH answers 404), then a create answering the new job
    seen: list[httpx.Request] = []
    created = {"id": "j_ffffffffffffffffffff", "name": "nightly"}
    gone = {"error": {"code": "not_found", "message": "no job j_0123456789abcdef0123", "field": None}}

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return (
            httpx.Response(404, json=gone) if request.method == "PATCH" else httpx.Response(201, json=created)
        )

    handler = JobResource(
        lambda url: JobschedClient(url, sigv4_region="eu-west-1", transport=httpx.MockTransport(answer))
    )
    update = event("Update", props(jitter_s=30), PhysicalResourceId=JOB["id"], OldResourceProperties=props())

    result = handler.handle(update)

    # Then the job is created from the whole spec under a new physical id (CloudFormation deletes the old one)
    assert result["PhysicalResourceId"] == created["id"]
    assert [r.method for r in seen] == ["PATCH", "POST"]
    assert seen[1].headers["Idempotency-Key"] == idempotency_key(update)
    assert json.loads(seen[1].content)["jitter_s"] == 30 and json.loads(seen[1].content)["name"] == "nightly"


def test_deleting_a_job_already_gone_succeeds() -> None:
    seen: list[httpx.Request] = []
    gone = {"error": {"code": "not_found", "message": "no job j_0123456789abcdef0123", "field": None}}
    answer = handler_answering(404, gone, seen).handle(event("Delete", props(), PhysicalResourceId=JOB["id"]))
    assert answer == {"PhysicalResourceId": JOB["id"]}
    assert [(r.method, r.url.path) for r in seen] == [("DELETE", f"/v1/jobs/{JOB['id']}")]


def test_a_refused_delete_fails_with_the_apis_error() -> None:
    denied = {"error": {"code": "forbidden", "message": "User is not authorized", "field": None}}
    with pytest.raises(JobRefused) as refused:
        handler_answering(403, denied, []).handle(event("Delete", props(), PhysicalResourceId=JOB["id"]))
    assert str(refused.value) == "job 'nightly' (Delete): 403 forbidden: User is not authorized"


def test_an_unreachable_api_fails_the_request_saying_so() -> None:
    def down(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    slept: list[float] = []
    handler = JobResource(
        lambda url: JobschedClient(url, transport=httpx.MockTransport(down)), sleep=slept.append
    )
    with pytest.raises(JobRefused) as refused:
        handler.handle(event("Create", props()))
    assert str(refused.value).startswith(f"job 'nightly' (Create): cannot reach the API at {URL}")
    assert slept == [1.0, 2.0]  # tried three times


def test_an_event_the_construct_never_writes_is_refused_naming_what_is_wrong() -> None:
    handler = handler_answering(200, JOB, [])
    with pytest.raises(ValueError, match="unknown RequestType 'Rollback'"):
        handler.handle(event("Rollback", props()))
    with pytest.raises(ValueError, match="the Spec property must be a JSON object, not list"):
        handler.handle(event("Create", {**props(), "Spec": "[1]"}))


def test_a_spec_broken_by_a_deploy_time_value_is_refused_naming_the_job() -> None:
    # A token's value is spliced into the Spec's JSON text unescaped (CloudFormation's Fn::Join): a quote in it
    broken = props()["Spec"].replace('"name": "echo"', '"name": "say "hi""')
    with pytest.raises(ValueError) as refused:
        handler_answering(201, JOB, []).handle(event("Create", {**props(), "Spec": broken}))
    assert str(refused.value).startswith("job 'nightly': the Spec property is not JSON (Expecting ")
    assert "holds a quote or a backslash" in str(refused.value)
