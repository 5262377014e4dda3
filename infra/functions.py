"""The Lambda functions (api, scheduler, worker, sweeper, archive), each with its own least-privilege role.

All run Python 3.12 on x86_64 (the architecture the asset's wheels are built for, see
``infra.bundling``) from one shared code asset; the handler of ``<name>`` is
``jobsched.handlers.<name>.handler``. Every function gets the same environment: resource names
(env var names from ``jobsched.resources``) and the runtime knobs (``Settings`` field names in upper
case), so ``jobsched.settings.get_settings()`` validates the same way everywhere. What differs is
the role: each grants only the actions that function performs, on the named table, index, queue
or topic (no ``index/*``, no ``Resource: *``).

Timeouts and the run queue's visibility are chosen together:

* worker: ``resources.WORKER_FUNCTION_TIMEOUT_S`` (900 s, Lambda's maximum). A job's own timeout is
  capped below it (``Settings.worker_timeout_cap_s``, 840 s) so the worker can still record a timed-out
  try. The run queue's visibility timeout is 6x the function timeout (``resources.RUN_QUEUE``, 5400 s),
  AWS's advice for SQS event sources: a message is never handed to a second worker while the first
  may still be running it, even when Lambda retries a throttled batch. Each heartbeat of a run
  (every ``heartbeat_interval_s``) sets its message's visibility to ``heartbeat_stale_s +
  heartbeat_interval_s`` (150 s) from now; a lost worker is found by the sweeper after
  ``heartbeat_stale_s`` (2 min), not after the visibility timeout.
* scheduler: 82 s. EventBridge starts it once a minute per partition and it ticks once a second for
  67 s; the next invocation overlaps the end of the previous one by a few seconds and they hand over
  through the partition's lease, so the clock never stops between invocations. It stops ticking 15 s
  before its timeout, room for an AWS call in flight and the lease release at their longest (each call
  bounded to 7 s: ``jobsched.runtime.scheduler.SCHEDULER_CALLS``).
* sweeper: 60 s, started once a minute; sweeps are idempotent (conditional updates), so an overlap
  is harmless.
* api: 15 s, well inside API Gateway's 29 s integration timeout.
* archive: 120 s for a batch of up to ``ARCHIVE_BATCH_SIZE`` expired runs (a few PutObject calls), fed by the
  runs table's stream through the filter ``jobsched.dynamodb.stream.TTL_DELETION_FILTER`` (only TTL deletions of
  runs invoke it: no other write of the busy path costs an invocation), and by the jobs table's through
  ``AUDIT_TTL_DELETION_FILTER`` (only TTL deletions of audit events). A failed batch is retried, bisected,
  ``ARCHIVE_RETRIES`` times, then its shard and sequence numbers go to the archive's failure queue (design §11).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from aws_cdk import Aws, CfnElement, Duration, RemovalPolicy, Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as event_sources
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra.archive import TABLE_NAME, Archive
from infra.config import (
    ARCHIVE_ENV_VARS,
    SCHEDULER_CONCURRENCY_PER_PARTITION,
    TARGET_ROLE_ENV,
    DeploymentConfig,
    InfraOptions,
)
from infra.messaging import Messaging
from infra.monitoring import metric_namespace
from infra.nag import acknowledge
from infra.storage import Storage
from jobsched import resources
from jobsched.aws.archive import ARCHIVE_BUCKET_ENV, ARCHIVE_SPILL_ENV
from jobsched.domain.archive import AUDIT_PREFIX, QUARANTINE_PREFIX, RUNS_PREFIX
from jobsched.dynamodb.stream import AUDIT_TTL_DELETION_FILTER, TTL_DELETION_FILTER
from jobsched.observability import SERVICE
from jobsched.resources import TableDef
from jobsched.runtime.scheduler import STOP_BEFORE_MS
from jobsched.settings import parse_owner_from
from jobsched.targets.ownership import OWNER_SESSION_TAG

RUNTIME = lambda_.Runtime.PYTHON_3_12
ARCHITECTURE = lambda_.Architecture.X86_64

API_TIMEOUT_S = 15
SCHEDULER_TICKING_S = 67
"""How long one scheduler invocation ticks: its minute, and a few seconds of overlap with the next minute's
invocation (they hand over through the partition's lease)."""
SCHEDULER_TIMEOUT_S = SCHEDULER_TICKING_S + math.ceil(STOP_BEFORE_MS / 1000)
"""82 s: the ticking, then ``STOP_BEFORE_MS`` for a slow call in flight and the lease release, whose AWS calls
are bounded (``jobsched.runtime.scheduler.SCHEDULER_CALLS``), so a slow call cannot reach the timeout."""
SWEEPER_TIMEOUT_S = 60
ARCHIVE_TIMEOUT_S = 120
ARCHIVE_MEMORY_MB = 256
ARCHIVE_BATCH_SIZE = 10_000
"""Stream records per archive invocation at most: the most a DynamoDB stream mapping allows ("Lambda parameters for
Amazon DynamoDB event source mappings", ``BatchSize``). Lambda also stops a batch at the 6 MB synchronous payload,
which with run records of about 1.3 KB binds first (about 4,700: ``bench/archive.py``)."""
ARCHIVE_BATCHING_WINDOW = Duration.seconds(300)
"""How long the mapping gathers records before invoking: the longest Lambda allows, for the largest objects."""
ARCHIVE_RETRIES = 10


def handler_path(name: str) -> str:
    """The Lambda handler string of function ``name`` (``api`` -> ``jobsched.handlers.api.handler``)."""
    return f"jobsched.handlers.{name}.handler"


def index_name(table: TableDef, name: str) -> str:
    """``name`` if ``table`` defines that GSI; raises ``KeyError`` otherwise (a grant never names a ghost)."""
    if not any(index.name == name for index in table.indexes):
        raise KeyError(f"table {table.id} has no index {name!r}")
    return name


@dataclass(frozen=True)
class _Spec:
    name: str
    description: str
    timeout_s: int
    memory_mb: int


def _worker_scaling(infra: InfraOptions) -> dict[str, Any]:
    """The worker event source's scaling: provisioned pollers (``worker_min_pollers`` to ``worker_max_pollers``)
    when ``worker_min_pollers`` is set, else standard mode under ``worker_max_concurrency`` (Lambda takes one or
    the other; ``DeploymentConfig.from_context`` refuses a deployment that sets both)."""
    concurrency, least, most = (
        infra.worker_max_concurrency,
        infra.worker_min_pollers,
        infra.worker_max_pollers,
    )
    if least is None:
        return {"max_concurrency": concurrency}
    return {
        "provisioned_poller_config": lambda_.ProvisionedPollerConfig(
            minimum_pollers=least, maximum_pollers=most
        )
    }


class Functions(Construct):
    """The four functions; attributes ``api``, ``scheduler``, ``worker``, ``sweeper`` (and ``all``).

    Dependencies come in through the constructor: the code asset, the deployment config and the
    ``Storage`` / ``Messaging`` constructs whose resources the roles are scoped to.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        code: lambda_.Code,
        config: DeploymentConfig,
        storage: Storage,
        messaging: Messaging,
        archive: Archive | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self._code = code
        self._config = config
        self._storage = storage
        self._messaging = messaging
        self._environment = {
            **storage.environment(),
            **messaging.environment(),
            **config.runtime_environment(),
            "POWERTOOLS_SERVICE_NAME": SERVICE,
            # Named after the stack, so two stacks of one account keep their metrics and alarms apart.
            "POWERTOOLS_METRICS_NAMESPACE": metric_namespace(self),
        }
        self._retention = logs.RetentionDays[config.infra.log_retention_name]
        infra = config.infra
        partitions = config.settings.scheduler_partitions

        self.api = self._function(_Spec("api", "jobsched HTTP API", API_TIMEOUT_S, infra.api_memory_mb))
        self.scheduler = self._function(
            _Spec(
                "scheduler",
                "jobsched scheduler: one leader per partition",
                SCHEDULER_TIMEOUT_S,
                infra.scheduler_memory_mb,
            ),
            reserved=SCHEDULER_CONCURRENCY_PER_PARTITION * partitions
            if infra.reserve_scheduler_concurrency
            else None,
            tick=True,
        )
        self.worker = self._function(
            _Spec(
                "worker",
                "jobsched worker: runs each run against its target",
                resources.WORKER_FUNCTION_TIMEOUT_S,
                infra.worker_memory_mb,
            )
        )
        self.sweeper = self._function(
            _Spec(
                "sweeper",
                "jobsched sweeper: re-enqueues stuck runs",
                SWEEPER_TIMEOUT_S,
                infra.sweeper_memory_mb,
            ),
            tick=True,
        )
        self.all: tuple[lambda_.Function, ...] = (self.api, self.scheduler, self.worker, self.sweeper)

        self.worker.add_event_source(
            event_sources.SqsEventSource(
                messaging.run_queue,
                batch_size=infra.worker_batch_size,
                max_batching_window=(
                    Duration.seconds(infra.worker_batching_window_s)
                    if infra.worker_batching_window_s
                    else None
                ),
                **_worker_scaling(infra),
                # The handler starts a batch's runs concurrently (no run waits for another's target).
                # Partial batch responses: one failed run does not redeliver its nine neighbours.
                report_batch_item_failures=True,
            )
        )
        self._grant_api()
        self._grant_scheduler()
        self._grant_worker()
        self._grant_sweeper()
        self.archive: lambda_.Function | None = None
        if archive is not None:
            self.archive = self._archive_function(archive)
            self._grant_archive_reads(archive)

    # -- functions ---------------------------------------------------------------------------------

    def _function(self, spec: _Spec, *, reserved: int | None = None, tick: bool = False) -> lambda_.Function:
        title = spec.name.capitalize()
        role = iam.Role(
            self,
            f"{title}Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"jobsched {spec.name} function: only the actions it performs",
        )
        log_group = logs.LogGroup(
            self, f"{title}Logs", retention=self._retention, removal_policy=RemovalPolicy.DESTROY
        )
        # CreateLogStream/PutLogEvents on this function's own log group (instead of the managed
        # AWSLambdaBasicExecutionRole, which allows every log group of the account).
        log_group.grant_write(role)
        function = lambda_.Function(
            self,
            title,
            description=spec.description,
            runtime=RUNTIME,
            architecture=ARCHITECTURE,
            handler=handler_path(spec.name),
            code=self._code,
            role=role,
            timeout=Duration.seconds(spec.timeout_s),
            memory_size=spec.memory_mb,
            environment=self._environment,
            log_group=log_group,
            reserved_concurrent_executions=reserved,
            # Time-triggered functions: a tick that failed or waited is worth nothing a minute later
            # (the next trigger is already on its way), so Lambda neither retries nor keeps it long.
            retry_attempts=0 if tick else None,
            max_event_age=Duration.seconds(60) if tick else None,
        )
        acknowledge(
            function,
            "AwsSolutions-L1",
            "Python 3.12 is the runtime this release is built and tested for (design §6): the asset's "
            "compiled wheels (pydantic-core) are cp312. Moving to a newer runtime is a deliberate upgrade "
            "of infra/bundling.py PYTHON_VERSION and this RUNTIME together.",
        )
        return function

    def _archive_function(self, archive: Archive) -> lambda_.Function:
        """The archive function on the runs table's stream (TTL deletions of runs only) and the jobs table's (TTL
        deletions of audit events only), both mappings retried and bisected alike, with its grants: PutObject under
        ``runs/``, ``audit/`` and ``quarantine/`` of the archive bucket; send, receive, delete and release messages of the spill queue (the
        redrive); the stream's reads and the failure queue's send (granted by the event source)."""
        function = self._function(
            _Spec("archive", "jobsched archive: expired runs to S3", ARCHIVE_TIMEOUT_S, ARCHIVE_MEMORY_MB)
        )
        function.add_environment(ARCHIVE_BUCKET_ENV, archive.bucket.bucket_name)
        function.add_environment(ARCHIVE_SPILL_ENV, archive.spill.queue_url)
        for table, pattern in (
            (self._storage.runs, TTL_DELETION_FILTER),
            (self._storage.jobs, AUDIT_TTL_DELETION_FILTER),
        ):
            function.add_event_source(
                event_sources.DynamoEventSource(
                    table,
                    starting_position=lambda_.StartingPosition.TRIM_HORIZON,
                    batch_size=ARCHIVE_BATCH_SIZE,
                    max_batching_window=ARCHIVE_BATCHING_WINDOW,
                    bisect_batch_on_error=True,
                    retry_attempts=ARCHIVE_RETRIES,
                    on_failure=event_sources.SqsDlq(archive.failures),
                    filters=[lambda_.FilterCriteria.filter(pattern)],
                )
            )
        function.add_to_role_policy(
            iam.PolicyStatement(
                actions=["s3:PutObject"],
                resources=[
                    archive.object_arn(RUNS_PREFIX),
                    archive.object_arn(AUDIT_PREFIX),
                    archive.object_arn(QUARANTINE_PREFIX),
                ],
            )
        )
        function.add_to_role_policy(
            iam.PolicyStatement(
                actions=[
                    "sqs:SendMessage",
                    "sqs:ReceiveMessage",
                    "sqs:DeleteMessage",
                    "sqs:ChangeMessageVisibility",
                ],
                resources=[archive.spill.queue_arn],
            )
        )
        role = function.role
        assert role is not None
        acknowledge(
            role,
            f"AwsSolutions-IAM5[Resource::<{_logical_id(archive.bucket)}.Arn>/{RUNS_PREFIX}*]",
            "The archive function writes objects whose names it derives from the runs it archives, all under "
            "runs/ of the archive bucket: PutObject only, on that prefix only.",
        )
        acknowledge(
            role,
            f"AwsSolutions-IAM5[Resource::<{_logical_id(archive.bucket)}.Arn>/{AUDIT_PREFIX}*]",
            "The archive function writes objects whose names it derives from the audit events it archives, all "
            "under audit/ of the archive bucket: PutObject only, on that prefix only.",
        )
        acknowledge(
            role,
            f"AwsSolutions-IAM5[Resource::<{_logical_id(archive.bucket)}.Arn>/{QUARANTINE_PREFIX}*]",
            "The archive function keeps stream records whose image is no run row whole, under names derived from "
            "their bytes, all under quarantine/ of the archive bucket (outside the table's runs/): PutObject only.",
        )
        acknowledge(
            role,
            "AwsSolutions-IAM5[Resource::*]",
            "dynamodb:ListStreams (granted by the stream event source) has no resource-level permissions; every "
            "other stream action is granted on the runs and jobs tables' streams only.",
        )
        return function

    def _grant_archive_reads(self, archive: Archive) -> None:
        """The API's reads of the archive (design §11): its workgroup and database in ``ARCHIVE_WORKGROUP`` and
        ``ARCHIVE_DATABASE``; Athena's start, state and results of queries in that workgroup only; Glue's reads of
        the archive's database and table; S3 reads of ``runs/`` of the archive bucket; and the result bucket's
        reads and writes (Athena writes a query's results with the caller's permissions)."""
        fn, stack = self.api, Stack.of(self)
        workgroup = archive.workgroup.name
        fn.add_environment(ARCHIVE_ENV_VARS[0], workgroup)
        fn.add_environment(ARCHIVE_ENV_VARS[1], archive.database_name)
        fn.add_to_role_policy(
            iam.PolicyStatement(
                actions=["athena:StartQueryExecution", "athena:GetQueryExecution", "athena:GetQueryResults"],
                resources=[stack.format_arn(service="athena", resource="workgroup", resource_name=workgroup)],
            )
        )
        fn.add_to_role_policy(
            iam.PolicyStatement(
                actions=["glue:GetDatabase", "glue:GetTable"],
                resources=[
                    stack.format_arn(service="glue", resource="catalog"),
                    stack.format_arn(
                        service="glue", resource="database", resource_name=archive.database_name
                    ),
                    stack.format_arn(
                        service="glue",
                        resource="table",
                        resource_name=f"{archive.database_name}/{TABLE_NAME}",
                    ),
                ],
            )
        )
        fn.add_to_role_policy(
            iam.PolicyStatement(actions=["s3:GetObject"], resources=[archive.object_arn(RUNS_PREFIX)])
        )
        fn.add_to_role_policy(
            iam.PolicyStatement(
                actions=["s3:ListBucket", "s3:GetBucketLocation"],
                resources=[archive.bucket.bucket_arn, archive.results.bucket_arn],
            )
        )
        fn.add_to_role_policy(
            iam.PolicyStatement(
                actions=["s3:GetObject", "s3:PutObject", "s3:AbortMultipartUpload"],
                resources=[archive.results.arn_for_objects("*")],
            )
        )
        role = fn.role
        assert role is not None
        acknowledge(
            role,
            f"AwsSolutions-IAM5[Resource::<{_logical_id(archive.bucket)}.Arn>/{RUNS_PREFIX}*]",
            "The API reads the archive's objects of the owner partition its query names, all under runs/: "
            "GetObject only, on that prefix only.",
        )
        acknowledge(
            role,
            f"AwsSolutions-IAM5[Resource::<{_logical_id(archive.results)}.Arn>/*]",
            "Athena writes and the API reads a query's results under names Athena picks, in the archive's own "
            "result bucket (results expire after 7 days).",
        )

    # -- roles -------------------------------------------------------------------------------------

    def _dynamo(
        self,
        function: lambda_.Function,
        table: dynamodb.Table,
        actions: Sequence[str],
        *,
        indexes: Sequence[str] = (),
        index_actions: Sequence[str] = ("Query",),
    ) -> None:
        """Allow ``function`` the DynamoDB ``actions`` (API names, such as ``GetItem``) on ``table``, and
        ``index_actions`` on its ``indexes`` (by index name)."""
        function.add_to_role_policy(
            iam.PolicyStatement(actions=[f"dynamodb:{a}" for a in actions], resources=[table.table_arn])
        )
        if indexes:
            function.add_to_role_policy(
                iam.PolicyStatement(
                    actions=[f"dynamodb:{a}" for a in index_actions],
                    resources=[self._storage.index_arn(table, name) for name in indexes],
                )
            )

    # The actions below are the ones the dynamodb/adapters each function uses call (jobsched.dynamodb.*,
    # jobsched.aws.*); transactions are authorized per contained action (Put/Delete/...).

    def _grant_api(self) -> None:
        """JobStore create/replace/delete (transactions of Put and Delete, and the Update of the owner's quota usage
        item), count_request (UpdateItem: a manual request in its owner's minute window), usage (GetItem), get
        (Query), get_spec and
        job_id_by_name (GetItem), list_by_owner (by_owner index + BatchGetItem); RunStore list_for_job
        (Query), list_failed (failures index Query: ``GET /runs?status=dead``), put_new/put_new_keyed (manual
        trigger), rerun and cancel (UpdateItem: the retry of a dead run, a backfill over a failed one, the
        cancel of a run) and get (the run of
        a replayed Idempotency-Key);
        ControlStore raise_partition_high_water (UpdateItem, once per process); the trigger's enqueue;
        Powertools idempotency records; a cancelled run's alert when its job asks (``alerts.on_cancelled``) on
        the alerts topic."""
        s, fn = self._storage, self.api
        by_owner = index_name(resources.JOBS, "by_owner")
        by_upstream = index_name(resources.JOBS, "by_upstream")  # a job's downstream jobs (design §2.1)
        self._dynamo(
            fn,
            s.jobs,
            ["GetItem", "BatchGetItem", "Query", "PutItem", "UpdateItem", "DeleteItem"],
            indexes=[by_owner, by_upstream],
        )
        # GetItem: the run a retried keyed trigger names (JobService._keyed_run)
        failures = index_name(resources.RUNS, "failures")
        self._dynamo(fn, s.runs, ["Query", "PutItem", "GetItem", "UpdateItem"], indexes=[failures])
        self._dynamo(fn, s.control, ["UpdateItem"])
        self._dynamo(fn, s.idempotency, ["GetItem", "PutItem", "UpdateItem", "DeleteItem"])
        self._send(fn, self._messaging.run_queue.queue_arn)
        self._publish_alerts(fn)
        self._grant_target_tag_reads(fn)
        self._grant_owner_tag_reads(fn)

    def _grant_scheduler(self) -> None:
        """JobStore due_lanes (GetItem), query_due (Query of the timer items; of the ``due`` index while it may
        hold entries of the layout before them), put_timers (BatchWriteItem), oldest_due_bucket (Scan, bootstrap
        only), scheduling_states (BatchGetItem) and the fenced move (UpdateItem); RunStore put_new and rows_between
        (Query, when a skipped range meets existing runs); ControlStore lease, watermark and read-position items;
        enqueueing; the skipped-fires alert of a job whose policy asks for it (``alerts.on_skipped``) on the alerts
        topic."""
        s, fn = self._storage, self.scheduler
        due = index_name(resources.JOBS, "due")
        self._dynamo(
            fn,
            s.jobs,
            ["GetItem", "Query", "Scan", "UpdateItem", "BatchGetItem", "BatchWriteItem"],
            indexes=[due],
            index_actions=("Query",),
        )
        self._dynamo(fn, s.runs, ["PutItem", "Query"])
        self._dynamo(fn, s.control, ["GetItem", "PutItem", "UpdateItem"])
        self._send(fn, self._messaging.run_queue.queue_arn)
        self._publish_alerts(fn)

    def _grant_worker(self) -> None:
        """RunStore claim/heartbeat/succeed/retry/dead/skip/give_back (UpdateItem), put_new (PutItem: a chained run,
        design §2.1), get (the overlap lock's
        holder, under contention) and list_for_job (Query: the unlocked-try check, an alert policy's streak);
        JobStore get_specs (BatchGetItem, a batch's jobs) and get_spec (GetItem, when that read failed),
        list_events and get (Query: the unlocked-try check, the alert policy's automatic pause, a transaction of
        Put), dependents (the by_upstream index's Query) and the overlap lock (PutItem, UpdateItem, DeleteItem); retries
        on the run queue (consuming it and extending visibility are granted by the event source); dead runs to
        the dead-run queue and the alerts topic; the targets jobs point at."""
        s, fn = self._storage, self.worker
        self._dynamo(
            fn,
            s.jobs,
            ["GetItem", "BatchGetItem", "Query", "PutItem", "UpdateItem", "DeleteItem"],
            indexes=[index_name(resources.JOBS, "by_upstream")],
        )
        self._dynamo(fn, s.runs, ["UpdateItem", "GetItem", "Query", "PutItem"])
        self._grant_runs_and_dead_letters(fn)
        self._grant_targets(fn)

    def _grant_runs_and_dead_letters(self, fn: lambda_.Function) -> None:
        """What the worker and the sweeper both need: sending to the run and dead-run queues, and publishing
        alerts."""
        m = self._messaging
        self._send(fn, m.run_queue.queue_arn, m.dead_run_queue.queue_arn)
        self._publish_alerts(fn)

    def _publish_alerts(self, fn: lambda_.Function) -> None:
        """Publishing on the alerts topic (the owners' alerts)."""
        fn.add_to_role_policy(
            iam.PolicyStatement(actions=["sns:Publish"], resources=[self._messaging.alerts_topic.topic_arn])
        )

    def _grant_sweeper(self) -> None:
        """RunStore sweep_due (sweep index Query), get_many (BatchGetItem), defer/clear/retry/dead/skip
        (UpdateItem), put_new (PutItem) and JobStore dependents (the by_upstream index's Query): the chained runs
        a worker stopped before making (design §2.1), list_for_job (Query: an alert policy's streak); JobStore get_spec (GetItem), and list_events,
        get and replace (Query, a transaction of Put: an alert policy's automatic pause); re-enqueueing; owed
        dead-run letters and alerts; draining the run queue's dead-letter queue (a run whose message SQS gave up
        on is recorded dead: design §4.7); DueRepair migrate_due_index (Scan of the ``due`` index, BatchWriteItem
        of timer items, UpdateItem of scheduling items, the layout item's GetItem and PutItem); DueRepair
        refile_stuck (Scan of the table, BatchGetItem of the candidates' states, BatchWriteItem of timer items, the
        audit item's GetItem and PutItem); JobStore's quota recount (Scan of the ``by_owner`` index, transactions
        of UpdateItem on a spec item and its owner's usage item, the progress item's GetItem and PutItem);
        ControlStore read_positions, read_watermark, read_partition_high_water and read_lease (GetItem: the
        migration waits for every partition's read positions, the anti-entropy pass reads what each partition
        drained, and the partitions without a leader are counted)."""
        s, fn = self._storage, self.sweeper
        sweep = index_name(resources.RUNS, "sweep")
        due, by_owner = index_name(resources.JOBS, "due"), index_name(resources.JOBS, "by_owner")
        self._dynamo(
            fn,
            s.jobs,
            ["GetItem", "Query", "PutItem", "UpdateItem", "BatchWriteItem", "BatchGetItem", "Scan"],
            indexes=[due, by_owner],
            index_actions=("Scan",),
        )
        self._dynamo(fn, s.runs, ["BatchGetItem", "UpdateItem", "Query", "PutItem"], indexes=[sweep])
        # a chained run the worker did not make (design §2.1): the ended run's downstream jobs, then the run
        fn.add_to_role_policy(
            iam.PolicyStatement(
                actions=["dynamodb:Query"],
                resources=[s.index_arn(s.jobs, index_name(resources.JOBS, "by_upstream"))],
            )
        )
        self._dynamo(fn, s.control, ["GetItem"])
        self._grant_runs_and_dead_letters(fn)
        fn.add_to_role_policy(
            iam.PolicyStatement(
                actions=["sqs:ReceiveMessage", "sqs:DeleteMessage"],
                resources=[self._messaging.run_dlq.queue_arn],
            )
        )

    @staticmethod
    def _send(function: lambda_.Function, *queue_arns: str) -> None:
        # SendMessageBatch is authorized by sqs:SendMessage.
        function.add_to_role_policy(
            iam.PolicyStatement(actions=["sqs:SendMessage"], resources=list(queue_arns))
        )

    def _grant_targets(self, function: lambda_.Function) -> None:
        """``lambda`` and ``sqs`` targets, reached only for the job's owner (no confused deputy).

        The worker's own role cannot reach any target. It may only assume ``target_role`` with the session tag
        ``jobsched-owner=<the job's owner>`` (``jobsched.targets.ownership``); that role may invoke functions,
        send to queues and use the customer-managed KMS keys of encrypted queues of this account and region
        (plus any ARNs listed in context) only where the resource's ``<target_owner_tag_key>`` tag equals
        ``${aws:PrincipalTag/jobsched-owner}``. So a team opts a resource in by tagging it with its own
        owner id, and IAM refuses every job of another owner."""
        infra = self._config.infra
        role = function.role
        assert isinstance(role, iam.Role)
        owner_tag = f"aws:ResourceTag/{self._config.settings.target_owner_tag_key}"
        same_owner = {"StringEquals": {owner_tag: f"${{aws:PrincipalTag/{OWNER_SESSION_TAG}}}"}}
        self.target_role = iam.Role(
            self,
            "TargetRole",
            assumed_by=iam.ArnPrincipal(role.role_arn),
            description="jobsched worker acting for a job's owner: only targets tagged with that owner",
            max_session_duration=Duration.hours(1),
        )
        assume_policy = self.target_role.assume_role_policy
        assert assume_policy is not None
        # The session must carry the owner tag, and no other tag.
        assume_policy.add_statements(
            iam.PolicyStatement(
                actions=["sts:TagSession"],
                principals=[iam.ArnPrincipal(role.role_arn)],
                conditions={
                    "StringLike": {f"aws:RequestTag/{OWNER_SESSION_TAG}": "?*"},
                    "ForAllValues:StringEquals": {"aws:TagKeys": [OWNER_SESSION_TAG]},
                },
            )
        )
        function.add_to_role_policy(
            iam.PolicyStatement(
                actions=["sts:AssumeRole", "sts:TagSession"], resources=[self.target_role.role_arn]
            )
        )
        function.add_environment(TARGET_ROLE_ENV, self.target_role.role_arn)
        # Pseudo parameters (not the stack's env) so the ARNs, and the findings acknowledged below,
        # read the same whether or not the app was synthesized with an account and region.
        any_function = f"arn:{Aws.PARTITION}:lambda:{Aws.REGION}:{Aws.ACCOUNT_ID}:function:*"
        any_queue = f"arn:{Aws.PARTITION}:sqs:{Aws.REGION}:{Aws.ACCOUNT_ID}:*"
        any_key = f"arn:{Aws.PARTITION}:kms:{Aws.REGION}:{Aws.ACCOUNT_ID}:key/*"
        self.target_statements = (
            iam.PolicyStatement(
                actions=["lambda:InvokeFunction"],
                resources=[any_function, *infra.target_function_arns],
                conditions=same_owner,
            ),
            iam.PolicyStatement(
                actions=["sqs:SendMessage"],
                resources=[any_queue, *infra.target_queue_arns],
                conditions=same_owner,
            ),
            # Queues encrypted with a customer-managed key: SQS uses the key on the sender's behalf.
            iam.PolicyStatement(
                actions=["kms:GenerateDataKey", "kms:Decrypt"],
                resources=[any_key],
                conditions={
                    "StringEquals": {
                        **same_owner["StringEquals"],
                        "kms:ViaService": f"sqs.{Aws.REGION}.amazonaws.com",
                    }
                },
            ),
        )
        for statement in self.target_statements:
            self.target_role.add_to_policy(statement)
        reason = (
            "Jobs name their own target functions and queues at run time, so targets cannot be listed at "
            "deploy time. The wildcard is narrowed to this account and region AND to resources whose "
            f"{self._config.settings.target_owner_tag_key} tag equals the job owner's session tag "
            "(aws:ResourceTag = aws:PrincipalTag): a team opts a resource in by tagging it with its own owner id."
        )
        for finding in (
            "Resource::arn:<AWS::Partition>:lambda:<AWS::Region>:<AWS::AccountId>:function:*",
            "Resource::arn:<AWS::Partition>:sqs:<AWS::Region>:<AWS::AccountId>:*",
            "Resource::arn:<AWS::Partition>:kms:<AWS::Region>:<AWS::AccountId>:key/*",
        ):
            acknowledge(self.target_role, f"AwsSolutions-IAM5[{finding}]", reason)

    def _grant_owner_tag_reads(self, function: lambda_.Function) -> None:
        """With ``owner_from = "tag:<key>"`` only: the API reads the tags of the caller's role or user
        (``iam:ListRoleTags`` / ``iam:ListUserTags``, this account's roles and users) to learn its owner
        (``jobsched.api.auth.TaggedIamAuthenticator``). With ``owner_from = "arn"`` it reads none."""
        if parse_owner_from(self._config.settings.owner_from) is None:
            return
        self._allow_tag_reads(
            function,
            [
                (
                    "iam:ListRoleTags",
                    f"arn:{Aws.PARTITION}:iam::{Aws.ACCOUNT_ID}:role/*",
                    "arn:<AWS::Partition>:iam::<AWS::AccountId>:role/*",
                ),
                (
                    "iam:ListUserTags",
                    f"arn:{Aws.PARTITION}:iam::{Aws.ACCOUNT_ID}:user/*",
                    "arn:<AWS::Partition>:iam::<AWS::AccountId>:user/*",
                ),
            ],
            "Reading tags only (ListRoleTags, ListUserTags): with owner_from=tag:<key> the API reads the tag "
            "of whichever role or user calls it, which cannot be listed at deploy time.",
        )

    def _grant_target_tag_reads(self, function: lambda_.Function) -> None:
        """The API reads a target's owner tag to refuse, at registration, a target tagged for another owner."""
        self._allow_tag_reads(
            function,
            [
                (
                    "lambda:ListTags",
                    f"arn:{Aws.PARTITION}:lambda:{Aws.REGION}:{Aws.ACCOUNT_ID}:function:*",
                    "arn:<AWS::Partition>:lambda:<AWS::Region>:<AWS::AccountId>:function:*",
                ),
                (
                    "sqs:ListQueueTags",
                    f"arn:{Aws.PARTITION}:sqs:{Aws.REGION}:{Aws.ACCOUNT_ID}:*",
                    "arn:<AWS::Partition>:sqs:<AWS::Region>:<AWS::AccountId>:*",
                ),
            ],
            "Reading tags only (ListTags, ListQueueTags): the API checks the owner tag of whatever target a "
            "job names, which cannot be listed at deploy time.",
        )

    @staticmethod
    def _allow_tag_reads(
        function: lambda_.Function, grants: Sequence[tuple[str, str, str]], reason: str
    ) -> None:
        """Allow ``function`` each ``(action, resource ARN, that ARN as cdk-nag shows it)`` of ``grants``: a tag
        read on a wildcard resource, its AwsSolutions-IAM5 finding acknowledged with ``reason``."""
        for action, resource, _ in grants:
            function.add_to_role_policy(iam.PolicyStatement(actions=[action], resources=[resource]))
        role = function.role
        assert role is not None
        for _, _, shown in grants:
            acknowledge(role, f"AwsSolutions-IAM5[Resource::{shown}]", reason)


def _logical_id(construct: Construct) -> str:
    """The CloudFormation logical id of ``construct``'s resource, as cdk-nag prints it in a finding."""
    resource = construct.node.default_child
    assert isinstance(resource, CfnElement)
    return str(Stack.of(construct).resolve(resource.logical_id))
