"""The worker acts for the job's owner on ``lambda`` and ``sqs`` targets, so a team cannot aim a job at
another team's function or queue (no confused deputy).

In AWS it assumes the target role with the owner as session tag and IAM refuses a foreign target; without
a target role (local mode, moto enforces no IAM) it refuses a target whose owner tag names another owner.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from botocore.stub import Stubber

from jobsched.aws.clients import Aws
from jobsched.aws.queue import delivery_of
from jobsched.domain.worker import Deferred
from jobsched.models import LambdaTarget, RunStatus, SqsTarget
from jobsched.ports.targets import TargetCall, TargetFailed
from jobsched.runtime.wiring import Components
from jobsched.settings import Settings
from jobsched.targets.aws import LambdaExecutor
from jobsched.targets.ownership import (
    OWNER_SESSION_TAG,
    REFRESH_BEFORE_S,
    ActingForOwner,
    OwnerClients,
    TargetTags,
)
from tests.support.worker import Kit

from .conftest import T0

TAG = "jobsched:owner"
ROLE = "arn:aws:iam::123456789012:role/jobsched-TargetRole"


def _queue(aws: Aws, name: str, owner: str | None) -> str:
    url: str = aws.sqs.create_queue(QueueName=name, tags={TAG: owner} if owner else {})["QueueUrl"]
    return url


def _call(owner: str | None = "team-a") -> TargetCall:
    return TargetCall(run_id=f"j_1@{T0}", job_id="j_1", scheduled_for_ms=T0, attempt=1, owner=owner)


@pytest.fixture
def run_once(kit: Kit) -> Callable[..., dict[str, Any]]:
    """``run_once(target, settings=...)``: one try of a one-attempt job of team A; returns the run row."""

    def run(target: dict[str, Any], worker_settings: Settings = kit.settings) -> dict[str, Any]:
        worker = kit.build_worker(worker_settings)
        job = kit.make_job(owner="team-a", target=target, retry={"max_attempts": 1})
        kit.make_run(job)
        worker.handle(delivery_of(kit.record(job.id, T0)))
        row = kit.runs.get(job.id, T0)
        assert row is not None
        return row

    return run


# -- without a target role (local mode): the owner tag is checked in code ----------------------------


def test_a_queue_of_another_team_is_refused_and_gets_nothing(
    kit: Kit, run_once: Callable[..., dict[str, Any]]
) -> None:
    # Given team B's queue, tagged as B's
    url = _queue(kit.aws, "team-b-inbox", "team-b")
    # When a job of team A aimed at it runs
    row = run_once({"type": "sqs", "queue_url": url})
    # Then the try is refused, naming the tag, and B's queue receives nothing
    assert row.status == RunStatus.DEAD
    assert "refused" in row.error and f"{TAG}=team-b" in row.error and "team-a" in row.error
    assert kit.drain(url) == []


@pytest.mark.parametrize("owner", ["team-a", None])
def test_the_owners_own_or_an_untagged_queue_receives_the_run(
    kit: Kit, run_once: Callable[..., dict[str, Any]], owner: str | None
) -> None:
    url = _queue(kit.aws, f"inbox-{owner}", owner)
    row = run_once({"type": "sqs", "queue_url": url})
    assert row.status == RunStatus.SUCCEEDED
    assert len(kit.drain(url)) == 1


# -- with a target role (AWS): the worker acts for the owner, IAM decides ----------------------------


def test_the_worker_assumes_the_target_role_tagged_with_the_jobs_owner(
    kit: Kit, run_once: Callable[..., dict[str, Any]]
) -> None:
    # Given a deployment with a target role, and the worker's STS requests recorded
    assumed: list[dict[str, Any]] = []
    kit.aws.sts.meta.events.register(
        "provide-client-params.sts.AssumeRole", lambda params, **_: assumed.append(dict(params))
    )
    url = _queue(kit.aws, "team-a-inbox", "team-a")
    # When a job of team A runs, twice
    with_role = kit.settings.model_copy(update={"target_role_arn": ROLE})
    rows = [run_once({"type": "sqs", "queue_url": url}, with_role) for _ in range(2)]
    # Then the target was reached through one session of the target role carrying the owner as session tag
    assert [row.status for row in rows] == [RunStatus.SUCCEEDED] * 2
    assert len(kit.drain(url)) == 2
    assert len(assumed) == 2  # one session per worker (each run_once builds one): reused within a worker
    assert {a["RoleArn"] for a in assumed} == {ROLE}
    assert all(a["Tags"] == [{"Key": OWNER_SESSION_TAG, "Value": "team-a"}] for a in assumed)


def _stubbed_lambda() -> tuple[Any, Stubber]:
    client = boto3.client("lambda", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    return client, Stubber(client)


class FakeClients:
    """``OwnerClients``' interface, handing out one prepared client."""

    role_arn = ROLE

    def __init__(self, client: Any) -> None:
        self._client = client
        self.owners: list[str] = []

    def client(self, service: str, owner: str) -> Any:
        self.owners.append(owner)
        return self._client


def _acting(clients: Any, tags: TargetTags | None = None) -> ActingForOwner:
    return ActingForOwner(
        "lambda",
        per_client=LambdaExecutor,
        clients=clients,
        local=LambdaExecutor(lambda: None),
        tags=tags or TargetTags(TAG, lambda_client=object, sqs_client=object, sts_client=object),
    )


def test_an_iam_refusal_fails_the_try_saying_how_to_tag_the_target() -> None:
    # Given IAM refusing the invoke (the function is not tagged for team A)
    client, stubber = _stubbed_lambda()
    stubber.add_client_error(
        "invoke", "AccessDeniedException", "not authorized to perform lambda:InvokeFunction"
    )
    clients = FakeClients(client)
    with stubber, pytest.raises(TargetFailed) as failed:
        _acting(clients).execute(LambdaTarget(function="search-indexer"), _call("team-a"))
    # Then the message says IAM refused it and which tag would allow it
    assert str(failed.value).startswith("refused by IAM: lambda search-indexer: AccessDeniedException")
    assert f"{TAG}=team-a" in str(failed.value)
    assert clients.owners == ["team-a"]


def test_other_failures_are_left_as_they_are() -> None:
    client, stubber = _stubbed_lambda()
    stubber.add_client_error("invoke", "ResourceNotFoundException", "no such function")
    with stubber, pytest.raises(TargetFailed, match=r"^lambda nope: ResourceNotFoundException"):
        _acting(FakeClients(client)).execute(LambdaTarget(function="nope"), _call())


def test_a_role_that_cannot_be_assumed_fails_the_try(aws: Aws) -> None:
    class Refusing:
        role_arn = ROLE

        def client(self, service: str, owner: str) -> Any:
            return aws.sts.assume_role(RoleArn="not-an-arn", RoleSessionName="x")

    with pytest.raises(TargetFailed, match=f"cannot act for owner team-a .*{ROLE}") as refused:
        _acting(Refusing()).execute(LambdaTarget(function="f"), _call())
    assert type(refused.value) is TargetFailed  # a refusal counts as a try (never given back forever)


def test_an_owner_sts_rejects_fails_the_try_and_is_not_given_back() -> None:
    class Rejecting:
        role_arn = ROLE

        def client(self, service: str, owner: str) -> Any:
            raise ClientError(
                {"Error": {"Code": "ValidationError", "Message": "bad tag value"}}, "AssumeRole"
            )

    with pytest.raises(TargetFailed) as failed:
        _acting(Rejecting()).execute(LambdaTarget(function="f"), _call(owner="arn:aws:iam::1:user/a,b"))
    assert type(failed.value) is TargetFailed


def test_a_run_without_owner_is_not_run() -> None:
    with pytest.raises(TargetFailed, match="no owner"):
        _acting(None).execute(SqsTarget(queue_url="https://q/x"), _call(owner=None))


def test_owner_sessions_are_reused_then_renewed_before_they_expire(aws: Aws) -> None:
    # Given owner sessions on moto's STS and a clock we move
    made: list[tuple[str, str]] = []
    now = [0.0]

    def make_client(service: str, credentials: dict[str, str]) -> Any:
        made.append((service, credentials["aws_access_key_id"]))
        return object()

    clients = OwnerClients(ROLE, sts_client=lambda: aws.sts, make_client=make_client, now_s=lambda: now[0])
    first = clients.client("sqs", "team-a")
    expires = clients._credentials["team-a"].expires_at_s
    now[0] = expires - REFRESH_BEFORE_S - 1
    # Then a client is reused while its session has time left for a whole try
    assert clients.client("sqs", "team-a") is first
    assert clients.client("sqs", "team-b") is not first  # another owner, another session
    # And renewed once less than REFRESH_BEFORE_S is left
    now[0] = expires - REFRESH_BEFORE_S + 1
    assert clients.client("sqs", "team-a") is not first
    assert [service for service, _ in made] == ["sqs"] * 3
    assert len({key for _, key in made}) == 3


def test_local_mode_refuses_a_function_tagged_for_another_owner() -> None:
    # Given a function whose tag names team B (read with the worker's own client)
    client, stubber = _stubbed_lambda()
    stubber.add_response("list_tags", {"Tags": {TAG: "team-b"}})
    sts = boto3.client("sts", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    sts_stub = Stubber(sts)
    sts_stub.add_response(
        "get_caller_identity",
        {"Account": "123456789012", "Arn": "arn:aws:iam::123456789012:user/w", "UserId": "w"},
    )
    tags = TargetTags(TAG, lambda_client=lambda: client, sqs_client=object, sts_client=lambda: sts)
    with (
        stubber,
        sts_stub,
        pytest.raises(TargetFailed, match=f"refused: lambda billing is tagged {TAG}=team-b"),
    ):
        _acting(None, tags).execute(LambdaTarget(function="billing"), _call("team-a"))


def test_build_targets_acts_for_the_owner_only_with_a_target_role(settings: Settings, aws: Aws) -> None:
    local = Components(settings, aws).targets()
    deployed = Components(settings.model_copy(update={"target_role_arn": ROLE}), aws).targets()
    for targets, role in ((local, None), (deployed, ROLE)):
        for executor in (targets._by_type[LambdaTarget], targets._by_type[SqsTarget]):
            assert isinstance(executor, ActingForOwner)
            assert (executor.clients.role_arn if executor.clients else None) == role


def test_a_throttled_assume_role_before_the_target_starts_gives_the_claim_back(
    kit: Kit, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The worker's other pre-target call, STS AssumeRole of the target role: a throttle there (after the SDK's
    # retries) failing the try would, with max_attempts 1, make the run dead and alert the owner although the
    # target never ran. So the claim is given back; a refusal stays a failed try.
    def throttled(self: Any, service: str, owner: str) -> Any:
        raise ClientError({"Error": {"Code": "Throttling", "Message": "Rate exceeded"}}, "AssumeRole")

    monkeypatch.setattr(OwnerClients, "client", throttled)
    url = _queue(kit.aws, "team-a-inbox2", "team-a")
    worker = kit.build_worker(kit.settings.model_copy(update={"target_role_arn": ROLE}))
    job = kit.due_job(owner="team-a", target={"type": "sqs", "queue_url": url}, retry={"max_attempts": 1})
    with pytest.raises(Deferred):
        worker.handle(delivery_of(kit.record(job.id, T0)))
    row = kit.runs.get(job.id, T0)
    assert row is not None and row.status == RunStatus.QUEUED and row.attempt == 0
