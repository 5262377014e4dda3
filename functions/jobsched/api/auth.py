"""Who is calling: the owner of every job the request touches (design §3, "Auth").

- In AWS, API Gateway authenticates the request with IAM (SigV4) before the Lambda runs; the owner is the
  caller's principal from ``requestContext.identity.userArn``. An assumed-role session
  ``arn:aws:sts::ACCT:assumed-role/ROLE/SESSION`` maps to its role ``arn:aws:iam::ACCT:role/ROLE``, so every
  session of a team's role owns the same jobs.
- Locally (``Settings.local_tokens_file`` set), ``Authorization: Bearer <token>`` is looked up in a JSON object
  ``{"<token>": "<owner>", ...}``, read once per path and cached.

The owner is never taken from the request body. The **actor** (who made a change, design §3.2) is the finer
identity: the principal ARN as API Gateway reports it (the session ``.../assumed-role/billing/alice``), or a local
token's owner.
"""

from __future__ import annotations

import hmac
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol

from jobsched.api.exceptions import Unauthorized

_ASSUMED_ROLE = re.compile(
    r"^arn:(?P<partition>aws[a-z-]*):sts::(?P<account>\d{12}):assumed-role/(?P<role>[^/]+)/.+$"
)
MAX_OWNER_CHARS = 1024


@dataclass(frozen=True)
class Caller:
    """Who is calling: ``owner``, whose jobs the request may touch, and ``actor``, the identity recorded as
    having made a change (``updated_by``, ``paused_by``, audit events)."""

    owner: str
    actor: str


class Authenticator(Protocol):
    """Maps an API Gateway REST (v1) proxy event to its :class:`Caller`, or raises ``Unauthorized``."""

    def caller_of(self, event: Mapping[str, Any]) -> Caller: ...


def owner_from_principal(arn: str) -> str:
    """The owner id of an IAM principal ARN: an assumed-role session maps to its role ARN, others are kept.

    ``arn:aws:sts::123456789012:assumed-role/billing/alice`` -> ``arn:aws:iam::123456789012:role/billing``.
    (Role paths are not part of a session ARN, so the role ARN is given without its path.)
    """
    match = _ASSUMED_ROLE.match(arn)
    if match:
        return f"arn:{match['partition']}:iam::{match['account']}:role/{match['role']}"
    return arn


class IamAuthenticator:
    """Owner from the IAM principal API Gateway authenticated (``requestContext.identity.userArn``)."""

    def caller_of(self, event: Mapping[str, Any]) -> Caller:
        """The principal's owner (:func:`owner_from_principal`) and the principal itself as the actor. Raises
        ``Unauthorized`` when the event carries no principal (the API must use IAM auth)."""
        context = event.get("requestContext")
        identity = context.get("identity") if isinstance(context, Mapping) else None
        arn = identity.get("userArn") if isinstance(identity, Mapping) else None
        if not isinstance(arn, str) or not arn.startswith("arn:") or len(arn) > MAX_OWNER_CHARS:
            raise Unauthorized(
                "no IAM caller identity on the request; sign it with SigV4 (IAM auth)",
                challenge="AWS4-HMAC-SHA256",
            )
        return Caller(owner=owner_from_principal(arn), actor=arn)


@lru_cache(maxsize=8)
def load_tokens(path: str) -> dict[str, str]:
    """The token -> owner map of a tokens file (a JSON object of strings), read once per path.

    Raises ValueError when the file is not such an object (a wiring error, surfaced at the first request).
    """
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(data, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in data.items()
    ):
        raise ValueError(f"{path}: expected a JSON object mapping token strings to owner strings")
    return dict(data)


def _header(event: Mapping[str, Any], name: str) -> str | None:
    headers = event.get("headers") or {}
    for key, value in headers.items():
        if key.lower() == name and isinstance(value, str):
            return value
    return None


class TokenAuthenticator:
    """Local mode: ``Authorization: Bearer <token>`` mapped to an owner by a tokens file."""

    def __init__(self, tokens: Mapping[str, str]) -> None:
        self._tokens = [(token.encode(), owner) for token, owner in tokens.items() if token and owner]

    @classmethod
    def from_file(cls, path: str) -> TokenAuthenticator:
        return cls(load_tokens(path))

    def caller_of(self, event: Mapping[str, Any]) -> Caller:
        """The token's owner, also as the actor. Raises ``Unauthorized`` for a missing header, another scheme,
        or an unknown token.

        Every known token is compared in constant time, so timing does not reveal a prefix.
        """
        value = _header(event, "authorization")
        if value is None:
            raise Unauthorized("missing Authorization header; send Authorization: Bearer <token>")
        scheme, _, token = value.strip().partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Unauthorized("use Authorization: Bearer <token>")
        given = token.strip().encode("utf-8", "surrogateescape")
        owner = None
        for known, known_owner in self._tokens:
            if hmac.compare_digest(known, given):
                owner = known_owner
        if owner is None:
            raise Unauthorized("unknown bearer token")
        return Caller(owner=owner, actor=owner)
