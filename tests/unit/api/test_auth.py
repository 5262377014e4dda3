"""Who the caller is: IAM principals (assumed-role sessions map to their role) and local bearer tokens."""

from __future__ import annotations

import json
from typing import Any

import pytest

from jobsched.api.auth import (
    IamAuthenticator,
    TokenAuthenticator,
    load_tokens,
    owner_from_principal,
    shell_owners,
)
from jobsched.api.exceptions import Unauthorized


def event(user_arn: Any = None, headers: dict[str, str] | None = None) -> dict[str, Any]:
    return {"headers": headers or {}, "requestContext": {"identity": {"userArn": user_arn}}}


@pytest.mark.parametrize(
    ("principal", "owner"),
    [
        (
            "arn:aws:sts::123456789012:assumed-role/billing-team/alice",
            "arn:aws:iam::123456789012:role/billing-team",
        ),
        (
            "arn:aws:sts::123456789012:assumed-role/AWSReservedSSO_Admin_0123/alice@example.com",
            "arn:aws:iam::123456789012:role/AWSReservedSSO_Admin_0123",
        ),
        ("arn:aws-cn:sts::123456789012:assumed-role/ops/i-0abc", "arn:aws-cn:iam::123456789012:role/ops"),
        ("arn:aws:iam::123456789012:user/deploy-bot", "arn:aws:iam::123456789012:user/deploy-bot"),
        ("arn:aws:iam::123456789012:root", "arn:aws:iam::123456789012:root"),
    ],
)
def test_owner_from_principal(principal, owner):
    assert owner_from_principal(principal) == owner


def test_iam_owner_and_actor_come_from_the_request_context():
    caller = IamAuthenticator().caller_of(event("arn:aws:sts::123456789012:assumed-role/billing/bob"))

    assert caller.owner == "arn:aws:iam::123456789012:role/billing"
    assert caller.actor == "arn:aws:sts::123456789012:assumed-role/billing/bob"


@pytest.mark.parametrize(
    "bad_event",
    [
        event(None),
        event(""),
        event("alice"),
        event(42),
        event("arn:" + "x" * 2000),
        {"headers": {}},
        {"requestContext": None},
        {"requestContext": {"identity": None}},
    ],
)
def test_iam_without_a_principal_is_unauthorized(bad_event):
    with pytest.raises(Unauthorized) as raised:
        IamAuthenticator().caller_of(bad_event)

    assert raised.value.challenge == "AWS4-HMAC-SHA256"


def test_a_bearer_token_maps_to_its_owner():
    auth = TokenAuthenticator({"t-1": "team-a", "t-2": "team-b"})

    assert auth.caller_of(event(headers={"Authorization": "Bearer t-2"})).owner == "team-b"
    assert auth.caller_of(event(headers={"authorization": "bearer  t-1 "})).owner == "team-a"


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": ""},
        {"Authorization": "Bearer"},
        {"Authorization": "Bearer unknown"},
        {"Authorization": "Basic dC0xOg=="},
        {"Authorization": "t-1"},
        {"X-Token": "t-1"},
    ],
)
def test_missing_or_bad_tokens_are_unauthorized(headers):
    with pytest.raises(Unauthorized) as raised:
        TokenAuthenticator({"t-1": "team-a"}).caller_of(event("arn:aws:iam::1:user/x", headers))

    assert raised.value.challenge.startswith("Bearer")


def test_the_tokens_file_is_read_once_per_path(tmp_path):
    path = tmp_path / "tokens.json"
    path.write_text(json.dumps({"t-1": "team-a"}))
    first = TokenAuthenticator.from_file(str(path))
    path.write_text(json.dumps({"t-1": "team-changed"}))

    second = TokenAuthenticator.from_file(str(path))

    assert first.caller_of(event(headers={"Authorization": "Bearer t-1"})).owner == "team-a"
    assert second.caller_of(event(headers={"Authorization": "Bearer t-1"})).owner == "team-a"


@pytest.mark.parametrize("content", ['["t-1"]', '{"t-1": 5}', "not json"])
def test_a_malformed_tokens_file_is_a_wiring_error(tmp_path, content):
    path = tmp_path / "bad.json"
    path.write_text(content)

    with pytest.raises(ValueError):
        load_tokens(str(path))


def test_a_token_entry_may_grant_its_owner_shell_targets(tmp_path):
    path = tmp_path / "tokens.json"
    path.write_text(
        json.dumps({"t-1": {"owner": "ops", "shell": True}, "t-2": "billing", "t-3": {"owner": "x"}})
    )

    tokens = load_tokens(str(path))

    assert shell_owners(tokens) == frozenset({"ops"})
    assert TokenAuthenticator(tokens).caller_of(event(headers={"Authorization": "Bearer t-1"})).owner == "ops"
