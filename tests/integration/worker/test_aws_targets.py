"""``lambda`` targets (botocore Stubber) and ``sqs`` targets (moto, standard and FIFO)."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.response import StreamingBody
from botocore.stub import Stubber

from jobsched.aws.clients import Aws
from jobsched.aws.queue import delivery_of
from jobsched.domain.retries import Outcome
from jobsched.models import LambdaTarget, RunStatus, SqsTarget
from jobsched.ports.runs import run_id
from jobsched.ports.targets import TargetCall, TargetFailed
from jobsched.targets import Targets
from jobsched.targets.aws import LambdaExecutor, SqsExecutor
from tests.support.worker import Kit

from .conftest import T0, Drain

ENVELOPE_KEYS = {"run_id", "job_id", "scheduled_for", "attempt", "input"}


def _payload(data: Any) -> StreamingBody:
    raw = json.dumps(data).encode()
    return StreamingBody(io.BytesIO(raw), len(raw))


@pytest.fixture
def lambda_client() -> Iterator[tuple[Any, Stubber]]:
    client = boto3.client("lambda", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    with Stubber(client) as stubber:
        yield client, stubber
        stubber.assert_no_pending_responses()


def _call(attempt: int = 1) -> TargetCall:
    return TargetCall(run_id=f"j_1@{T0}", job_id="j_1", scheduled_for_ms=T0, attempt=attempt, input={"n": 1})


def _invoke_params(call: TargetCall, function: str = "billing") -> dict[str, Any]:
    return {
        "FunctionName": function,
        "InvocationType": "RequestResponse",
        "Payload": json.dumps(call.envelope(), separators=(",", ":")).encode(),
    }


def test_lambda_invoke_sends_the_envelope_synchronously(lambda_client: tuple[Any, Stubber]) -> None:
    client, stubber = lambda_client
    call = _call()
    stubber.add_response(
        "invoke", {"StatusCode": 200, "Payload": _payload({"ok": True})}, _invoke_params(call)
    )
    assert (
        LambdaExecutor(lambda: client).execute(LambdaTarget(function="billing"), call)
        == "lambda billing: status 200"
    )
    assert call.envelope() == {
        "run_id": f"j_1@{T0}",
        "job_id": "j_1",
        "scheduled_for": "2026-01-05T02:00:00Z",
        "attempt": 1,
        "input": {"n": 1},
    }


def test_lambda_function_error_fails_the_try_with_its_payload(lambda_client: tuple[Any, Stubber]) -> None:
    client, stubber = lambda_client
    call = _call()
    error = {"errorMessage": "card declined", "errorType": "PaymentError"}
    stubber.add_response(
        "invoke",
        {"StatusCode": 200, "FunctionError": "Unhandled", "Payload": _payload(error)},
        _invoke_params(call),
    )
    with pytest.raises(TargetFailed, match=r"lambda billing failed \(Unhandled\): .*card declined"):
        LambdaExecutor(lambda: client).execute(LambdaTarget(function="billing"), call)


def test_lambda_client_error_fails_the_try(lambda_client: tuple[Any, Stubber]) -> None:
    client, stubber = lambda_client
    stubber.add_client_error("invoke", "ResourceNotFoundException", "Function not found: nope")
    with pytest.raises(TargetFailed, match="lambda nope: ResourceNotFoundException: Function not found"):
        LambdaExecutor(lambda: client).execute(LambdaTarget(function="nope"), _call())


def test_lambda_target_through_the_worker_keeps_the_run_id_across_attempts(
    kit: Kit, lambda_client: tuple[Any, Stubber]
) -> None:
    client, stubber = lambda_client
    targets = Targets(lambda_=LambdaExecutor(lambda: client))
    worker = kit.build_worker(targets=targets)
    job = kit.make_job(
        target={"type": "lambda", "function": "billing"}, input={"n": 1}, retry={"backoff_s": 1}
    )
    kit.make_run(job)
    first = TargetCall(
        run_id=run_id(job.id, T0), job_id=job.id, scheduled_for_ms=T0, attempt=1, input={"n": 1}
    )
    second = TargetCall(
        run_id=run_id(job.id, T0), job_id=job.id, scheduled_for_ms=T0, attempt=2, input={"n": 1}
    )
    stubber.add_response(
        "invoke",
        {"StatusCode": 200, "FunctionError": "Unhandled", "Payload": _payload({"errorMessage": "x"})},
        _invoke_params(first),
    )
    stubber.add_response("invoke", {"StatusCode": 200, "Payload": _payload(None)}, _invoke_params(second))
    assert worker.handle(delivery_of(kit.record(job.id, T0))) == Outcome.RETRYING
    kit.clock.advance(1_000)
    assert worker.handle(delivery_of(kit.record(job.id, T0))) == Outcome.SUCCEEDED
    row = kit.runs.get(job.id, T0)
    assert row is not None and row.status == RunStatus.SUCCEEDED and row.attempt == 2


def test_sqs_target_sends_the_envelope(aws: Aws, drain: Drain) -> None:
    url = aws.sqs.create_queue(QueueName="team-inbox")["QueueUrl"]
    SqsExecutor(lambda: aws.sqs).execute(SqsTarget(queue_url=url), _call())
    (message,) = drain(url)
    assert json.loads(message["Body"]) == _call().envelope()
    assert set(json.loads(message["Body"])) == ENVELOPE_KEYS
    assert message["MessageAttributes"]["run_id"]["StringValue"] == f"j_1@{T0}"


def test_sqs_fifo_target_deduplicates_on_the_run_id(aws: Aws, drain: Drain) -> None:
    url = aws.sqs.create_queue(QueueName="team-inbox.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    executor = SqsExecutor(lambda: aws.sqs)
    executor.execute(SqsTarget(queue_url=url), _call(attempt=1))
    executor.execute(SqsTarget(queue_url=url), _call(attempt=2))  # a retry of the same run: same key
    messages = drain(url)
    assert len(messages) == 1
    assert messages[0]["Attributes"]["MessageDeduplicationId"] == f"j_1@{T0}"
    assert messages[0]["Attributes"]["MessageGroupId"] == "j_1"


def test_sqs_target_error_fails_the_try(aws: Aws) -> None:
    with pytest.raises(TargetFailed, match=r"sqs .*missing"):
        SqsExecutor(lambda: aws.sqs).execute(
            SqsTarget(queue_url="https://sqs.us-east-1.amazonaws.com/123456789012/missing"), _call()
        )


def test_a_worker_without_an_executor_for_a_type_fails_the_try() -> None:
    with pytest.raises(TargetFailed, match="cannot run sqs targets"):
        Targets().execute(SqsTarget(queue_url="https://x/q"), _call())


# --- what a try records (design §5.7) ----------------------------------------------------------------


def test_lambda_output_is_the_head_of_the_payload_or_of_the_function_error(
    lambda_client: tuple[Any, Stubber],
) -> None:
    client, stubber = lambda_client
    ok, failed = _call(), _call()
    stubber.add_response(
        "invoke", {"StatusCode": 200, "Payload": _payload({"rows": "r" * 1_000})}, _invoke_params(ok)
    )
    error = {"errorMessage": "card declined " + "d" * 5_000, "errorType": "PaymentError"}
    stubber.add_response(
        "invoke",
        {"StatusCode": 200, "FunctionError": "Unhandled", "Payload": _payload(error)},
        _invoke_params(failed),
    )
    executor = LambdaExecutor(lambda: client)
    executor.execute(LambdaTarget(function="billing"), ok)
    assert ok.output is not None and ok.output.startswith('{"rows": "rrr') and len(ok.output.encode()) <= 256
    with pytest.raises(TargetFailed):
        executor.execute(LambdaTarget(function="billing"), failed)
    assert failed.output is not None and failed.output.startswith('{"errorMessage": "card declined ddd')
    assert 256 < len(failed.output.encode()) <= 3072


def test_sqs_output_is_the_message_id(aws: Aws, drain: Drain) -> None:
    url = aws.sqs.create_queue(QueueName="team-inbox")["QueueUrl"]
    call = _call()
    SqsExecutor(lambda: aws.sqs).execute(SqsTarget(queue_url=url), call)
    (message,) = drain(url)
    assert call.output == message["MessageId"]
