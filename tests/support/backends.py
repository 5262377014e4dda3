"""The ports a whole deployment runs on, on any backend: the DynamoDB/SQS/SNS adapters on an in-process moto,
the in-memory fakes of ``jobsched.memory``, or local mode's SQLite stores (``jobsched.sqlite``) with the fakes'
queues. Tests that build the API service, scheduler loops, worker and
sweeper themselves (the model-based test of the promises) take a :class:`Backend` and wire the domain the
same way on both, so one judgement covers both."""

from __future__ import annotations

import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from aws_lambda_powertools.utilities.idempotency.exceptions import (
    IdempotencyItemAlreadyExistsError,
    IdempotencyItemNotFoundError,
)
from aws_lambda_powertools.utilities.idempotency.persistence.base import (
    STATUS_CONSTANTS,
    BasePersistenceLayer,
)
from aws_lambda_powertools.utilities.idempotency.persistence.datarecord import DataRecord

from jobsched.api.idempotency import IdempotencyKeys
from jobsched.aws.wire import parse_run_message
from jobsched.memory.control import MemoryControlStore
from jobsched.memory.jobs import MemoryJobStore
from jobsched.memory.queue import MemoryAlerts, MemoryDeadRuns, MemoryRunQueue
from jobsched.memory.runs import MemoryRunStore
from jobsched.ports.run_messages import RunMessage
from jobsched.runtime.wiring import Components
from jobsched.settings import MEMORY_DEAD_RUN_QUEUE_URL, MEMORY_RUN_QUEUE_URL, Settings, memory_settings
from jobsched.sqlite.control import SqliteControlStore
from jobsched.sqlite.database import SqliteDatabase
from jobsched.sqlite.jobs import SqliteJobStore
from jobsched.sqlite.runs import SqliteRunStore
from tests.support.aws import moto_deployment

BACKENDS = ("memory", "moto", "sqlite")
"""The backends a :class:`Backend` can be built on (:func:`backend`)."""


@dataclass
class Backend:
    """One deployment's ports, on ``name`` (one of :data:`BACKENDS`).

    ``jobs`` is the job store (``JobRepository`` + ``DueIndex``) and ``specs`` the worker's view of the same jobs
    (``JobSpecs``: spec reads and the overlap lock); ``runs`` the run store; ``control`` the CONTROL store
    (leases, watermarks, partition marks); ``queue`` the run queue and ``dead_runs`` the dead-run sink;
    ``idempotency`` the API's ``Idempotency-Key`` records. ``receive(limit)`` takes up to ``limit`` messages
    off the run queue (each delivered once, delay ignored on the fakes, honoured in real seconds by moto);
    ``expire_keys()`` drops every idempotency record (as their expiry would); ``key_records`` holds them on the
    fakes (None on moto).
    """

    name: str
    settings: Settings
    jobs: Any
    specs: Any
    runs: Any
    control: Any
    queue: Any
    dead_runs: Any
    idempotency: IdempotencyKeys
    receive: Callable[[int], list[RunMessage]]
    expire_keys: Callable[[], None]
    key_records: MemoryKeyRecords | None = None


class MemoryKeyRecords(BasePersistenceLayer):
    """Powertools idempotency records in a dict, with ``DynamoDBPersistenceLayer``'s put condition: a record is
    written when its key is new, its record expired, or it is in progress past its in-progress expiry; else
    ``IdempotencyItemAlreadyExistsError`` (Powertools then reads the stored record and validates the payload).
    The condition is checked and the record written under one lock, as DynamoDB's conditional put is atomic.
    :meth:`sharing` gives another layer on the same records (one per API execution environment, as each
    environment has its own ``DynamoDBPersistenceLayer`` on the one table)."""

    def __init__(self, records: dict[str, DataRecord] | None = None, lock: Any = None) -> None:
        super().__init__()
        self.records: dict[str, DataRecord] = {} if records is None else records
        self._lock = lock if lock is not None else threading.Lock()

    def sharing(self) -> MemoryKeyRecords:
        """A new layer on these records (and their lock)."""
        return MemoryKeyRecords(self.records, self._lock)

    def _get_record(self, idempotency_key: str) -> DataRecord:
        try:
            return self.records[idempotency_key]
        except KeyError:
            raise IdempotencyItemNotFoundError from None

    def _put_record(self, data_record: DataRecord) -> None:
        with self._lock:
            old = self.records.get(data_record.idempotency_key)
            if old is not None and not old.is_expired:
                now_ms = int(datetime.now().timestamp() * 1000)
                in_progress_expired = (
                    old.status == STATUS_CONSTANTS["INPROGRESS"]
                    and old.in_progress_expiry_timestamp is not None
                    and old.in_progress_expiry_timestamp < now_ms
                )
                if not in_progress_expired:
                    raise IdempotencyItemAlreadyExistsError()
            self.records[data_record.idempotency_key] = data_record

    def _update_record(self, data_record: DataRecord) -> None:
        self.records[data_record.idempotency_key] = data_record

    def _delete_record(self, data_record: DataRecord) -> None:
        self.records.pop(data_record.idempotency_key, None)


RUN_QUEUE_URL = MEMORY_RUN_QUEUE_URL
DEAD_RUN_QUEUE_URL = MEMORY_DEAD_RUN_QUEUE_URL


def memory_backend() -> Backend:
    """The fakes of ``jobsched.memory``: one ``MemoryJobStore`` serves the API, the scheduler and (as the
    worker's job specs, with the overlap locks) the worker and the sweeper."""
    jobs, queue, keys = MemoryJobStore(), MemoryRunQueue(), MemoryKeyRecords()

    def receive(limit: int) -> list[RunMessage]:
        taken = queue.take()
        queue.sent[:0] = taken[limit:]  # the rest stays queued, first in line
        return taken[:limit]

    return Backend(
        name="memory",
        settings=memory_settings(due_shards=1),  # one due shard, as the model's moto
        jobs=jobs,
        specs=jobs,
        runs=MemoryRunStore(),
        control=MemoryControlStore(),
        queue=queue,
        dead_runs=MemoryDeadRuns(),
        idempotency=IdempotencyKeys(keys),
        receive=receive,
        expire_keys=keys.records.clear,
        key_records=keys,
    )


@dataclass(frozen=True)
class MemoryComponents(Components):
    """The composition root (``jobsched.runtime.wiring.Components``) with its job store, run store, run queue and
    CONTROL store replaced by fakes (alerts go to a ``MemoryAlerts``): what the root composes from them (a scheduler group and the partitions it
    adopts, a scheduler loop) without moto. ``aws`` may be None while nothing built needs AWS clients."""

    job_store: Any = None
    run_store: Any = None
    run_sender: Any = None
    control_store: Any = None

    @classmethod
    def on(cls, fakes: Any, settings: Settings) -> MemoryComponents:
        """Components of ``settings`` on ``fakes``' ``jobs``, ``runs``, ``queue`` and ``control`` stores and its
        ``clock`` (a FakeClock, whose ``sleep`` only moves simulated time), with no AWS clients."""
        stores = {"job_store": fakes.jobs, "run_store": fakes.runs, "run_sender": fakes.queue}
        return cls(settings, None, fakes.clock, fakes.clock.sleep, control_store=fakes.control, **stores)

    def jobs(self) -> Any:
        return self.job_store

    def runs(self) -> Any:
        return self.run_store

    def run_queue(self) -> Any:
        return self.run_sender

    def control(self) -> Any:
        return self.control_store

    def alert_publisher(self) -> Any:
        return MemoryAlerts()


@contextmanager
def sqlite_backend() -> Iterator[Backend]:
    """Local mode's SQLite job, run and CONTROL stores on a database in a temporary folder
    (``synchronous=NORMAL``: no fsync per write, durability is not what these tests judge), with the fakes'
    queues and idempotency records (local mode keeps those on moto)."""
    with tempfile.TemporaryDirectory(prefix="jobsched-sqlite-") as folder:
        database = SqliteDatabase(Path(folder) / "jobsched.sqlite3", synchronous="NORMAL")
        try:
            jobs = SqliteJobStore(database)
            yield replace(
                memory_backend(),
                name="sqlite",
                jobs=jobs,
                specs=jobs,
                runs=SqliteRunStore(database),
                control=SqliteControlStore(database),
            )
        finally:
            database.close()


@contextmanager
def moto_backend(prefix: str) -> Iterator[Backend]:
    """The adapters of the composition root (``jobsched.runtime.wiring.Components``) on a fresh moto deployment with one
    due shard (fewer moto queries: more steps per second)."""
    with moto_deployment(prefix) as (aws, base):
        settings = base.model_copy(update={"due_shards": 1})
        components = Components(settings, aws)
        jobs, queue = components.jobs(), components.run_queue()

        def receive(limit: int) -> list[RunMessage]:
            got: list[RunMessage] = []
            while len(got) < limit:
                batch = aws.sqs.receive_message(
                    QueueUrl=settings.run_queue_url, MaxNumberOfMessages=min(10, limit - len(got))
                ).get("Messages", [])
                if not batch:
                    break
                for message in batch:
                    aws.sqs.delete_message(
                        QueueUrl=settings.run_queue_url, ReceiptHandle=message["ReceiptHandle"]
                    )
                got.extend(parse_run_message(m["Body"]) for m in batch)
            return got

        def expire_keys() -> None:
            table = aws.table(settings.idempotency_table)
            for item in table.scan(ConsistentRead=True)["Items"]:
                table.delete_item(Key={"id": item["id"]})

        yield Backend(
            name="moto",
            settings=settings,
            jobs=jobs,
            specs=jobs,
            runs=components.runs(),
            control=components.control(),
            queue=queue,
            dead_runs=components.notifier(),
            idempotency=IdempotencyKeys.on_dynamodb(settings.idempotency_table, aws.dynamodb),
            receive=receive,
            expire_keys=expire_keys,
        )


@contextmanager
def backend(name: str, prefix: str = "model") -> Iterator[Backend]:
    """The :class:`Backend` called ``name`` (one of :data:`BACKENDS`); raises ValueError for another name."""
    if name == "memory":
        yield memory_backend()
    elif name == "moto":
        with moto_backend(prefix) as built:
            yield built
    elif name == "sqlite":
        with sqlite_backend() as built:
            yield built
    else:
        raise ValueError(f"backend must be one of {BACKENDS}, not {name!r}")
