"""Owners from a principal tag (``owner_from = "tag:team"``) through the Lambda handler, with the tags in moto's
IAM (``jobsched.aws.principals.IamPrincipalTags``): sessions of roles with one tag value share jobs, a role
re-created under the same name with another tag gets none of them, a caller without the tag gets 403."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest

from jobsched.api.auth import OWNER_TAG_TTL_MS
from jobsched.aws.clients import Aws
from jobsched.clock import FakeClock
from jobsched.settings import Settings
from tests.support.api import ACCOUNT, Http, moto_api, session_arn

_names = itertools.count(1)
TRUST = json.dumps(
    {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Principal": {"AWS": ACCOUNT}, "Action": "sts:AssumeRole"}],
    }
)


@pytest.fixture
def http(deployment: tuple[Aws, Settings], clock: FakeClock) -> Http:
    aws, settings = deployment
    return Http(moto_api(aws), settings.model_copy(update={"owner_from": "tag:team"}), clock, aws=aws)


def role(aws: Aws, name: str, **tags: str) -> str:
    """Create IAM role ``name`` (unique per test run) tagged ``tags``; returns its name."""
    aws.iam.create_role(
        RoleName=name,
        AssumeRolePolicyDocument=TRUST,
        Tags=[{"Key": key, "Value": value} for key, value in tags.items()],
    )
    return name


def job_names(http: Http, caller: str) -> set[str]:
    reply = http("GET", "/jobs", caller=caller)
    assert reply.status == 200, reply.body
    return {job["name"] for job in reply.body["items"]}


def test_sessions_of_roles_with_one_team_tag_share_jobs(http: Http) -> None:
    assert http.aws is not None
    n = next(_names)
    ci = role(http.aws, f"billing-ci-{n}", team=f"billing-{n}")
    oncall = role(http.aws, f"billing-oncall-{n}", team=f"billing-{n}")
    other = role(http.aws, f"search-{n}", team=f"search-{n}")

    job = http.create("nightly", caller=session_arn(ci, "build-7"))

    assert job["owner"] == f"billing-{n}"
    assert job_names(http, session_arn(ci, "alice")) == {"nightly"}
    assert job_names(http, session_arn(oncall, "carol")) == {"nightly"}
    assert job_names(http, session_arn(other, "bob")) == set()
    # the actor recorded on a change stays the session
    paused = http("POST", f"/jobs/{job['id']}/pause", caller=session_arn(oncall, "carol"))
    assert paused.status == 200, paused.body
    assert paused.body["paused_by"] == session_arn(oncall, "carol")


def test_a_role_recreated_under_the_same_name_with_another_tag_sees_none_of_the_old_jobs(http: Http) -> None:
    assert http.aws is not None
    n = next(_names)
    name = role(http.aws, f"deployer-{n}", team=f"billing-{n}")
    http.create("nightly", caller=session_arn(name, "alice"))
    # When the role is deleted and a role of the same name is created for another team
    http.aws.iam.delete_role(RoleName=name)
    role(http.aws, name, team=f"search-{n}")
    http.clock.advance(OWNER_TAG_TTL_MS)
    # Then its sessions own the other team's (no) jobs, not the old ones
    assert job_names(http, session_arn(name, "mallory")) == set()
    assert http.create("nightly", caller=session_arn(name, "mallory"))["owner"] == f"search-{n}"


@pytest.mark.parametrize("case", ["untagged", "deleted", "root", "other account"])
def test_a_caller_without_the_tag_is_forbidden(http: Http, case: str) -> None:
    assert http.aws is not None
    n = next(_names)
    callers: dict[str, Any] = {
        "untagged": lambda: session_arn(role(http.aws, f"untagged-{n}", cost_center="42"), "alice"),
        "deleted": lambda: session_arn(f"never-created-{n}", "alice"),
        "root": lambda: f"arn:aws:iam::{ACCOUNT}:root",
        "other account": lambda: (
            "arn:aws:sts::210987654321:assumed-role/"
            + role(http.aws, f"same-name-{n}", team="billing")
            + "/alice"
        ),
    }
    caller = callers[case]()

    for reply in (
        http("GET", "/jobs", caller=caller),
        http("POST", "/jobs", caller=caller, body=http.job_body()),
    ):
        assert reply.status == 403, reply.body
        assert reply.body["error"]["code"] == "forbidden"
        assert reply.body["error"]["field"] == "tag:team"


def test_an_iam_user_is_owned_by_its_tag(http: Http) -> None:
    assert http.aws is not None
    n = next(_names)
    http.aws.iam.create_user(
        UserName=f"deploy-bot-{n}", Path="/ci/", Tags=[{"Key": "team", "Value": f"ops-{n}"}]
    )

    job = http.create("nightly", caller=f"arn:aws:iam::{ACCOUNT}:user/ci/deploy-bot-{n}")

    assert job["owner"] == f"ops-{n}"
