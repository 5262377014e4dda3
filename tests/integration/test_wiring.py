"""The composition root (``jobsched.runtime.wiring``) and the public request hook of ``jobsched.aws.Aws``, on moto."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

from jobsched.aws.clients import Aws
from jobsched.runtime.wiring import Components
from jobsched.settings import Settings


def counting(calls: Counter[str]) -> Any:
    """A botocore ``before-call`` hook counting each call by operation name."""

    def before_call(model: Any, **kwargs: Any) -> None:
        calls[model.name] += 1

    return before_call


def test_event_hooks_see_the_calls_of_every_client_including_the_dynamodb_resource(
    aws: Aws, settings: Settings
) -> None:
    # Given an Aws whose clients carry a counting hook
    calls: Counter[str] = Counter()
    hooked = Aws(region=aws.region, event_hooks=(("before-call.*.*", counting(calls)),))
    # When the DynamoDB resource (the stores' way in), the low-level clients and a table by name are used
    hooked.table(settings.runs_table).scan(Limit=1)
    hooked.dynamodb.describe_table(TableName=settings.control_table)
    hooked.sqs.get_queue_attributes(QueueUrl=settings.run_queue_url, AttributeNames=["All"])
    hooked.sns.list_topics()
    # Then each call went through the hook, once
    assert calls == Counter({"Scan": 1, "DescribeTable": 1, "GetQueueAttributes": 1, "ListTopics": 1})


def test_components_with_their_own_clients_keep_the_hooks_and_bounds_on_new_clients(
    aws: Aws, settings: Settings
) -> None:
    calls: Counter[str] = Counter()
    components = Components(
        settings, Aws(region=aws.region, event_hooks=(("before-call.*.*", counting(calls)),))
    )
    own = components.with_own_clients()

    own.aws.sqs.list_queues()

    assert own.aws is not components.aws and own.aws.sqs is not components.aws.sqs
    assert (own.aws.region, own.aws.calls, own.aws.event_hooks) == (
        components.aws.region,
        components.aws.calls,
        components.aws.event_hooks,
    )
    assert calls == Counter({"ListQueues": 1}) and own.settings is settings


def test_the_worker_functions_batches_give_each_thread_a_worker_of_its_own(
    aws: Aws, settings: Settings
) -> None:
    batches = Components(settings, aws).worker_batches()
    workers: dict[str, Any] = {}

    def take(name: str) -> None:
        workers[name] = batches.worker()

    threads = [threading.Thread(target=take, args=(f"t{i}",)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)

    mine = batches.worker()
    assert batches.worker() is mine  # kept for the thread's later records
    assert len({id(w) for w in [*workers.values(), mine]}) == 3
