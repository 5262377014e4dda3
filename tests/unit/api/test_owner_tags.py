"""Owners from a principal tag (``owner_from = "tag:<key>"``): the setting, the caller's principal, the refusals
(403, never the ARN instead) and the cache of principals' tags (on an injected clock)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from pydantic import ValidationError

from jobsched.api.auth import OWNER_TAG_TTL_MS, TaggedIamAuthenticator, tagged_principal
from jobsched.api.exceptions import Forbidden, Unauthorized
from jobsched.clock import FakeClock
from jobsched.ports.principals import PrincipalKind
from jobsched.settings import memory_settings, parse_owner_from

ACCOUNT = "123456789012"


class FakePrincipalTags:
    """The tags of this account's principals, ``{("role", "billing"): {"team": "billing"}}``; counts reads."""

    def __init__(self, tags: dict[tuple[PrincipalKind, str], dict[str, str]]) -> None:
        self.tags = tags
        self.reads: list[tuple[PrincipalKind, str]] = []

    def account_id(self) -> str:
        return ACCOUNT

    def tags_of(self, kind: PrincipalKind, name: str) -> Mapping[str, str] | None:
        self.reads.append((kind, name))
        return self.tags.get((kind, name))


def event(user_arn: Any) -> dict[str, Any]:
    return {"headers": {}, "requestContext": {"identity": {"userArn": user_arn}}}


def session(role: str, name: str = "alice", account: str = ACCOUNT) -> str:
    return f"arn:aws:sts::{account}:assumed-role/{role}/{name}"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(1_772_445_600_000)


@pytest.fixture
def tags() -> FakePrincipalTags:
    return FakePrincipalTags(
        {
            ("role", "billing-ci"): {"team": "billing", "cost-center": "42"},
            ("role", "billing-oncall"): {"team": "billing"},
            ("role", "untagged"): {"cost-center": "42"},
            ("role", "empty"): {"team": ""},
            ("role", "arn-like"): {"team": f"arn:aws:iam::{ACCOUNT}:role/billing"},
            ("user", "deploy-bot"): {"team": "platform"},
        }
    )


@pytest.fixture
def auth(tags: FakePrincipalTags, clock: FakeClock) -> TaggedIamAuthenticator:
    return TaggedIamAuthenticator("team", tags, clock=clock)


# -- the setting -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "key"),
    [("arn", None), ("tag:team", "team"), ("tag:jobsched/owner @x=1", "jobsched/owner @x=1")],
)
def test_owner_from_names_the_arn_or_a_tag_key(value: str, key: str | None) -> None:
    assert parse_owner_from(value) == key
    assert memory_settings(owner_from=value).owner_from == value


def test_owner_from_defaults_to_the_arn() -> None:
    assert memory_settings().owner_from == "arn"


@pytest.mark.parametrize(
    "value",
    ["", "ARN", "team", "tag", "tag:", "tag:aws:team", "tag:AWS:team", "tag:team*", "tag:" + "k" * 129],
)
def test_a_bad_owner_from_fails_naming_the_setting(value: str) -> None:
    with pytest.raises(ValidationError, match="owner_from") as error:
        memory_settings(owner_from=value)
    assert "tag:<key>" in str(error.value)


# -- whose tags ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("arn", "principal"),
    [
        (session("billing-ci"), ("role", ACCOUNT, "billing-ci")),
        (f"arn:aws-cn:sts::{ACCOUNT}:assumed-role/ops/i-0abc", ("role", ACCOUNT, "ops")),
        (f"arn:aws:iam::{ACCOUNT}:user/deploy-bot", ("user", ACCOUNT, "deploy-bot")),
        (f"arn:aws:iam::{ACCOUNT}:user/ci/tools/deploy-bot", ("user", ACCOUNT, "deploy-bot")),
        (f"arn:aws:iam::{ACCOUNT}:root", None),
        (f"arn:aws:sts::{ACCOUNT}:federated-user/alice", None),
        (f"arn:aws:iam::{ACCOUNT}:role/billing-ci", None),
    ],
)
def test_the_tagged_principal_of_a_caller(arn: str, principal: tuple[str, str, str] | None) -> None:
    assert tagged_principal(arn) == principal


# -- the owner -------------------------------------------------------------------------------------------------


def test_every_role_with_the_same_tag_value_is_one_owner(auth: TaggedIamAuthenticator) -> None:
    ci = auth.caller_of(event(session("billing-ci", "build-7")))
    oncall = auth.caller_of(event(session("billing-oncall", "carol")))

    assert ci.owner == oncall.owner == "billing"
    # the actor stays the principal as API Gateway reports it
    assert ci.actor == session("billing-ci", "build-7")
    assert oncall.actor == session("billing-oncall", "carol")


def test_an_iam_user_is_owned_by_its_tag(auth: TaggedIamAuthenticator) -> None:
    arn = f"arn:aws:iam::{ACCOUNT}:user/ci/deploy-bot"
    assert auth.caller_of(event(arn)).owner == "platform"


def test_the_tag_key_is_matched_in_any_case_as_iam_matches_it(
    tags: FakePrincipalTags, clock: FakeClock
) -> None:
    # IAM keeps one key of a role or user whatever its case (it refuses "Team" beside "team") and matches
    # aws:PrincipalTag/<key> in any case: a role tagged "Team" is owned by "tag:team"
    tags.tags[("role", "ops-ci")] = {"Team": "ops", "cost-center": "42"}
    tags.tags[("user", "ops-bot")] = {"TEAM": "ops"}
    auth = TaggedIamAuthenticator("team", tags, clock=clock)

    assert auth.caller_of(event(session("ops-ci"))).owner == "ops"
    assert auth.caller_of(event(f"arn:aws:iam::{ACCOUNT}:user/ops-bot")).owner == "ops"
    assert TaggedIamAuthenticator("Team", tags, clock=clock).caller_of(
        event(session("billing-ci"))
    ).owner == ("billing")


@pytest.mark.parametrize(
    ("arn", "says"),
    [
        (session("untagged"), "has no 'team' tag"),
        (session("empty"), "has no 'team' tag"),
        (session("arn-like"), "not starting with arn:"),
        (session("deleted-role"), "has no 'team' tag"),
        (session("billing-ci", account="210987654321"), "account 210987654321"),
        (f"arn:aws:iam::{ACCOUNT}:root", "not the root or a federated user"),
        (f"arn:aws:sts::{ACCOUNT}:federated-user/alice", "not the root or a federated user"),
    ],
)
def test_a_caller_without_a_usable_tag_is_forbidden_never_owned_by_its_arn(
    auth: TaggedIamAuthenticator, arn: str, says: str
) -> None:
    with pytest.raises(Forbidden, match=says) as refused:
        auth.caller_of(event(arn))
    assert refused.value.field == "tag:team"


def test_another_accounts_role_is_refused_before_any_tag_read(
    auth: TaggedIamAuthenticator, tags: FakePrincipalTags
) -> None:
    # a role of the same name in another account must not borrow this account's role's tag
    with pytest.raises(Forbidden):
        auth.caller_of(event(session("billing-ci", account="210987654321")))
    assert tags.reads == []


def test_no_principal_is_unauthorized(auth: TaggedIamAuthenticator) -> None:
    with pytest.raises(Unauthorized):
        auth.caller_of({"headers": {}})


# -- the cache -------------------------------------------------------------------------------------------------


def test_tags_are_read_once_per_principal_within_the_ttl(
    auth: TaggedIamAuthenticator, tags: FakePrincipalTags, clock: FakeClock
) -> None:
    for name in ("alice", "bob", "carol"):
        auth.caller_of(event(session("billing-ci", name)))
    clock.advance(OWNER_TAG_TTL_MS - 1)
    auth.caller_of(event(session("billing-ci")))

    assert tags.reads == [("role", "billing-ci")]


def test_a_tag_change_applies_after_the_ttl(
    auth: TaggedIamAuthenticator, tags: FakePrincipalTags, clock: FakeClock
) -> None:
    assert auth.caller_of(event(session("billing-ci"))).owner == "billing"
    tags.tags[("role", "billing-ci")] = {"team": "search"}

    clock.advance(OWNER_TAG_TTL_MS - 1)
    assert auth.caller_of(event(session("billing-ci"))).owner == "billing"
    clock.advance(1)
    assert auth.caller_of(event(session("billing-ci"))).owner == "search"


def test_a_missing_tag_is_cached_too_and_a_new_one_applies_after_the_ttl(
    auth: TaggedIamAuthenticator, tags: FakePrincipalTags, clock: FakeClock
) -> None:
    with pytest.raises(Forbidden):
        auth.caller_of(event(session("untagged")))
    tags.tags[("role", "untagged")] = {"team": "billing"}
    with pytest.raises(Forbidden):
        auth.caller_of(event(session("untagged")))

    clock.advance(OWNER_TAG_TTL_MS)
    assert auth.caller_of(event(session("untagged"))).owner == "billing"
    assert tags.reads == [("role", "untagged"), ("role", "untagged")]


def test_the_cache_stays_bounded(tags: FakePrincipalTags, clock: FakeClock) -> None:
    auth = TaggedIamAuthenticator("team", tags, clock=clock)
    auth.MAX_CACHED = 3
    for n in range(4):
        tags.tags[("role", f"r{n}")] = {"team": "billing"}
        auth.caller_of(event(session(f"r{n}")))
    # r3 found the cache full of live entries: it was emptied, so r0 is read again, r3 is not
    auth.caller_of(event(session("r0")))
    auth.caller_of(event(session("r3")))
    assert tags.reads == [("role", "r0"), ("role", "r1"), ("role", "r2"), ("role", "r3"), ("role", "r0")]


def test_expired_entries_go_first_when_the_cache_is_full(tags: FakePrincipalTags, clock: FakeClock) -> None:
    auth = TaggedIamAuthenticator("team", tags, clock=clock)
    auth.MAX_CACHED = 2
    tags.tags.update(
        {("role", "old"): {"team": "a"}, ("role", "live"): {"team": "b"}, ("role", "new"): {"team": "c"}}
    )
    auth.caller_of(event(session("old")))
    clock.advance(OWNER_TAG_TTL_MS // 2)
    auth.caller_of(event(session("live")))
    clock.advance(OWNER_TAG_TTL_MS // 2)  # "old" has expired, "live" has not
    auth.caller_of(event(session("new")))
    auth.caller_of(event(session("live")))
    assert tags.reads == [("role", "old"), ("role", "live"), ("role", "new")]
