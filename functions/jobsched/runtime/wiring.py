"""The composition root: every component of jobsched built from one ``Settings`` and one ``Aws``.

The Lambda handlers (``jobsched.handlers``), local mode, the tests and the bench build their stores, queues,
notifier, targets, scheduler loops, worker, sweeper and API from a :class:`Components`, so each component is
wired in one place. In a Lambda, ``Components.from_environment()`` reads the settings the stack sets and
creates boto3 clients lazily (never at import, so moto can intercept them); the handlers take the
components they run on as optional arguments, which is how local mode and the tests pass their own.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol

from jobsched.aws.clients import DEFAULT_CALLS, Aws, CallBounds, new_session
from jobsched.clock import Clock, system_clock
from jobsched.domain.alerting import RecentRuns
from jobsched.domain.lease import LeaseStore
from jobsched.ports.alerts import Alert, AlertSink
from jobsched.ports.control import PartitionMarks, WatermarkStore
from jobsched.ports.jobs import DueIndex, JobRepository
from jobsched.ports.lateness import LatenessStore
from jobsched.ports.quotas import QuotaCounters, QuotaRecount
from jobsched.ports.run_stores import (
    DeadRunSink,
    JobSpecs,
    RunHistory,
    RunRows,
    RunSender,
    RunWriter,
    SweepRows,
    VisibilityExtender,
)
from jobsched.settings import Settings, get_settings, parse_owner_from

if TYPE_CHECKING:
    from jobsched.api.app import Api
    from jobsched.api.service import JobService
    from jobsched.domain.alerting import Alerting
    from jobsched.domain.loop import SchedulerGroup, SchedulerLoop, TickMetrics
    from jobsched.domain.planning import TickLimits
    from jobsched.domain.retries import Failures
    from jobsched.domain.supervision import Waiter
    from jobsched.domain.sweeper import Sweeper
    from jobsched.domain.tick_records import TickConfig
    from jobsched.domain.worker import Worker
    from jobsched.dynamodb.control import ControlStore
    from jobsched.dynamodb.due_repair import DueRepair
    from jobsched.ports.archive_queries import ArchiveQueries
    from jobsched.runtime.worker import Batches
    from jobsched.targets import Targets


class JobStorePorts(JobRepository, DueIndex, JobSpecs, QuotaCounters, QuotaRecount, Protocol):
    """Every port a job store serves (the API's ``JobRepository`` and ``QuotaCounters``, the tick's ``DueIndex``, the worker's and the
    sweeper's ``JobSpecs``, the sweeper's ``QuotaRecount``), plus the due index's high-water reads of ``Components.scheduler_group``. Implemented by
    ``jobsched.dynamodb.jobs.JobStore`` (DynamoDB) and ``jobsched.sqlite.jobs.SqliteJobStore``."""

    def highest_due_partition(self) -> int | None:
        """The highest scheduler partition any due entry is filed in (None: no entry). A scan: slow."""
        ...

    def highest_due_shard(self) -> int | None:
        """The highest due shard any due entry is filed in (None: no entry). A scan: slow."""
        ...


class RunStorePorts(RunRows, SweepRows, RunWriter, RecentRuns, RunHistory, Protocol):
    """Every port a run store serves (the worker's ``RunRows``, the sweeper's ``SweepRows``, the tick's
    ``RunWriter``, the alert policies' ``RecentRuns``, the API's ``RunHistory``). Implemented by
    ``jobsched.dynamodb.runs.RunStore`` (DynamoDB) and ``jobsched.sqlite.runs.SqliteRunStore``."""


class ControlStorePorts(WatermarkStore, PartitionMarks, LeaseStore, LatenessStore, Protocol):
    """Every port the CONTROL store serves (the tick's ``WatermarkStore``, the partitions' and due shards'
    ``PartitionMarks``, the leader lease's ``LeaseStore``, the lateness summaries' ``LatenessStore``).
    Implemented by ``jobsched.dynamodb.control.ControlStore`` (DynamoDB) and
    ``jobsched.sqlite.control.SqliteControlStore``."""


class RunQueuePorts(RunSender, VisibilityExtender, Protocol):
    """Every port the run queue serves (sending run messages, extending in-flight ones' visibility).
    Implemented by ``jobsched.aws.queue.RunQueue`` (on SQS, or on local mode's SQLite stand-in)."""


@dataclass(frozen=True)
class DueUpkeep:
    """The DynamoDB stores the sweeper Lambda's upkeep passes run on (``jobsched.runtime.sweeper``): the JOBS
    table's repair and move of the due index (``DueRepair.refile_stuck``, ``DueRepair.migrate_due_index``) and
    the CONTROL store's reads of watermarks, read positions and the partitions' high-water mark. No port: only
    the DynamoDB layout has these passes, and local mode's sweeper does not run them."""

    repair: DueRepair
    control: ControlStore


# Each function imports only what it builds (the API's routes and models, the target executors and the
# batch processor take a second or more to import between them): components are imported where they
# are built, so a function's cold start pays only for its own.


@dataclass(frozen=True)
class Components:
    """Builds each component on the tables, queues and topic ``settings`` names, through ``aws``'s clients.

    ``clock`` gives epoch milliseconds (UTC); ``sleep`` waits seconds (the scheduler loop's pacing). Every
    method builds a new component; components built from one ``Components`` share its boto3 clients, which
    are thread-safe (low-level clients) except the DynamoDB resource: a thread of its own gets its own
    clients with :meth:`with_own_clients`.
    """

    settings: Settings
    aws: Aws
    clock: Clock = system_clock
    sleep: Callable[[float], None] = time.sleep

    @classmethod
    def from_environment(cls, *, calls: CallBounds = DEFAULT_CALLS) -> Components:
        """A Lambda function's components: ``Settings`` from the environment the stack sets (validated once
        per process; raises pydantic ValidationError when a name is missing), boto3 clients of the
        standard credential chain each bounded by ``calls``, the system clock and ``time.sleep``."""
        return cls(settings=get_settings(), aws=Aws(calls=calls))

    def with_own_clients(self) -> Components:
        """The same components on new boto3 clients (same region, endpoint, bounds and event hooks)."""
        return replace(self, aws=replace(self.aws))

    # --- adapters ---------------------------------------------------------------------------------

    def jobs(self) -> JobStorePorts:
        """The JOBS table (job specs, scheduling state, the due index)."""
        from jobsched.dynamodb.jobs import JobStore

        return JobStore(self.aws.table(self.settings.jobs_table))

    def runs(self) -> RunStorePorts:
        """The RUNS table (run history, claims, the sweep index)."""
        from jobsched.dynamodb.runs import RunStore

        return RunStore(self.aws.table(self.settings.runs_table))

    def control(self) -> ControlStorePorts:
        """The CONTROL table (leases, watermarks, lateness summaries, the partition high-water mark)."""
        from jobsched.dynamodb.control import ControlStore

        return ControlStore(self.aws.dynamodb, self.settings.control_table)

    def due_upkeep(self) -> DueUpkeep:
        """The DynamoDB JOBS and CONTROL stores of the sweeper's upkeep passes (:class:`DueUpkeep`)."""
        from jobsched.dynamodb.control import ControlStore
        from jobsched.dynamodb.jobs import JobStore

        return DueUpkeep(
            JobStore(self.aws.table(self.settings.jobs_table)).repair,
            ControlStore(self.aws.dynamodb, self.settings.control_table),
        )

    def run_queue_client(self) -> Any:
        """The SQS client the run queue is reached through (``aws.sqs``; local mode's may be its own)."""
        return self.aws.sqs

    def run_dlq_client(self) -> Any:
        """The SQS client the run queue's dead-letter queue is reached through (``aws.sqs``; local mode's
        SQLite run queue answers for its own)."""
        return self.aws.sqs

    def run_queue(self) -> RunQueuePorts:
        """The run queue (SQS): run messages, retries with delay, visibility changes."""
        from jobsched.aws.queue import RunQueue

        return RunQueue(self.run_queue_client(), self.settings.run_queue_url)

    def notifier(self) -> DeadRunSink:
        """The dead-run queue + alerts topic adapter."""
        from jobsched.aws.alerts import DeadRunNotifier

        return DeadRunNotifier(
            self.aws.sqs,
            self.aws.sns,
            dead_run_queue_url=self.settings.dead_run_queue_url,
            topic_arn=self.settings.alerts_topic_arn,
        )

    def alert_publisher(self) -> AlertSink:
        """The alerts topic adapter for the jobs' alert policies (``owner``, ``job_id``, ``kind`` attributes)."""
        from jobsched.aws.alerts import AlertPublisher

        return AlertPublisher(self.aws.sns, topic_arn=self.settings.alerts_topic_arn)

    def alerting(self) -> Alerting:
        """The jobs' alert policies: alerts on the alerts topic, streaks read from the runs table, automatic
        pauses written to the jobs table."""
        from jobsched.domain.alerting import Alerting

        return Alerting(
            sink=self.alert_publisher(),
            runs=self.runs(),
            jobs=self.jobs(),
            clock=self.clock,
            retention_days=self.settings.retention_days,
        )

    def failures(self) -> Failures:
        """Retry/dead handling over the runs table, the run queue and the dead-run notifier."""
        from jobsched.aws.metrics import PowertoolsRunMetrics
        from jobsched.domain.chains import Chains
        from jobsched.domain.retries import Failures

        runs, queue = self.runs(), self.run_queue()
        return Failures(
            runs=runs,
            queue=queue,
            dead_runs=self.notifier(),
            settings=self.settings,
            clock=self.clock,
            metrics=PowertoolsRunMetrics(),
            alerting=self.alerting(),
            chains=Chains(jobs=self.jobs(), runs=runs, queue=queue, settings=self.settings, clock=self.clock),
        )

    def targets(self) -> Targets:
        """Every target executor, configured from ``settings`` (address guard, shell switch, timeout cap).

        ``lambda`` and ``sqs`` targets act for the job's owner (``jobsched.targets.ownership``): through the
        target role ``settings.target_role_arn`` tagged with the owner when the deployment has one (AWS), else
        with the worker's own clients after an owner-tag check (local mode).
        """
        from botocore.config import Config

        from jobsched.targets import Targets
        from jobsched.targets.aws import LambdaExecutor, SqsExecutor
        from jobsched.targets.commands import CommandExecutor
        from jobsched.targets.http import AddressPolicy, HttpExecutor
        from jobsched.targets.ownership import ActingForOwner, OwnerClients, TargetTags
        from jobsched.targets.shell import ShellExecutor

        settings, aws = self.settings, self.aws
        # Long synchronous invokes: read timeout past the worker's cap; no automatic retry of an invoke
        # (a retry after a read timeout would run the function twice).
        lambda_config = Config(
            read_timeout=settings.worker_timeout_cap_s + 30,
            connect_timeout=10,
            retries={"total_max_attempts": 1},
        )

        def client(service: str, credentials: dict[str, str] | None = None) -> Any:
            config = lambda_config if service == "lambda" else aws.calls.config()
            return new_session().client(
                service,
                region_name=aws.region,
                endpoint_url=aws.endpoint_url,
                config=config,
                **(credentials or {}),
            )

        tags = TargetTags(
            settings.target_owner_tag_key,
            lambda_client=lambda: aws.lambda_,
            sqs_client=lambda: aws.sqs,
            sts_client=lambda: aws.sts,
        )
        owner_clients = (
            OwnerClients(
                settings.target_role_arn, sts_client=lambda: aws.sts, make_client=client, now_s=time.time
            )
            if settings.target_role_arn
            else None
        )
        return Targets(
            http=HttpExecutor(
                AddressPolicy(
                    allow_private=settings.allow_private_http_targets,
                    allow_loopback=settings.allow_loopback_http_targets,
                ),
                loopback_owners=self.shell_owners(),
            ),
            lambda_=ActingForOwner(
                "lambda",
                per_client=LambdaExecutor,
                clients=owner_clients,
                local=LambdaExecutor(lambda: client("lambda")),
                tags=tags,
            ),
            sqs=ActingForOwner(
                "sqs",
                per_client=SqsExecutor,
                clients=owner_clients,
                local=SqsExecutor(lambda: aws.sqs),
                tags=tags,
            ),
            command=CommandExecutor(),
            shell=ShellExecutor(enabled=settings.allow_shell_targets, owners=self.shell_owners()),
        )

    def shell_owners(self) -> frozenset[str] | None:
        """The owners that may use ``shell`` targets: with a tokens file (local mode), those of its tokens marked
        ``"shell": true`` (``jobsched.api.auth.shell_owners``); else None, every owner (the deployment's
        ``allow_shell_targets`` decides). Raises ValueError for a malformed tokens file."""
        from jobsched.api.auth import load_tokens, shell_owners

        if not self.settings.local_tokens_file:
            return None
        return shell_owners(load_tokens(self.settings.local_tokens_file))

    # --- the four functions ---------------------------------------------------------------------

    def worker(self, *, targets: Targets | None = None, waiter: Waiter | None = None) -> Worker:
        """The worker: claims, runs and records one run per record (``targets`` default: :meth:`targets`;
        ``waiter`` default: real time between heartbeats)."""
        from jobsched.aws.metrics import PowertoolsRunMetrics
        from jobsched.domain.worker import Worker

        queue = self.run_queue()
        return Worker(
            settings=self.settings,
            runs=self.runs(),
            jobs=self.jobs(),
            queue=queue,
            dead_runs=self.notifier(),
            targets=targets or self.targets(),
            clock=self.clock,
            metrics=PowertoolsRunMetrics(),
            visibility=queue,
            waiter=waiter,
            alerting=self.alerting(),
        )

    def worker_batches(self) -> Batches:
        """The worker function's batch runner: each record thread gets a worker of its own on boto3 clients
        of its own (:meth:`with_own_clients`), built on its first record and kept."""
        from jobsched.runtime.worker import Batches

        return Batches(lambda: self.with_own_clients().worker())

    def sweeper(self) -> Sweeper:
        """The sweeper: one bounded pass over the runs table's sweep index per call of ``sweep()``."""
        from jobsched.aws.metrics import PowertoolsRunMetrics
        from jobsched.aws.queue import DeadLetterQueue
        from jobsched.domain.sweeper import Sweeper

        dlq = self.settings.run_dlq_url
        return Sweeper(
            settings=self.settings,
            runs=self.runs(),
            jobs=self.jobs(),
            queue=self.run_queue(),
            failures=self.failures(),
            clock=self.clock,
            metrics=PowertoolsRunMetrics(),
            dead_letters=DeadLetterQueue(self.run_dlq_client(), dlq) if dlq else None,
        )

    def scheduler_loop(
        self,
        partition: int,
        *,
        holder: str | None = None,
        limits: TickLimits | None = None,
        tick_metrics: TickMetrics | None = None,
        adopted: bool = False,
        read_shards: int | None = None,
    ) -> SchedulerLoop:
        """A scheduler loop for ``partition`` (0 <= partition < ``settings.scheduler_partitions``, or above
        when ``adopted``). ``holder`` is the lease contender id (default: host, pid and a random suffix);
        ``tick_metrics`` defaults to Powertools EMF; ``read_shards``: the due shards its ticks read (default and
        at least ``settings.due_shards``: ``Scheduler``). Raises ValueError for a partition out of range."""
        from jobsched.aws.lateness import JsonLateness
        from jobsched.aws.metrics import PowertoolsTickMetrics
        from jobsched.aws.positions import JsonPositions
        from jobsched.domain.lateness import LatenessBoard
        from jobsched.domain.lease import LeaderLease, new_holder_id
        from jobsched.domain.loop import SchedulerLoop
        from jobsched.domain.tick import Scheduler

        scheduler = Scheduler(
            adopted=adopted,
            partition=partition,
            jobs=self.jobs(),
            runs=self.runs(),
            queue=self.run_queue(),
            control=self.control(),
            config=tick_config(self.settings),
            positions=JsonPositions(),
            clock=self.clock,
            limits=limits,
            alerts=self.alert_publisher(),
            read_shards=read_shards,
        )
        lease = LeaderLease(
            self.control(),
            partition,
            holder or new_holder_id(),
            clock=self.clock,
            ttl_ms=int(self.settings.lease_ttl_s * 1000),
        )
        return SchedulerLoop(
            scheduler,
            lease,
            clock=self.clock,
            sleep=self.sleep,
            tick_metrics=tick_metrics if tick_metrics is not None else PowertoolsTickMetrics(),
            board=LatenessBoard(partition, self.control(), JsonLateness()),
        )

    def scheduler_group(
        self,
        partition: int,
        *,
        holder: str | None = None,
        limits: TickLimits | None = None,
        tick_metrics: TickMetrics | None = None,
    ) -> SchedulerGroup:
        """The loops the process serving ``partition`` runs: that partition's, and one for each partition it
        adopts because a deployment with more partitions ran before, or an API already created jobs for more
        (``adopted_partitions``; the high-water mark is kept in the CONTROL table: 1 request, plus a one-off
        scan of the due index when a deployment from before the mark first runs this code). Each reads as many
        due shards as any deployment filed entries in (the due shards' high-water mark, kept the same way), so
        ``due_shards`` can be lowered as well as raised. Raises ValueError for a partition out of range."""
        from jobsched.domain.loop import SchedulerGroup, adopted_partitions

        control = self.control()
        high_water = _high_water(
            control.raise_partition_high_water,
            self.settings.scheduler_partitions,
            lambda: self.jobs().highest_due_partition(),
        )
        shards = _high_water(
            control.raise_shard_high_water, self.settings.due_shards, lambda: self.jobs().highest_due_shard()
        )
        partitions = [
            partition,
            *adopted_partitions(partition, self.settings.scheduler_partitions, high_water),
        ]
        return SchedulerGroup(
            [
                self.scheduler_loop(
                    p,
                    holder=holder,
                    limits=limits,
                    tick_metrics=tick_metrics,
                    adopted=p != partition,
                    read_shards=shards,
                )
                for p in partitions
            ]
        )

    def job_service(self) -> JobService:
        """The API's use cases. Reading a target's tags is advisory (IAM decides at run time): those reads
        get one short attempt (``TAG_READ_CALLS``) on clients of their own, never a slow request."""
        from jobsched.api.idempotency import IdempotencyKeys
        from jobsched.api.service import JobService
        from jobsched.targets.ownership import TAG_READ_CALLS, TargetTags

        settings = self.settings
        tag_reads = replace(self.aws, calls=TAG_READ_CALLS)
        jobs = self.jobs()
        return JobService(
            settings=settings,
            jobs=jobs,
            counters=jobs,
            runs=self.runs(),
            queue=self.run_queue(),
            clock=self.clock,
            idempotency=IdempotencyKeys.on_dynamodb(settings.idempotency_table, self.aws.dynamodb),
            target_tags=TargetTags(
                settings.target_owner_tag_key,
                lambda_client=lambda: tag_reads.lambda_,
                sqs_client=lambda: tag_reads.sqs,
                sts_client=lambda: tag_reads.sts,
            ),
            partition_marks=self.control(),
            shell_owners=self.shell_owners(),
            alerts=LazyAlerts(self.alert_publisher),
        )

    def api(self) -> Api:
        """What the API's routes need. Auth: bearer tokens when ``settings.local_tokens_file`` is set (local
        mode; raises ValueError for an unreadable tokens file), else the IAM principal API Gateway reports: its ARN,
        or with ``owner_from = "tag:<key>"`` its role's or user's tag (``TaggedIamAuthenticator``)."""
        from jobsched.api.app import Api
        from jobsched.api.archive_reads import ArchiveReads
        from jobsched.api.auth import (
            Authenticator,
            IamAuthenticator,
            TaggedIamAuthenticator,
            TokenAuthenticator,
        )
        from jobsched.api.health import HealthReads
        from jobsched.aws.lateness import JsonLateness
        from jobsched.aws.principals import IamPrincipalTags

        authenticator: Authenticator
        tag_key = parse_owner_from(self.settings.owner_from)
        if self.settings.local_tokens_file:
            authenticator = TokenAuthenticator.from_file(self.settings.local_tokens_file)
        elif tag_key is not None:
            tags = IamPrincipalTags(iam=lambda: self.aws.iam, sts=lambda: self.aws.sts)
            authenticator = TaggedIamAuthenticator(tag_key, tags, clock=self.clock)
        else:
            authenticator = IamAuthenticator()
        service = self.job_service()
        archive = ArchiveReads(
            self.archive_queries(),
            retention_days=self.settings.retention_days,
            recent=service.run_listing.window_rows,
        )
        return Api(
            settings=self.settings,
            service=service,
            authenticator=authenticator,
            health=HealthReads(self.control(), JsonLateness(), self.settings.scheduler_partitions),
            archive=archive,
        )

    def archive_queries(self) -> ArchiveQueries | None:
        """The archive's queries: Athena in ``settings.archive_workgroup`` over ``settings.archive_database``
        when both are set, else None (no archive configured)."""
        from jobsched.aws.athena import AthenaArchiveQueries

        workgroup, database = self.settings.archive_workgroup, self.settings.archive_database
        if not workgroup or not database:
            return None
        return AthenaArchiveQueries(self.aws.athena, workgroup=workgroup, database=database)


class LazyAlerts:
    """An ``AlertSink`` made on its first publish (``make``): the API publishes only a cancelled run's alert,
    rarely, so its SNS client is not made at start (no cold-start cost)."""

    def __init__(self, make: Callable[[], AlertSink]) -> None:
        self._make = make
        self._sink: AlertSink | None = None

    def publish(self, alert: Alert) -> None:
        if self._sink is None:
            self._sink = self._make()
        self._sink.publish(alert)


def _high_water(
    raise_mark: Callable[[int], tuple[int, bool]], count: int, highest: Callable[[], int | None]
) -> int:
    """A high-water mark (``PartitionMarks``: partitions or due shards) raised to this deployment's ``count``;
    when no mark was stored yet (a deployment from before it), raised to what its jobs' due entries use: the
    ``highest`` partition or shard any entry is in, plus 1 (a one-off scan)."""
    mark, missing = raise_mark(count)
    if missing:
        used = highest()
        if used is not None and used + 1 > mark:
            mark, _ = raise_mark(used + 1)
    return mark


def tick_config(settings: Settings) -> TickConfig:
    """The values of ``settings`` a scheduler tick needs (``domain.tick_records.TickConfig``)."""
    from jobsched.domain.tick_records import TickConfig

    return TickConfig(
        partitions=settings.scheduler_partitions,
        due_shards=settings.due_shards,
        bucket_ms=settings.due_bucket_s * 1000,
        retention_days=settings.retention_days,
        lookahead_ms=settings.dispatch_lookahead_ms,
    )
