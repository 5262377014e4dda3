"""One invocation of the scheduler Lambda: its event, the bounds on its AWS calls, and the loop it runs
until shortly before its timeout (the loops themselves are built by ``jobsched.runtime.wiring.Components``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from jobsched.aws.clients import CallBounds
from jobsched.domain.lease import new_holder_id

if TYPE_CHECKING:
    from jobsched.runtime.wiring import Components

SCHEDULER_CALLS = CallBounds(connect_timeout_s=1, read_timeout_s=2, max_attempts=2)
"""Bounds on each AWS call of the scheduler Lambda (DynamoDB and SQS answer in milliseconds): at most
2 x (1 s + 2 s) + 1 s of backoff = 7 s, instead of botocore's default (60 s connect and read timeouts,
several attempts). A slow call then fails the tick, which the next tick retries."""

STOP_BEFORE_MS = int(2 * SCHEDULER_CALLS.worst_case_s * 1000) + 1_000
"""The Lambda loop stops ticking (and releases its lease) once less than this remains before its timeout
(15 s): room for a call in flight and the lease release to take their longest (``SCHEDULER_CALLS``), plus
a second; the function's timeout (``infra.functions.SCHEDULER_TIMEOUT_S``) adds this to its minute of ticking."""


class SchedulerEvent(BaseModel):
    """The scheduler function's event: ``{"partition": n}`` (the EventBridge rule's constant input). Other
    fields (a raw scheduled event) are ignored; a missing partition means 0."""

    model_config = ConfigDict(extra="ignore")

    partition: int = Field(0, ge=0, le=255)


def serve_invocation(event: dict[str, Any], context: Any, components: Components) -> dict[str, int]:
    """Run the scheduler loop of the event's partition until ``STOP_BEFORE_MS`` before the invocation's
    timeout (``context.get_remaining_time_in_millis()``), then release the lease so the next invocation
    (EventBridge starts one each minute) takes over. Partitions it adopts are served in the same loop.
    Returns ``{"partition", "iterations", "ticks",
    "enqueued", "skipped", "aborted_ticks"}``. Raises pydantic ValidationError for a malformed event."""
    partition = SchedulerEvent.model_validate(event or {}).partition
    loop = components.scheduler_group(
        partition, holder=new_holder_id(getattr(context, "aws_request_id", None))
    )
    report = loop.run(lambda: context.get_remaining_time_in_millis() > STOP_BEFORE_MS)
    return {"partition": partition, **report.as_dict()}
