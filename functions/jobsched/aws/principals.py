"""IAM principal tags on AWS: ``iam:ListRoleTags`` / ``iam:ListUserTags`` and ``sts:GetCallerIdentity``
(the port: ``jobsched.ports.principals``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from botocore.exceptions import ClientError

from jobsched.ports.principals import PrincipalKind


class IamPrincipalTags:
    """The tags of this account's roles and users. ``iam`` and ``sts`` return boto3 clients (made on first use).

    The account is the one whose credentials the function runs with (``GetCallerIdentity``, read once; it needs
    no permission). A principal's tags are read whole (every page of ``ListRoleTags`` / ``ListUserTags``; a
    principal holds at most 50 tags)."""

    def __init__(self, iam: Callable[[], Any], sts: Callable[[], Any]) -> None:
        self._iam = iam
        self._sts = sts
        self._account: str | None = None

    def account_id(self) -> str:
        """The deployment's account id (12 digits). Raises ``ClientError`` when STS refuses."""
        if self._account is None:
            self._account = str(self._sts().get_caller_identity()["Account"])
        return self._account

    def tags_of(self, kind: PrincipalKind, name: str) -> Mapping[str, str] | None:
        """The tags of role or user ``name``, or None when IAM has no such principal (``NoSuchEntity``). Raises
        ``ClientError`` for any other refusal (throttling, a missing ``iam:List*Tags`` permission)."""
        operation, argument = (
            ("list_role_tags", "RoleName") if kind == "role" else ("list_user_tags", "UserName")
        )
        paginator = self._iam().get_paginator(operation)
        tags: dict[str, str] = {}
        try:
            for page in paginator.paginate(**{argument: name}):
                tags.update({tag["Key"]: tag["Value"] for tag in page.get("Tags", [])})
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") == "NoSuchEntity":
                return None
            raise
        return tags
