"""Alarms and the CloudWatch dashboard.

Application metrics are the Powertools EMF metrics of ``jobsched.observability`` (dimension
``service=jobsched``, names from ``MetricName``) in the namespace named after the stack
(``metric_namespace``: ``jobsched`` for the default stack), so two stacks in one account keep their
metrics, alarms and dashboards apart. Every alarm notifies the operations topic (``alarm_topic``), whose
policy lets CloudWatch publish for this account's alarms: subscribe the on-call rotation to it (see
docs/deploy.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import ArnFormat, Duration, Stack
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.config import DeploymentConfig
from jobsched.domain.lateness import PRIORITIES
from jobsched.observability import SERVICE, MetricName

ONE_MINUTE = Duration.minutes(1)
FIVE_MINUTES = Duration.minutes(5)


def metric_namespace(scope: Construct) -> str:
    """The CloudWatch namespace of the application metrics of the stack ``scope`` belongs to: the stack
    name (``jobsched`` by default; stack names are valid namespaces). The functions receive it as
    ``POWERTOOLS_METRICS_NAMESPACE``."""
    return Stack.of(scope).stack_name


def alarm_name_prefix(scope: Construct) -> str:
    """Every alarm of the stack is named ``<stack name>-<alarm>``; the alarm topic's policy is scoped to it."""
    return f"{Stack.of(scope).stack_name}-"


def app_metric(namespace: str, name: str, statistic: str, period: Duration = ONE_MINUTE) -> cloudwatch.Metric:
    """A jobsched EMF metric (``MetricName`` constant) in ``namespace`` (``metric_namespace``) with the
    ``service`` dimension Powertools adds."""
    return cloudwatch.Metric(
        namespace=namespace,
        metric_name=name,
        dimensions_map={"service": SERVICE},
        statistic=statistic,
        period=period,
    )


def _labelled(namespace: str, name: str, priority: str) -> cloudwatch.Metric:
    """The p99 of ``name`` for the jobs of ``priority``, over every owner (the ``[service, priority]`` dimension set
    of ``observability.add_labelled``)."""
    return cloudwatch.Metric(
        namespace=namespace,
        metric_name=name,
        dimensions_map={"service": SERVICE, "priority": priority},
        statistic="p99",
        period=ONE_MINUTE,
    )


def _by_owner(namespace: str, name: str) -> cloudwatch.MathExpression:
    """The p99 of ``name`` for each (priority, owner) series (the top owners by backlog and ``other``: at most
    3 x 11), found by a CloudWatch SEARCH."""
    return cloudwatch.MathExpression(
        expression=f"SEARCH('{{{namespace},owner,priority,service}} MetricName=\"{name}\"', 'p99', 60)",
        using_metrics={},
        label="",
        period=ONE_MINUTE,
    )


@dataclass(frozen=True)
class Watched:
    """What the alarms and the dashboard watch: the REST API, the functions and the run, run DLQ and dead-run
    queues."""

    api: apigw.RestApi
    api_function: lambda_.Function
    scheduler: lambda_.Function
    worker: lambda_.Function
    sweeper: lambda_.Function
    run_queue: sqs.IQueue
    run_dlq: sqs.IQueue
    dead_run_queue: sqs.IQueue
    archive: lambda_.Function | None = None
    archive_spill: sqs.IQueue | None = None
    archive_failures: sqs.IQueue | None = None


class Monitoring(Construct):
    """Alarms (attribute ``alarms``, by name), the operations topic and the dashboard.

    The alarms (named ``<stack name>-<name>``): scheduler lag above ``infra.scheduler_lag_alarm_ms``; the
    scheduler not being invoked (EventBridge or Lambda broken, so the clock stopped: lag cannot be reported
    then), in all, and a partition without a leader (one partition's clock stopped among many); jobs found
    stuck with their timer item lost (``JobsRefiled``: the anti-entropy pass saved them; the cause is a fault);
    errors of the scheduler, worker and sweeper functions; API 5xx; the run queue's oldest message
    older than ``infra.run_queue_age_alarm_s``; any message in the run queue's DLQ (poison messages) or in
    the dead-run queue (runs out of attempts); with the archive (design §11): errors of the archive function, any
    object in its spill queue (the bucket refused it: redrive it) and any batch in its failure queue (a batch that
    failed every retry: its records stay in the stream 24 hours).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: DeploymentConfig,
        watched: Watched,
    ) -> None:
        super().__init__(scope, construct_id)
        infra = config.infra
        partitions = config.settings.scheduler_partitions
        stack = Stack.of(self)
        self.namespace = metric_namespace(self)
        self.alarm_topic = sns.Topic(
            self, "AlarmTopic", display_name="jobsched operations alarms", enforce_ssl=True
        )
        for address in infra.alarm_emails:  # so an alarm reaches someone from the first deploy on
            self.alarm_topic.add_subscription(subscriptions.EmailSubscription(address))
        # enforce_ssl gives the topic a policy, which replaces SNS's default one: without this Allow,
        # CloudWatch could not publish and every alarm would change state silently. Scoped to this
        # account's alarms of this stack (aws:SourceAccount, aws:SourceArn: no confused deputy).
        self.alarm_topic.add_to_resource_policy(
            iam.PolicyStatement(
                sid="CloudWatchAlarmsPublish",
                principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
                actions=["sns:Publish"],
                resources=[self.alarm_topic.topic_arn],
                conditions={
                    "StringEquals": {"aws:SourceAccount": stack.account},
                    "ArnLike": {
                        "aws:SourceArn": stack.format_arn(
                            service="cloudwatch",
                            resource="alarm",
                            resource_name=f"{alarm_name_prefix(self)}*",
                            arn_format=ArnFormat.COLON_RESOURCE_NAME,
                        )
                    },
                },
            )
        )
        self.alarms: dict[str, cloudwatch.Alarm] = {}

        lag = app_metric(self.namespace, MetricName.SCHEDULER_LAG, "Maximum")
        self._alarm(
            "SchedulerLag",
            lag,
            threshold=infra.scheduler_lag_alarm_ms,
            sustained=True,
            description="The oldest due run waited longer than the threshold to be enqueued (ms).",
        )
        # Each partition is started once a minute: fewer than one start per partition per minute over
        # five minutes means the clock is not running. No data at all is the worst case: breaching.
        self._alarm(
            "SchedulerNotRunning",
            watched.scheduler.metric_invocations(period=FIVE_MINUTES, statistic="Sum"),
            threshold=4 * partitions,
            comparison=cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD,
            missing=cloudwatch.TreatMissingData.BREACHING,
            description="The scheduler was invoked fewer than 4 times per partition in 5 minutes.",
        )
        # The total above misses one partition stopped among five or more (its rule disabled, its invocations
        # failing), and a stopped partition reports no lag: the sweeper counts, each minute, the partitions whose
        # lease is expired or missing. A hand-over leaves a partition without a leader for about a second, so 2 of
        # 3 minutes; no count at all (the sweeper not running or not reading the leases) is breaching too.
        self._alarm(
            "SchedulerPartitionWithoutLeader",
            app_metric(self.namespace, MetricName.PARTITIONS_WITHOUT_LEADER, "Maximum"),
            threshold=1,
            sustained=True,
            missing=cloudwatch.TreatMissingData.BREACHING,
            description=(
                "A scheduler partition had no leader in 2 of the last 3 minutes (its jobs are not firing; the "
                "sweeper's log names it), or the sweeper did not count them."
            ),
        )
        self._alarm(
            "JobsRefiled",
            app_metric(self.namespace, MetricName.JOBS_REFILED, "Sum", FIVE_MINUTES),
            threshold=1,
            description=(
                "Jobs were found stuck, their timer item lost, and given a new one (their missed fires are "
                "handled by their catch-up policy); the sweeper's log names them."
            ),
        )
        for name, function in (
            ("Scheduler", watched.scheduler),
            ("Worker", watched.worker),
            ("Sweeper", watched.sweeper),
        ):
            self._errors_alarm(
                name,
                function,
                f"The {name.lower()} function failed (crash or timeout) in the last 5 minutes.",
            )
        self._alarm(
            "Api5xx",
            watched.api.metric_server_error(period=FIVE_MINUTES, statistic="Sum"),
            threshold=5,
            description="The API answered 5xx at least 5 times in 5 minutes.",
        )
        # The age of the oldest message not yet deleted: one waiting for a worker, or one in flight for
        # the length of its try (so the threshold sits above the longest try by default).
        self._alarm(
            "RunQueueAge",
            watched.run_queue.metric_approximate_age_of_oldest_message(
                period=ONE_MINUTE, statistic="Maximum"
            ),
            threshold=infra.run_queue_age_alarm_s,
            sustained=True,
            description="A run waited in the run queue longer than the threshold (s): workers fall behind.",
        )
        for name, queue, description in (
            (
                "RunDlqDepth",
                watched.run_dlq,
                "Poison messages reached the run queue's dead-letter queue (maxReceiveCount exceeded).",
            ),
            (
                "DeadRunQueueDepth",
                watched.dead_run_queue,
                "Runs went dead (out of attempts); their owners were alerted on the alerts topic.",
            ),
        ):
            self._depth_alarm(name, queue, description)
        self._archive_alarms(watched)

        # Named after the stack: "jobsched" in CloudWatch > Dashboards.
        self.dashboard = cloudwatch.Dashboard(self, "Dashboard", dashboard_name=Stack.of(self).stack_name)
        self._widgets(watched)

    def _archive_alarms(self, watched: Watched) -> None:
        """The archive's alarms, when the stack has the archive."""
        if watched.archive is not None:
            self._errors_alarm(
                "Archive",
                watched.archive,
                "The archive function failed a batch (it is retried from the stream).",
            )
            self._alarm(
                "ArchiveQuarantined",
                app_metric(self.namespace, MetricName.ARCHIVE_QUARANTINED, "Sum", FIVE_MINUTES),
                threshold=1,
                description="TTL deleted run rows whose image is no run row; their stream records are kept whole "
                "under quarantine/ of the archive bucket (docs/deploy.md).",
            )
        for name, queue, description in (
            (
                "ArchiveSpillDepth",
                watched.archive_spill,
                "The archive bucket refused objects; they wait in the spill queue (14 days): redrive them "
                "(docs/deploy.md).",
            ),
            (
                "ArchiveFailuresDepth",
                watched.archive_failures,
                "An archive batch failed every retry; its records stay in the runs table's stream for 24 hours "
                "(docs/deploy.md).",
            ),
        ):
            if queue is not None:
                self._depth_alarm(name, queue, description)

    def _errors_alarm(self, name: str, function: lambda_.IFunction, description: str) -> None:
        """The alarm ``<name>Errors``: ``function`` failed at least once in the last 5 minutes (its ``Errors``
        metric, summed)."""
        self._alarm(
            f"{name}Errors",
            function.metric_errors(period=FIVE_MINUTES, statistic="Sum"),
            threshold=1,
            description=description,
        )

    def _depth_alarm(self, name: str, queue: sqs.IQueue, description: str) -> None:
        """The alarm ``name``: ``queue`` held a visible message in the last minute (its
        ``ApproximateNumberOfMessagesVisible``, maximum)."""
        self._alarm(
            name,
            queue.metric_approximate_number_of_messages_visible(period=ONE_MINUTE, statistic="Maximum"),
            threshold=1,
            description=description,
        )

    def _alarm(
        self,
        name: str,
        metric: cloudwatch.IMetric,
        *,
        threshold: float,
        description: str,
        sustained: bool = False,
        comparison: cloudwatch.ComparisonOperator = cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        missing: cloudwatch.TreatMissingData = cloudwatch.TreatMissingData.NOT_BREACHING,
    ) -> None:
        """An alarm on ``metric`` (``GREATER_THAN_OR_EQUAL_TO_THRESHOLD`` unless ``comparison``), notifying the
        alarm topic on alarm and back to OK. ``sustained``: breaching in 2 of the last 3 periods (one slow period
        alone does not alarm), otherwise in the last one."""
        alarm = cloudwatch.Alarm(
            self,
            name,
            alarm_name=f"{alarm_name_prefix(self)}{name}",
            metric=metric,
            threshold=threshold,
            evaluation_periods=3 if sustained else 1,
            datapoints_to_alarm=2 if sustained else None,
            comparison_operator=comparison,
            treat_missing_data=missing,
            alarm_description=f"jobsched: {description}",
        )
        alarm.add_alarm_action(actions.SnsAction(self.alarm_topic))
        alarm.add_ok_action(actions.SnsAction(self.alarm_topic))
        self.alarms[name] = alarm

    def _widgets(
        self,
        watched: Watched,
    ) -> None:
        graph = cloudwatch.GraphWidget
        self.dashboard.add_widgets(
            cloudwatch.AlarmStatusWidget(title="Alarms", alarms=list(self.alarms.values()), width=24)
        )
        self.dashboard.add_widgets(
            graph(
                title="Scheduler lag (ms, max)",
                left=[app_metric(self.namespace, MetricName.SCHEDULER_LAG, "Maximum")],
            ),
            graph(
                title="Dispatch lateness (ms)",
                left=[
                    app_metric(self.namespace, MetricName.DISPATCH_LATENESS, "p99"),
                    app_metric(self.namespace, MetricName.DISPATCH_LATENESS, "Maximum"),
                ],
            ),
            graph(
                title="Run start lateness (ms)",
                left=[
                    app_metric(self.namespace, MetricName.RUN_LATENESS, "p50"),
                    app_metric(self.namespace, MetricName.RUN_LATENESS, "p99"),
                ],
            ),
        )
        self.dashboard.add_widgets(
            graph(
                title="Run start lateness p99 by priority (ms)",
                left=[
                    _labelled(self.namespace, MetricName.RUN_LATENESS, priority).with_(label=priority)
                    for priority in PRIORITIES
                ],
            ),
            graph(
                title="Run start lateness p99 by owner (top owners by backlog, and other; ms)",
                left=[_by_owner(self.namespace, MetricName.RUN_LATENESS)],
            ),
            graph(
                title="Dispatch lateness p99 by owner (ms)",
                left=[_by_owner(self.namespace, MetricName.DISPATCH_LATENESS)],
            ),
        )
        self.dashboard.add_widgets(
            graph(
                title="Runs per minute",
                left=[
                    app_metric(self.namespace, name, "Sum")
                    for name in (
                        MetricName.RUNS_ENQUEUED,
                        MetricName.RUNS_SUCCEEDED,
                        MetricName.RUNS_RETRIED,
                        MetricName.RUNS_DEAD,
                        MetricName.RUNS_SKIPPED,
                        MetricName.RUNS_SWEPT,
                    )
                ],
                width=12,
            ),
            graph(
                title="Queues (messages)",
                left=[
                    watched.run_queue.metric_approximate_number_of_messages_visible(
                        label="run queue visible"
                    ),
                    watched.run_queue.metric_approximate_number_of_messages_not_visible(
                        label="run queue in flight"
                    ),
                    watched.run_dlq.metric_approximate_number_of_messages_visible(label="run DLQ"),
                    watched.dead_run_queue.metric_approximate_number_of_messages_visible(label="dead runs"),
                ],
                right=[
                    watched.run_queue.metric_approximate_age_of_oldest_message(label="run queue oldest (s)")
                ],
                width=12,
            ),
        )
        functions = (
            ("api", watched.api_function),
            ("scheduler", watched.scheduler),
            ("worker", watched.worker),
            ("sweeper", watched.sweeper),
        )
        self.dashboard.add_widgets(
            graph(title="Invocations", left=[fn.metric_invocations(label=n) for n, fn in functions]),
            graph(
                title="Errors and throttles",
                left=[fn.metric_errors(label=f"{n} errors") for n, fn in functions]
                + [fn.metric_throttles(label=f"{n} throttles") for n, fn in functions],
            ),
            graph(
                title="Duration p99 (ms)",
                left=[fn.metric_duration(statistic="p99", label=n) for n, fn in functions],
            ),
        )
        self.dashboard.add_widgets(
            graph(
                title="API requests",
                left=[
                    watched.api.metric_count(),
                    watched.api.metric_client_error(),
                    watched.api.metric_server_error(),
                ],
                width=12,
            ),
            graph(title="API latency p99 (ms)", left=[watched.api.metric_latency(statistic="p99")], width=12),
        )
