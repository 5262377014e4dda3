"""The principal-tags port: the IAM tags of the deployment account's roles and users, for owners taken from a tag
(``Settings.owner_from = "tag:<key>"``, ``jobsched.api.auth.TaggedIamAuthenticator``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, Protocol

PrincipalKind = Literal["role", "user"]
"""An IAM principal that carries tags: a role (the caller is one of its sessions) or a user."""


class PrincipalTags(Protocol):
    """Reads IAM principals' tags (``jobsched.aws.principals.IamPrincipalTags`` on IAM and STS). Raises
    botocore ``ClientError`` when AWS refuses a call (throttling, a missing permission)."""

    def account_id(self) -> str:
        """The 12-digit account whose roles and users :meth:`tags_of` reads (the deployment's own)."""
        ...

    def tags_of(self, kind: PrincipalKind, name: str) -> Mapping[str, str] | None:
        """The tags (key -> value) of the role or user ``name`` (its name, without path), or None when the
        account has no such principal."""
        ...
