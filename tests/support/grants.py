"""What a function's deployed IAM role allows, against the AWS requests its code makes (on moto).

``record_requests()`` records every DynamoDB, SQS and SNS request made inside it (the SDK's own call path, so
the requests of every client and thread) as the IAM permissions each needs: ``(action, resource, index)``, with
``resource`` the env var naming the table, queue or topic (``JOBS_TABLE``, ``RUN_QUEUE_URL``...) and ``index`` a
GSI's name or None. A transaction needs the action of each item it holds; a batch, the batch action on each
table. ``granted(function)`` reads the same triples from the stack synthesized with its default settings
(bundling skipped, once per process): the statements of the function's own role.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from tempfile import mkdtemp
from typing import Any

import pytest
from botocore.client import BaseClient

from jobsched.resources import ALERTS_TOPIC_ENV, QUEUES, TABLES
from jobsched.settings import Settings

Permission = tuple[str, str, str | None]
"""``(IAM action, env var of the table/queue/topic, index name or None)``."""

_TRANSACT_ACTIONS = {
    "Put": "dynamodb:PutItem",
    "Update": "dynamodb:UpdateItem",
    "Delete": "dynamodb:DeleteItem",
    "ConditionCheck": "dynamodb:ConditionCheckItem",
    "Get": "dynamodb:GetItem",
}
# SQS requests authorized by another action (AWS: SendMessageBatch is sqs:SendMessage, and so on).
_SQS_ACTIONS = {
    "SendMessageBatch": "SendMessage",
    "DeleteMessageBatch": "DeleteMessage",
    "ChangeMessageVisibilityBatch": "ChangeMessageVisibility",
}


class Requests:
    """The permissions needed by the requests recorded so far (``needed``), given the deployment's ``settings``
    (which name each table, queue and topic)."""

    def __init__(self, settings: Settings) -> None:
        self.needed: set[Permission] = set()
        self._names: dict[str, str] = {}
        for table in TABLES:
            self._names[getattr(settings, table.env_var.lower())] = table.env_var
        for queue in QUEUES:
            url = getattr(settings, queue.env_var.lower())
            if url:
                self._names[url] = queue.env_var
        self._names[getattr(settings, ALERTS_TOPIC_ENV.lower())] = ALERTS_TOPIC_ENV

    def add(self, service: str, operation: str, params: dict[str, Any]) -> None:
        """Record the permissions of one request of ``service`` (``dynamodb``, ``sqs``, ``sns``)."""
        if service == "dynamodb":
            self._dynamodb(operation, params)
        elif service == "sqs" and params.get("QueueUrl") in self._names:
            action = _SQS_ACTIONS.get(operation, operation)
            self.needed.add((f"sqs:{action}", self._names[params["QueueUrl"]], None))
        elif service == "sns" and params.get("TopicArn") in self._names:
            self.needed.add((f"sns:{operation}", self._names[params["TopicArn"]], None))

    def _dynamodb(self, operation: str, params: dict[str, Any]) -> None:
        if operation in ("TransactWriteItems", "TransactGetItems"):
            for item in params["TransactItems"]:
                ((kind, body),) = item.items()
                self.needed.add((_TRANSACT_ACTIONS[kind], self._names[body["TableName"]], None))
        elif operation in ("BatchGetItem", "BatchWriteItem"):
            for name in params["RequestItems"]:
                self.needed.add((f"dynamodb:{operation}", self._names[name], None))
        elif "TableName" in params:
            self.needed.add(
                (f"dynamodb:{operation}", self._names[params["TableName"]], params.get("IndexName"))
            )


@contextmanager
def record_requests(settings: Settings) -> Iterator[Requests]:
    """Record (see ``Requests``) every DynamoDB, SQS and SNS request made inside the block."""
    requests = Requests(settings)
    original = BaseClient._make_api_call

    def recording(client: BaseClient, operation: str, params: dict[str, Any]) -> Any:
        requests.add(client.meta.service_model.service_name, operation, params)
        return original(client, operation, params)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(BaseClient, "_make_api_call", recording)
        yield requests


def granted(function: str) -> set[Permission]:
    """What the role of ``function`` (``api``, ``scheduler``, ``worker``, ``sweeper``) allows on the stack's
    tables, indexes, queues and topics, with the default deployment settings."""
    return _grants()[function]


@cache
def _grants() -> dict[str, set[Permission]]:
    os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
    from aws_cdk import CfnResource

    from tests.infra.support import synthesize

    synth = synthesize(Path(mkdtemp(prefix="cdk-out-grants-")), {})
    stack = synth.stack

    def logical_id(construct: Any) -> str:
        child = construct.node.default_child
        assert isinstance(child, CfnResource)
        return stack.resolve(child.logical_id)  # type: ignore[no-any-return]

    names = {logical_id(t): env for env, t in stack.storage.tables.items()}
    names.update({logical_id(q): env for env, q in stack.messaging.queues.items()})
    names[logical_id(stack.messaging.alerts_topic)] = ALERTS_TOPIC_ENV

    def resource(value: Any) -> tuple[str, str | None] | None:
        if isinstance(value, dict) and "Fn::GetAtt" in value:
            name = names.get(value["Fn::GetAtt"][0])
            return (name, None) if name else None
        if isinstance(value, dict) and "Ref" in value:
            name = names.get(value["Ref"])
            return (name, None) if name else None
        if isinstance(value, dict) and "Fn::Join" in value:
            first, *rest = value["Fn::Join"][1]
            table = resource(first)
            suffix = "".join(part for part in rest if isinstance(part, str))
            if table and suffix.startswith("/index/"):
                return table[0], suffix.removeprefix("/index/")
        return None

    roles: dict[str, set[Permission]] = {}
    for function in ("api", "scheduler", "worker", "sweeper"):
        role = logical_id(getattr(stack.functions, function).role)
        allowed: set[Permission] = set()
        for policy in synth.resources("AWS::IAM::Policy").values():
            if {"Ref": role} not in policy["Properties"]["Roles"]:
                continue
            for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
                if statement["Effect"] != "Allow":
                    continue
                actions = (
                    statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
                )
                targets = (
                    statement["Resource"]
                    if isinstance(statement["Resource"], list)
                    else [statement["Resource"]]
                )
                for target in filter(None, map(resource, targets)):
                    allowed.update((action, target[0], target[1]) for action in actions)
        roles[function] = allowed
    return roles
