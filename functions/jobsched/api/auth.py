"""Who is calling: the owner of every job the request touches (design §3, admission).

- In AWS, API Gateway authenticates the request with IAM (SigV4) before the Lambda runs; the owner is the
  caller's principal from ``requestContext.identity.userArn``. An assumed-role session
  ``arn:aws:sts::ACCT:assumed-role/ROLE/SESSION`` maps to its role ``arn:aws:iam::ACCT:role/ROLE``, so every
  session of a team's role owns the same jobs.
- With ``Settings.owner_from = "tag:<key>"`` (:class:`TaggedIamAuthenticator`) the owner is instead the value of
  the ``<key>`` tag of the caller's role (of an assumed-role session) or user, in the deployment's account, as is
  (``team=billing`` -> owner ``billing``). A re-created role gets its owner from its new tag, not from its name.
- Locally (``Settings.local_tokens_file`` set), ``Authorization: Bearer <token>`` is looked up in a JSON object
  ``{"<token>": "<owner>" | {"owner": "<owner>", "shell": true|false}, ...}``, read once per path and cached.
  ``"shell": true`` lets the token's owner use ``shell`` targets (``shell_owners``); a plain string is
  ``"shell": false``.

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

from jobsched.api.exceptions import Forbidden, Unauthorized
from jobsched.clock import Clock
from jobsched.ports.principals import PrincipalKind, PrincipalTags

_ASSUMED_ROLE = re.compile(
    r"^arn:(?P<partition>aws[a-z-]*):sts::(?P<account>\d{12}):assumed-role/(?P<role>[^/]+)/.+$"
)
_IAM_USER = re.compile(
    r"^arn:(?P<partition>aws[a-z-]*):iam::(?P<account>\d{12}):user/(?:.*/)?(?P<user>[^/]+)$"
)
MAX_OWNER_CHARS = 1024
OWNER_TAG_TTL_MS = 60_000
"""How long a principal's tags are kept (per API execution environment) before IAM is asked again, ms: a tag
change reaches a warm API within this time."""


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


def principal_arn(event: Mapping[str, Any]) -> str:
    """The IAM principal ARN API Gateway authenticated (``requestContext.identity.userArn``). Raises
    ``Unauthorized`` when the event carries none (the API must use IAM auth)."""
    context = event.get("requestContext")
    identity = context.get("identity") if isinstance(context, Mapping) else None
    arn = identity.get("userArn") if isinstance(identity, Mapping) else None
    if not isinstance(arn, str) or not arn.startswith("arn:") or len(arn) > MAX_OWNER_CHARS:
        raise Unauthorized(
            "no IAM caller identity on the request; sign it with SigV4 (IAM auth)",
            challenge="AWS4-HMAC-SHA256",
        )
    return arn


def tagged_principal(arn: str) -> tuple[PrincipalKind, str, str] | None:
    """``(kind, account, name)`` of the principal whose tags name the owner of ``arn``, or None for a principal
    that has none (the account root, a federated user, anything else).

    ``arn:aws:sts::123456789012:assumed-role/billing/alice`` -> ``("role", "123456789012", "billing")``;
    ``arn:aws:iam::123456789012:user/ops/bob`` -> ``("user", "123456789012", "bob")`` (IAM names are unique
    without their path, and ``ListRoleTags`` / ``ListUserTags`` take the name alone).
    """
    match = _ASSUMED_ROLE.match(arn)
    if match:
        return "role", match["account"], match["role"]
    match = _IAM_USER.match(arn)
    if match:
        return "user", match["account"], match["user"]
    return None


def tag_value(tags: Mapping[str, str], key: str) -> str | None:
    """The value of tag ``key`` of an IAM role's or user's ``tags``, the key matched in any case, or None.

    IAM keeps one key of a role or user whatever its case (it refuses ``Team`` beside ``team``) and matches
    ``aws:PrincipalTag/<key>`` in any case (IAM User Guide, "Rules for tagging in IAM"), so ``tag:team`` reads
    a role tagged ``Team``."""
    wanted = key.casefold()
    return next((value for name, value in tags.items() if name.casefold() == wanted), None)


class IamAuthenticator:
    """Owner from the IAM principal API Gateway authenticated (``requestContext.identity.userArn``)."""

    def caller_of(self, event: Mapping[str, Any]) -> Caller:
        """The principal's owner (:func:`owner_from_principal`) and the principal itself as the actor. Raises
        ``Unauthorized`` when the event carries no principal (the API must use IAM auth)."""
        arn = principal_arn(event)
        return Caller(owner=owner_from_principal(arn), actor=arn)


class TaggedIamAuthenticator:
    """Owner from a tag of the IAM principal API Gateway authenticated (``Settings.owner_from = "tag:<key>"``).

    The owner is the value of the ``tag_key`` tag (the key in any case: :func:`tag_value`) of the caller's role
    (for an assumed-role session) or IAM user, as is; the actor stays the principal ARN. ``tags`` reads IAM (``iam:ListRoleTags`` / ``iam:ListUserTags``);
    what it returns is kept ``ttl_ms`` milliseconds of ``clock`` (epoch ms), per principal, absent ones included.
    """

    MAX_CACHED = 1000
    """Principals kept at most; past that, expired entries are dropped, then all if none had expired."""

    def __init__(
        self, tag_key: str, tags: PrincipalTags, clock: Clock, ttl_ms: int = OWNER_TAG_TTL_MS
    ) -> None:
        self.tag_key = tag_key
        self._tags = tags
        self._clock = clock
        self._ttl_ms = ttl_ms
        self._cache: dict[tuple[PrincipalKind, str], tuple[int, Mapping[str, str] | None]] = {}

    @property
    def field(self) -> str:
        """What a refusal names as its ``field``: ``tag:<key>``."""
        return f"tag:{self.tag_key}"

    def caller_of(self, event: Mapping[str, Any]) -> Caller:
        """The tag's value as the owner, the principal ARN as the actor.

        Raises ``Unauthorized`` when the event carries no principal; ``Forbidden`` (field ``tag:<key>``) when the
        principal is not a role session or user of the deployment's account (the root, a federated user, another
        account), or its role or user does not exist or has no such tag, an empty value, or a value starting
        with ``arn:`` (reserved for owners taken from ARNs). Never falls back to the ARN."""
        arn = principal_arn(event)
        principal = tagged_principal(arn)
        if principal is None:
            raise Forbidden(
                self.field,
                f"owners come from the {self.tag_key!r} tag of the caller's IAM role or user; call with a role "
                "session or an IAM user (not the root or a federated user)",
            )
        kind, account, name = principal
        if account != self._tags.account_id():
            raise Forbidden(
                self.field,
                f"owners come from the {self.tag_key!r} tag of a role or user of this deployment's account; "
                f"the caller is from account {account}",
            )
        tags = self._tags_of(kind, name)
        value = None if tags is None else tag_value(tags, self.tag_key)
        if not value or value.startswith("arn:"):
            raise Forbidden(
                self.field,
                f"the caller's IAM {kind} {name!r} has no {self.tag_key!r} tag naming its owner (a value not "
                "starting with arn:); ask an administrator to tag it",
            )
        return Caller(owner=value, actor=arn)

    def _tags_of(self, kind: PrincipalKind, name: str) -> Mapping[str, str] | None:
        now = self._clock()
        cached = self._cache.get((kind, name))
        if cached is not None and cached[0] > now:
            return cached[1]
        tags = self._tags.tags_of(kind, name)
        if len(self._cache) >= self.MAX_CACHED:
            self._cache = {key: entry for key, entry in self._cache.items() if entry[0] > now}
            if len(self._cache) >= self.MAX_CACHED:
                self._cache.clear()
        self._cache[(kind, name)] = (now + self._ttl_ms, tags)
        return tags


@dataclass(frozen=True)
class TokenEntry:
    """One token of a tokens file: its ``owner``, and whether that owner may use ``shell`` targets."""

    owner: str
    shell: bool = False

    def as_json(self) -> dict[str, Any]:
        """The entry as a tokens file spells it: ``{"owner": ..., "shell": ...}``."""
        return {"owner": self.owner, "shell": self.shell}


TOKENS_FILE_SHAPE = (
    'a JSON object mapping each token to its owner: "<token>": "<owner>", or "<token>": {"owner": "<owner>", '
    '"shell": true} for an owner that may use shell targets'
)


def parse_tokens(data: Any) -> dict[str, TokenEntry]:
    """The entries of a tokens file's parsed JSON ``data`` (the module docstring gives its shape). Raises
    ValueError naming the first entry not of that shape by its position (a token is never echoed), an empty
    token or owner included (such an entry could never authenticate), or giving ``TOKENS_FILE_SHAPE`` when
    ``data`` is not an object."""
    if not isinstance(data, dict):
        raise ValueError(f"expected {TOKENS_FILE_SHAPE}")
    entries: dict[str, TokenEntry] = {}
    for number, (token, value) in enumerate(data.items(), 1):
        owner = value.get("owner") if isinstance(value, dict) else value
        if not token or owner == "":
            raise ValueError(f"token number {number}: its token and its owner must not be empty")
        if isinstance(value, str):
            entries[token] = TokenEntry(value)
        elif (
            isinstance(value, dict)
            and isinstance(value.get("owner"), str)
            and isinstance(value.get("shell", False), bool)
            and set(value) <= {"owner", "shell"}
        ):
            entries[token] = TokenEntry(value["owner"], value.get("shell", False))
        else:
            raise ValueError(
                f'token number {number}: its entry is neither an owner string nor {{"owner": "<owner>", '
                '"shell": true|false}'
            )
    return entries


@lru_cache(maxsize=8)
def load_tokens(path: str) -> dict[str, TokenEntry]:
    """The token -> entry map of a tokens file (``parse_tokens``), read once per path.

    Raises ValueError when the file is not such an object (a wiring error, surfaced at the first request).
    """
    try:
        return parse_tokens(json.loads(Path(path).read_text(encoding="utf-8")))
    except ValueError as error:
        raise ValueError(f"{path}: {error}") from error


def shell_owners(tokens: Mapping[str, TokenEntry]) -> frozenset[str]:
    """The owners that may use ``shell`` targets: those with a token marked ``"shell": true``."""
    return frozenset(entry.owner for entry in tokens.values() if entry.shell)


def _header(event: Mapping[str, Any], name: str) -> str | None:
    headers = event.get("headers") or {}
    for key, value in headers.items():
        if key.lower() == name and isinstance(value, str):
            return value
    return None


class TokenAuthenticator:
    """Local mode: ``Authorization: Bearer <token>`` mapped to an owner by a tokens file."""

    def __init__(self, tokens: Mapping[str, str | TokenEntry]) -> None:
        owners = {token: e.owner if isinstance(e, TokenEntry) else e for token, e in tokens.items()}
        self._tokens = [(token.encode(), owner) for token, owner in owners.items() if token and owner]

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
