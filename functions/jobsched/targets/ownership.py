"""Whose ``lambda`` and ``sqs`` targets a job may use: only those its owner's team has tagged as its own.

Without this the worker, acting with its own role, would be a confused deputy: team A could aim a job at
team B's function or queue. A team marks a target as its own with a resource tag,
``<Settings.target_owner_tag_key>=<owner>`` (``jobsched:owner=arn:aws:iam::123456789012:role/billing``:
the owner exactly as the API shows it in ``owner``). Two guards use that tag:

* In AWS the worker acts for the job's owner (``OwnerClients``): it assumes the deployment's target role
  (``Settings.target_role_arn``) with the owner as the session tag ``OWNER_SESSION_TAG``, and that role
  may invoke, send (and use a queue's customer-managed KMS key) only where the resource's owner tag equals
  ``${aws:PrincipalTag/jobsched-owner}`` (``infra/functions.py``). IAM itself refuses a foreign or untagged
  target; the try fails with a message saying how to tag it (``ActingForOwner``).
* Wherever the tag can be read, a target tagged for another owner is refused in code (``TargetTags``): by
  the API at registration (400 naming ``target``), and by the worker when there is no target role to
  assume (local mode, where moto enforces no IAM). An untagged or unreadable target is left to IAM.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field
from typing import Any

from botocore import exceptions as botocore_exceptions
from botocore.exceptions import BotoCoreError, ClientError

from jobsched.aws.clients import CallBounds
from jobsched.models import LambdaTarget, SqsTarget
from jobsched.ports.targets import Executor, TargetCall, TargetFailed, TargetNotStarted

OWNER_SESSION_TAG = "jobsched-owner"
"""The session tag carrying the job's owner when the worker assumes the target role; the role's policy
compares resource tags with ``${aws:PrincipalTag/jobsched-owner}``."""

SESSION_DURATION_S = 3600
"""Lifetime of an owner's assumed-role credentials (AssumeRole's default)."""
REFRESH_BEFORE_S = 1200
"""Credentials closer than this to expiry are renewed before a try: longer than any try (at most 900 s)."""

TAG_READ_CALLS = CallBounds(connect_timeout_s=1, read_timeout_s=2, max_attempts=1)
"""Bounds on the API's reads of a target's tags (advisory: an unreadable tag leaves the decision to IAM)."""

_DENIED = ("AccessDenied", "AccessDeniedException", "KMS.AccessDeniedException", "AuthorizationError")


_TRANSIENT_CODES = frozenset(
    {"Throttling", "ThrottlingException", "RequestLimitExceeded", "ServiceUnavailable", "InternalFailure"}
)


def _transient(error: Exception) -> bool:
    """Whether an STS error is worth trying again (the try is then not counted): throttles, 5xx, transport
    errors. A refusal (AccessDenied, a session tag STS rejects: ValidationError, ...) fails the try."""
    if isinstance(error, BotoCoreError):  # transport trouble only (a malformed request is not transient)
        return isinstance(error, (botocore_exceptions.ConnectionError, botocore_exceptions.HTTPClientError))
    if isinstance(error, ClientError):
        status = int(error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
        return error.response.get("Error", {}).get("Code") in _TRANSIENT_CODES or status >= 500
    return False


class TagsUnreadable(Exception):
    """The target's tags could not be read (no permission, another account, not found)."""


def target_name(target: LambdaTarget | SqsTarget) -> str:
    """How a target is named in messages: ``lambda <function>`` or ``sqs <queue URL>``."""
    return f"lambda {target.function}" if isinstance(target, LambdaTarget) else f"sqs {target.queue_url}"


def foreign_target_message(target: LambdaTarget | SqsTarget, tag_key: str, tagged: str, owner: str) -> str:
    """The refusal of a target tagged for ``tagged`` to a job owned by ``owner``."""
    return (
        f"{target_name(target)} is tagged {tag_key}={tagged}: only that owner's jobs may use it "
        f"(this job's owner is {owner})"
    )


def function_arn(function: str, *, partition: str, region: str, account: str) -> str:
    """The unqualified ARN of a Lambda function named by name, ``name:alias``, ``<account>:function:name``
    or (partial or full) ARN; ``ListTags`` takes only this form."""
    parts = function.split(":")
    if function.startswith("arn:"):
        return ":".join(parts[:7])
    if len(parts) >= 3 and parts[1] == "function":
        return f"arn:{partition}:lambda:{region}:{parts[0]}:function:{parts[2]}"
    return f"arn:{partition}:lambda:{region}:{account}:function:{parts[0]}"


@dataclass(eq=False)
class TargetTags:
    """Reads the owner tag (``tag_key``) of ``lambda`` and ``sqs`` targets with the caller's own clients.

    ``lambda_client``/``sqs_client``/``sts_client`` are factories (called on first use). Needs
    ``lambda:ListTags`` and ``sqs:ListQueueTags``; ``sts:GetCallerIdentity`` (always allowed) gives the
    account of a function named without one.
    """

    tag_key: str
    _: KW_ONLY
    lambda_client: Callable[[], Any]
    sqs_client: Callable[[], Any]
    sts_client: Callable[[], Any]
    _identity: tuple[str, str] | None = field(default=None, init=False)

    def owner_of(self, target: LambdaTarget | SqsTarget) -> str | None:
        """The target's owner tag, None when it has none. Raises ``TagsUnreadable``."""
        try:
            if isinstance(target, LambdaTarget):
                client = self.lambda_client()
                partition, account = self._caller()
                arn = function_arn(
                    target.function, partition=partition, region=client.meta.region_name, account=account
                )
                tags: dict[str, str] = client.list_tags(Resource=arn).get("Tags") or {}
            else:
                tags = self.sqs_client().list_queue_tags(QueueUrl=target.queue_url).get("Tags") or {}
        except Exception as error:  # advisory: whatever went wrong (denied, absent, malformed), IAM decides
            raise TagsUnreadable(f"{target_name(target)}: {type(error).__name__}: {error}") from error
        return tags.get(self.tag_key)

    def refusal(self, target: Any, owner: str) -> str | None:
        """Why a job of ``owner`` may not use ``target``, or None when it may as far as the tags tell (not a
        lambda/sqs target, untagged, tagged for ``owner``, or tags unreadable: IAM decides then)."""
        if not isinstance(target, LambdaTarget | SqsTarget):
            return None
        try:
            tagged = self.owner_of(target)
        except TagsUnreadable:
            return None
        if tagged is None or tagged == owner:
            return None
        return foreign_target_message(target, self.tag_key, tagged, owner)

    def _caller(self) -> tuple[str, str]:
        if self._identity is None:
            arn = self.sts_client().get_caller_identity()["Arn"]  # arn:<partition>:...:<account>:...
            parts = arn.split(":")
            self._identity = (parts[1], parts[4])
        return self._identity


@dataclass
class _Credentials:
    access_key_id: str
    secret_access_key: str
    session_token: str
    expires_at_s: float


class OwnerClients:
    """boto3 clients acting for a job's owner: ``AssumeRole`` of ``role_arn`` with the session tag
    ``OWNER_SESSION_TAG=<owner>`` (one session per owner, renewed ``REFRESH_BEFORE_S`` before expiry).

    ``sts_client`` is a factory of the worker's own STS client; ``make_client(service, credentials)``
    builds a client from ``{"aws_access_key_id", "aws_secret_access_key", "aws_session_token"}``;
    ``now_s`` is the wall clock in epoch seconds. Thread-safe (a batch's runs share it).
    """

    def __init__(
        self,
        role_arn: str,
        *,
        sts_client: Callable[[], Any],
        make_client: Callable[[str, dict[str, str]], Any],
        now_s: Callable[[], float],
    ) -> None:
        self.role_arn = role_arn
        self._sts_client = sts_client
        self._make_client = make_client
        self._now_s = now_s
        self._lock = threading.Lock()
        self._credentials: dict[str, _Credentials] = {}
        self._clients: dict[tuple[str, str], tuple[_Credentials, Any]] = {}

    def client(self, service: str, owner: str) -> Any:
        """A ``service`` client acting for ``owner``. Raises botocore ``ClientError``/``BotoCoreError`` when
        the role cannot be assumed (e.g. an owner that is not a valid tag value)."""
        with self._lock:
            credentials = self._credentials.get(owner)
            if credentials is None or credentials.expires_at_s - self._now_s() < REFRESH_BEFORE_S:
                credentials = self._credentials[owner] = self._assume(owner)
            cached = self._clients.get((service, owner))
            if cached is None or cached[0] is not credentials:
                keys = {
                    "aws_access_key_id": credentials.access_key_id,
                    "aws_secret_access_key": credentials.secret_access_key,
                    "aws_session_token": credentials.session_token,
                }
                cached = self._clients[(service, owner)] = (credentials, self._make_client(service, keys))
            return cached[1]

    def _assume(self, owner: str) -> _Credentials:
        digest = hashlib.sha256(owner.encode()).hexdigest()[:16]
        response = self._sts_client().assume_role(
            RoleArn=self.role_arn,
            RoleSessionName=f"jobsched-{digest}",
            DurationSeconds=SESSION_DURATION_S,
            Tags=[{"Key": OWNER_SESSION_TAG, "Value": owner}],
        )
        raw = response["Credentials"]
        return _Credentials(
            access_key_id=raw["AccessKeyId"],
            secret_access_key=raw["SecretAccessKey"],
            session_token=raw["SessionToken"],
            expires_at_s=raw["Expiration"].timestamp(),
        )


@dataclass(eq=False)
class ActingForOwner:
    """Runs ``lambda`` or ``sqs`` targets for the job's owner (``TargetCall.owner``).

    With ``clients`` (AWS): the executor built by ``per_client(client)`` with a client of ``service`` from
    ``OwnerClients`` (the target role, tagged with the owner), and an IAM refusal is reported with how to
    tag the target. Without (local mode): ``local`` runs it, after ``tags`` refuses a target tagged for
    another owner. Raises ``TargetFailed``.
    """

    service: str
    _: KW_ONLY
    per_client: Callable[[Callable[[], Any]], Executor]
    clients: OwnerClients | None
    local: Executor
    tags: TargetTags

    def execute(self, target: Any, call: TargetCall) -> str:
        """One try of ``call`` against ``target`` for ``call.owner``; returns the executor's result."""
        owner = call.owner
        if owner is None:
            raise TargetFailed(f"{target_name(target)}: the run has no owner to act for")
        if self.clients is None:
            refusal = self.tags.refusal(target, owner)
            if refusal is not None:
                raise TargetFailed(f"refused: {refusal}")
            return self.local.execute(target, call)
        try:
            client = self.clients.client(self.service, owner)
        except (ClientError, BotoCoreError) as error:
            raise (TargetNotStarted if _transient(error) else TargetFailed)(
                f"{target_name(target)}: cannot act for owner {owner} (AssumeRole of "
                f"{self.clients.role_arn}): {error}"
            ) from error
        try:
            return self.per_client(lambda: client).execute(target, call)
        except TargetFailed as failure:
            cause = failure.__cause__
            if isinstance(cause, ClientError) and cause.response.get("Error", {}).get("Code") in _DENIED:
                raise TargetFailed(
                    f"refused by IAM: {failure} (a job may use only functions and queues tagged "
                    f"{self.tags.tag_key}={owner}, its owner)"
                ) from cause
            raise
