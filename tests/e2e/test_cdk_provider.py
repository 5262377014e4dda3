"""The provider of ``jobsched.cdk.Job`` against local mode, as CloudFormation drives it: create, a retried
create, an update, a replacement (a new name), deletes, and a refused spec. Its calls are signed with SigV4
from the function's credentials (fixed keys here) and go through a double of API Gateway's IAM auth
(``tests.support.iam_gateway``), which forwards only correctly signed requests to local mode."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from jobsched.cdk.provider import JobRefused, JobResource
from jobsched.cdk.spec import complete_spec
from jobsched.local.server import ApiServer
from tests.e2e.support import LocalProcess
from tests.support.iam_gateway import KEYS, REGION, IamGateway

pytestmark = pytest.mark.e2e

STACK_ID = "arn:aws:cloudformation:eu-west-1:123456789012:stack/billing/0f2c"


@dataclass
class Api:
    local: LocalProcess
    gateway: IamGateway
    url: str


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    """Local mode and the IAM double in front of it (the API the provider is given)."""
    local = LocalProcess(tmp_path_factory.mktemp("cdk") / "data")
    gateway = IamGateway(local.url, local.token)
    server = ApiServer(gateway, "127.0.0.1", 0)
    server.start()
    try:
        yield Api(local, gateway, server.url)
    finally:
        server.stop()
        local.stop()


@pytest.fixture
def function_role(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The provider function's environment: its role's keys (``KEYS``) and region, nothing else to find."""
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", KEYS.access_key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", KEYS.secret_key)
    monkeypatch.setenv("AWS_REGION", REGION)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


def properties(api: Api, name: str, **fields: Any) -> dict[str, Any]:
    """The resource properties ``Job(..., name=name, **fields)`` writes (``Spec`` as the construct builds it)."""
    spec = complete_spec({"target": {"type": "command", "name": "echo"}, **fields})
    return {"ServiceToken": "arn:aws:lambda:x", "ApiUrl": api.url, "Name": name, "Spec": json.dumps(spec)}


def event(request: str, logical_id: str, props: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """A provider framework ``onEvent`` event: ``request`` of the resource ``logical_id`` with ``props``."""
    return {
        "RequestType": request,
        "RequestId": str(uuid.uuid4()),
        "StackId": STACK_ID,
        "LogicalResourceId": logical_id,
        "ResourceType": "Custom::JobschedJob",
        "ResourceProperties": props,
        **extra,
    }


def jobs_named(api: Api, name: str) -> list[dict[str, Any]]:
    items = api.local.http.get("/jobs", params={"limit": "100"}).json()["items"]
    return [job for job in items if job["name"] == name]


def test_create_update_replace_and_delete_follow_the_stack(api: Api, function_role: None) -> None:
    handler = JobResource()
    first = properties(api, "nightly-invoices", schedule="0 2 * * *", timezone="Europe/Berlin")

    # When CloudFormation creates the resource, and retries the same request (same RequestId)
    create = event("Create", "NightlyInvoices", first)
    made = handler.handle(create)
    again = handler.handle(create)

    # Then one job exists, its id the physical id, both answers the same: the retry replayed the first
    assert api.gateway.answered[-2:] == ["POST /jobs 201", "POST /jobs 201 replayed"]
    job_id = made["PhysicalResourceId"]
    assert (
        again == made == {"PhysicalResourceId": job_id, "Data": {"JobId": job_id, "Name": "nightly-invoices"}}
    )
    [job] = jobs_named(api, "nightly-invoices")
    assert (job["id"], job["schedule"], job["timezone"]) == (job_id, "0 2 * * *", "Europe/Berlin")

    # When the schedule changes under the same name
    second = properties(api, "nightly-invoices", schedule="30 3 * * *", timezone="Europe/Berlin")
    updated = handler.handle(
        event("Update", "NightlyInvoices", second, PhysicalResourceId=job_id, OldResourceProperties=first)
    )

    # Then the same job is PATCHed with the schedule alone
    assert updated["PhysicalResourceId"] == job_id
    [job] = jobs_named(api, "nightly-invoices")
    assert job["schedule"] == "30 3 * * *"
    events = api.local.http.get(f"/jobs/{job_id}/events").json()["items"]
    assert [(e["kind"], e["detail"]) for e in events if e["kind"] == "updated"] == [
        ("updated", {"fields": ["schedule"]})
    ]

    # When the name changes: a new job, then CloudFormation deletes the old one
    third = properties(api, "invoices-nightly", schedule="30 3 * * *", timezone="Europe/Berlin")
    replaced = handler.handle(
        event("Update", "NightlyInvoices", third, PhysicalResourceId=job_id, OldResourceProperties=second)
    )
    new_id = replaced["PhysicalResourceId"]
    assert new_id != job_id and [j["id"] for j in jobs_named(api, "invoices-nightly")] == [new_id]
    assert [j["id"] for j in jobs_named(api, "nightly-invoices")] == [job_id]
    deleted = handler.handle(event("Delete", "NightlyInvoices", second, PhysicalResourceId=job_id))

    # Then the old job is gone and the new one stays
    assert deleted == {"PhysicalResourceId": job_id}
    assert api.local.http.get(f"/jobs/{job_id}").status_code == 404
    assert jobs_named(api, "nightly-invoices") == []
    assert [j["id"] for j in jobs_named(api, "invoices-nightly")] == [new_id]

    # When the stack is deleted, twice (the job already gone the second time)
    for _ in range(2):
        assert handler.handle(event("Delete", "NightlyInvoices", third, PhysicalResourceId=new_id)) == {
            "PhysicalResourceId": new_id
        }
    assert jobs_named(api, "invoices-nightly") == []

    # and every call reached local mode through the signature check
    assert api.gateway.refused == []
    assert {"POST /jobs", f"PATCH /jobs/{job_id}", f"DELETE /jobs/{job_id}"} <= set(api.gateway.verified)


def test_an_update_with_nothing_changed_calls_nothing(api: Api, function_role: None) -> None:
    handler = JobResource()
    props = properties(api, "unchanged", schedule="@hourly")
    job_id = handler.handle(event("Create", "Unchanged", props))["PhysicalResourceId"]
    calls = len(api.gateway.verified)

    same = handler.handle(
        event("Update", "Unchanged", props, PhysicalResourceId=job_id, OldResourceProperties=props)
    )

    assert same == {"PhysicalResourceId": job_id, "Data": {"JobId": job_id, "Name": "unchanged"}}
    assert len(api.gateway.verified) == calls
    handler.handle(event("Delete", "Unchanged", props, PhysicalResourceId=job_id))


def test_a_refused_spec_fails_with_the_apis_own_error(api: Api, function_role: None) -> None:
    # Given a spec the API refuses, as it answers a direct call
    props = properties(api, "bad-schedule", schedule="61 * * * *")
    direct = api.local.http.post("/jobs", json={"name": "bad-schedule", **json.loads(props["Spec"])})
    assert direct.status_code == 400, direct.text
    error = direct.json()["error"]

    # When CloudFormation creates it
    with pytest.raises(JobRefused) as refused:
        JobResource().handle(event("Create", "BadSchedule", props))

    # Then the failure reason is the API's error: status, code, message and field
    assert str(refused.value) == (
        f"job 'bad-schedule' (Create): 400 {error['code']}: {error['message']} (field: {error['field']})"
    )
    assert error["field"] == "schedule"
    assert jobs_named(api, "bad-schedule") == []


def test_a_refused_update_fails_with_the_apis_own_error(api: Api, function_role: None) -> None:
    handler = JobResource()
    good = properties(api, "to-break", schedule="@daily")
    job_id = handler.handle(event("Create", "ToBreak", good))["PhysicalResourceId"]
    bad = properties(api, "to-break", schedule="@daily", timezone="Mars/Olympus")

    with pytest.raises(JobRefused) as refused:
        handler.handle(event("Update", "ToBreak", bad, PhysicalResourceId=job_id, OldResourceProperties=good))

    assert refused.value.error.status == 400 and refused.value.error.field == "timezone"
    assert str(refused.value).startswith("job 'to-break' (Update): 400 ")
    assert api.local.http.get(f"/jobs/{job_id}").json()["timezone"] == "UTC"
    handler.handle(event("Delete", "ToBreak", good, PhysicalResourceId=job_id))


def test_a_rolled_back_replacement_returns_to_the_old_job(api: Api, function_role: None) -> None:
    # Given a job replaced by a new name, whose deployment then fails elsewhere
    handler = JobResource()
    old = properties(api, "before-rename", schedule="@daily")
    new = properties(api, "after-rename", schedule="@daily")
    old_id = handler.handle(event("Create", "Renamed", old))["PhysicalResourceId"]
    new_id = handler.handle(
        event("Update", "Renamed", new, PhysicalResourceId=old_id, OldResourceProperties=old)
    )["PhysicalResourceId"]

    # When CloudFormation rolls back: the update in reverse, then the delete of what the update made
    back = handler.handle(
        event("Update", "Renamed", old, PhysicalResourceId=new_id, OldResourceProperties=new)
    )
    handler.handle(event("Delete", "Renamed", new, PhysicalResourceId=new_id))

    # Then the resource is the old job again (same id, same spec), and the new one is gone
    assert back["PhysicalResourceId"] == old_id
    assert [j["id"] for j in jobs_named(api, "before-rename")] == [old_id]
    assert jobs_named(api, "after-rename") == []
    handler.handle(event("Delete", "Renamed", old, PhysicalResourceId=old_id))
