"""Registration refuses a lambda/sqs target whose owner tag names another team (400 naming ``target``)."""

from __future__ import annotations

import io
import json
import zipfile
from typing import Any

from jobsched.aws.clients import Aws

TAG = "jobsched:owner"


def _queue(aws: Aws, name: str, tags: dict[str, str] | None = None) -> str:
    url: str = aws.sqs.create_queue(QueueName=name, tags=tags or {})["QueueUrl"]
    return url


def _function(aws: Aws, name: str, tags: dict[str, str]) -> str:
    role = aws._client("iam").create_role(
        RoleName=f"{name}-role",
        AssumeRolePolicyDocument=json.dumps({"Version": "2012-10-17", "Statement": []}),
    )["Role"]["Arn"]
    code = io.BytesIO()
    with zipfile.ZipFile(code, "w") as archive:
        archive.writestr("index.py", "def handler(event, context):\n    return event\n")
    arn: str = aws.lambda_.create_function(
        FunctionName=name,
        Runtime="python3.12",
        Role=role,
        Handler="index.handler",
        Code={"ZipFile": code.getvalue()},
        Tags=tags,
    )["FunctionArn"]
    return arn


def test_a_queue_tagged_for_another_team_is_refused(http: Any) -> None:
    url = _queue(http.aws, "search-inbox", {TAG: http.bob_owner})
    reply = http("POST", "/jobs", body=http.job_body("steal", target={"type": "sqs", "queue_url": url}))
    assert reply.status == 400
    error = reply.body["error"]
    assert error["field"] == "target"
    assert f"{TAG}={http.bob_owner}" in error["message"] and http.alice_owner in error["message"]


def test_a_queue_tagged_for_the_owner_or_untagged_is_accepted(http: Any) -> None:
    own = _queue(http.aws, "billing-inbox", {TAG: http.alice_owner})
    http.create("mine", target={"type": "sqs", "queue_url": own})
    # Untagged: nothing to tell from here; IAM decides at run time (the target role needs the tag)
    http.create("untagged", target={"type": "sqs", "queue_url": _queue(http.aws, "plain-inbox")})


def test_a_function_tagged_for_another_team_is_refused_by_name_and_by_arn(http: Any) -> None:
    arn = _function(http.aws, "search-indexer", {TAG: http.bob_owner})
    for function in ("search-indexer", arn, f"{arn}:live", "search-indexer:live"):
        reply = http(
            "POST", "/jobs", body=http.job_body("steal", target={"type": "lambda", "function": function})
        )
        assert reply.status == 400 and reply.body["error"]["field"] == "target", function


def test_a_patch_to_a_foreign_target_is_refused(http: Any) -> None:
    job = http.create("moving")
    url = _queue(http.aws, "search-queue", {TAG: http.bob_owner})
    reply = http("PATCH", f"/jobs/{job['id']}", body={"target": {"type": "sqs", "queue_url": url}})
    assert reply.status == 400 and reply.body["error"]["field"] == "target"


def test_an_unreadable_target_is_left_to_iam(http: Any) -> None:
    # A queue that does not exist here (another account, or no permission to read its tags)
    url = "https://sqs.us-east-1.amazonaws.com/210987654321/elsewhere"
    http.create("elsewhere", target={"type": "sqs", "queue_url": url})


def test_a_malformed_target_name_is_not_a_server_error(http: Any) -> None:
    # Whatever the tag lookup makes of it (here an invalid ARN), the API decides without a 5xx
    for function in ("arn:aws:lambda:nowhere", "x" * 200, "a:b:c:d"):
        reply = http(
            "POST", "/jobs", body=http.job_body("odd", target={"type": "lambda", "function": function})
        )
        assert reply.status in (200, 201, 400), (function, reply.status)
        if reply.status != 400:
            http("DELETE", f"/jobs/{reply.body['id']}")
