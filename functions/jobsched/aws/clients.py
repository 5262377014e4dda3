"""boto3 wiring: clients created on first use (never at import, so moto can intercept them), and
``provision`` which builds every table/queue/topic of ``jobsched.resources`` for local mode and tests."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import boto3
import botocore.loaders
import botocore.session
from botocore.config import Config

from jobsched.resources import ALERTS_TOPIC_ENV, QUEUES, TABLES


@dataclass(frozen=True)
class CallBounds:
    """How long one AWS call of ours may take: per attempt ``connect_timeout_s`` + ``read_timeout_s``
    (seconds), at most ``max_attempts`` attempts (botocore's ``standard`` retry mode, which sleeps up to
    ``2 ** (k - 1)`` s, jittered, before retry k). ``config()`` is the botocore ``Config``."""

    connect_timeout_s: float
    read_timeout_s: float
    max_attempts: int

    def config(self) -> Config:
        """The botocore client ``Config`` enforcing these bounds (32 pooled connections: threads share it)."""
        return Config(
            # total_max_attempts counts the first attempt (botocore's max_attempts counts retries only).
            retries={"mode": "standard", "total_max_attempts": self.max_attempts},
            connect_timeout=self.connect_timeout_s,
            read_timeout=self.read_timeout_s,
            max_pool_connections=32,
        )

    @property
    def worst_case_s(self) -> float:
        """The longest one call can take before it raises: every attempt timing out, plus the longest
        backoff before each retry (seconds)."""
        backoff = sum(2 ** (k - 1) for k in range(1, self.max_attempts))
        return self.max_attempts * (self.connect_timeout_s + self.read_timeout_s) + backoff


DEFAULT_CALLS = CallBounds(connect_timeout_s=3, read_timeout_s=5, max_attempts=3)
"""Our own calls (DynamoDB, SQS, SNS) answer in milliseconds; each is bounded so a hanging endpoint cannot
hold a worker past its heartbeat window: 3 x (3 s + 5 s) + 1 s + 2 s of backoff = 27 s, under the 30 s
heartbeat interval. (Lambda targets use their own client with the job's timeout; the scheduler uses
tighter bounds, ``jobsched.runtime.scheduler.SCHEDULER_CALLS``.)"""

_LOADER: botocore.loaders.Loader | None = None
_LOADER_LOCK = threading.Lock()


def new_session() -> boto3.session.Session:
    """A new boto3 session sharing the process's botocore data loader: service models are parsed once per
    process, not once per client (a fresh loader rereads them from disk, ~0.2 s per client; this is most of
    a moto test's set-up time). Credentials and configuration are still resolved per session."""
    global _LOADER
    with _LOADER_LOCK:
        if _LOADER is None:
            _LOADER = botocore.loaders.create_loader()
        core = botocore.session.get_session()
        core.register_component("data_loader", _LOADER)
        session = boto3.session.Session(botocore_session=core)
        paths = _LOADER.search_paths  # boto3 appends its data path once per session: keep each path once
        paths[:] = list(dict.fromkeys(paths))
    return session


EventHook = tuple[str, Callable[..., Any]]
"""A botocore event handler and the event name it is registered for, e.g.
``("before-call.*.*", handler)``; botocore calls ``handler(**kwargs)`` with the event's keyword arguments
(``model``, ``params``, ``context``... see botocore's event system)."""


def _service_client(service: str) -> cached_property[Any]:
    """An ``Aws`` attribute: the boto3 client of ``service``, made on first use (``Aws._client``), then kept."""
    return cached_property(lambda aws: aws._client(service))


@dataclass
class Aws:
    """Lazily created boto3 clients of one session/region (``endpoint_url`` for a moto server), every call
    bounded by ``calls``.

    ``region`` None means the standard chain (``AWS_REGION`` in Lambda, ``AWS_DEFAULT_REGION``, the config
    file), falling back to us-east-1 only where nothing names one. ``event_hooks`` are registered on every
    client this object creates (the DynamoDB resource's client included): the public way to observe or
    count the requests of the components built on it (the bench does).
    """

    region: str | None = None
    endpoint_url: str | None = None
    calls: CallBounds = DEFAULT_CALLS
    event_hooks: tuple[EventHook, ...] = ()

    def __post_init__(self) -> None:
        if self.region is None:
            self.region = new_session().region_name or "us-east-1"

    def _hooked(self, client: Any) -> Any:
        for event_name, hook in self.event_hooks:
            client.meta.events.register(event_name, hook)
        return client

    def _client(self, service: str) -> Any:
        return self._hooked(
            new_session().client(
                service, region_name=self.region, endpoint_url=self.endpoint_url, config=self.calls.config()
            )
        )

    dynamodb = _service_client("dynamodb")
    sqs = _service_client("sqs")
    sns = _service_client("sns")
    lambda_ = _service_client("lambda")
    sts = _service_client("sts")
    iam = _service_client("iam")
    athena = _service_client("athena")

    @cached_property
    def dynamodb_resource(self) -> Any:
        resource = new_session().resource(
            "dynamodb", region_name=self.region, endpoint_url=self.endpoint_url, config=self.calls.config()
        )
        self._hooked(resource.meta.client)
        return resource

    def table(self, name: str) -> Any:
        """A DynamoDB ``Table`` resource by name."""
        return self.dynamodb_resource.Table(name)


def provision(aws: Aws, prefix: str = "jobsched") -> dict[str, str]:
    """Create every table, queue and the alerts topic from ``jobsched.resources`` (idempotent).

    Returns the environment variables ``Settings`` reads (``JOBS_TABLE`` ... ``ALERTS_TOPIC_ARN``),
    the same names the CDK stack sets on its functions.
    """
    env: dict[str, str] = {}
    existing = set(aws.dynamodb.list_tables().get("TableNames", []))
    for table in TABLES:
        name = f"{prefix}-{table.id}"
        if name not in existing:
            aws.dynamodb.create_table(**table.create_table_kwargs(name))
            if table.ttl_attribute:
                aws.dynamodb.update_time_to_live(
                    TableName=name,
                    TimeToLiveSpecification={"Enabled": True, "AttributeName": table.ttl_attribute},
                )
        env[table.env_var] = name
    arns: dict[str, str] = {}
    for queue in QUEUES:
        attributes = queue.create_queue_attributes()
        if queue.dead_letter:
            attributes["RedrivePolicy"] = json.dumps(
                {"deadLetterTargetArn": arns[queue.dead_letter], "maxReceiveCount": queue.max_receive_count}
            )
        url = aws.sqs.create_queue(QueueName=f"{prefix}-{queue.id}", Attributes=attributes)["QueueUrl"]
        arns[queue.id] = aws.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])[
            "Attributes"
        ]["QueueArn"]
        env[queue.env_var] = url
    env[ALERTS_TOPIC_ENV] = aws.sns.create_topic(Name=f"{prefix}-alerts")["TopicArn"]
    return env
