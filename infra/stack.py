"""The jobsched stack: composes the constructs, nothing else; and ``build_app`` used by ``app.py`` and tests."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_lambda as lambda_
from cdk_nag import AwsSolutionsChecks
from constructs import Construct

from infra.api import Api
from infra.archive import Archive
from infra.bundling import lambda_code
from infra.config import ConfigError, DeploymentConfig, context_values
from infra.functions import Functions
from infra.messaging import Messaging
from infra.monitoring import Monitoring, Watched
from infra.storage import Storage
from infra.triggers import Triggers

DEFAULT_STACK_NAME = "jobsched"
STACK_NAME_PATTERN = re.compile(r"^[A-Za-z][A-Za-z0-9-]{0,127}$")
"""What CloudFormation accepts as a stack name: a letter, then letters, digits and hyphens, 128 at most."""


class JobschedStack(cdk.Stack):
    """Everything a jobsched deployment needs (design §6).

    ``config`` carries the deployment's knobs (``infra.config``); ``code`` the Lambda asset
    (default: the locally bundled ``functions/`` package). Attributes: ``storage``, ``messaging``,
    ``functions``, ``api``, ``triggers``, ``monitoring``.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: DeploymentConfig,
        code: lambda_.Code | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.storage = Storage(self, "Storage", options=config.infra)
        self.messaging = Messaging(self, "Messaging")
        self.archive = Archive(self, "Archive", options=config.infra)
        self.functions = Functions(
            self,
            "Functions",
            code=code or lambda_code(),
            config=config,
            storage=self.storage,
            messaging=self.messaging,
            archive=self.archive,
        )
        self.api = Api(self, "Api", handler=self.functions.api, config=config)
        self.triggers = Triggers(
            self,
            "Triggers",
            scheduler=self.functions.scheduler,
            sweeper=self.functions.sweeper,
            partitions=config.settings.scheduler_partitions,
        )
        self.monitoring = Monitoring(
            self,
            "Monitoring",
            config=config,
            watched=Watched(
                api=self.api.rest_api,
                api_function=self.functions.api,
                scheduler=self.functions.scheduler,
                worker=self.functions.worker,
                sweeper=self.functions.sweeper,
                run_queue=self.messaging.run_queue,
                run_dlq=self.messaging.run_dlq,
                dead_run_queue=self.messaging.dead_run_queue,
                archive=self.functions.archive,
                archive_spill=self.archive.spill,
                archive_failures=self.archive.failures,
            ),
        )
        self._outputs()

    def _outputs(self) -> None:
        out = {
            "ApiUrl": (self.api.url, "Base URL of the API (JOBSCHED_API for the CLI)"),
            "AlertsTopicArn": (self.messaging.alerts_topic.topic_arn, "Dead-run alerts; filter on owner"),
            "AlarmTopicArn": (self.monitoring.alarm_topic.topic_arn, "Operations alarms"),
            "ArchiveBucket": (
                self.archive.bucket.bucket_name,
                "Run archive bucket (runs/owner=<o>/month=<yyyy-MM>/)",
            ),
            "ArchiveDatabase": (self.archive.database_name, "Glue database of the run archive (table runs)"),
            "ArchiveWorkGroup": (self.archive.workgroup.name, "Athena workgroup of the run archive"),
            "ArchiveSpillQueueUrl": (self.archive.spill.queue_url, "Archive objects the bucket refused"),
        }
        for env_var, table in self.storage.tables.items():
            out[_output_name(env_var)] = (table.table_name, f"DynamoDB table ({env_var})")
        for env_var, queue in self.messaging.queues.items():
            out[_output_name(env_var)] = (queue.queue_url, f"SQS queue URL ({env_var})")
        for name, (value, description) in out.items():
            cdk.CfnOutput(self, name, value=value, description=description)


def _output_name(env_var: str) -> str:
    # JOBS_TABLE -> JobsTable, RUN_QUEUE_URL -> RunQueueUrl
    return "".join(part.capitalize() for part in env_var.split("_"))


def build_app(
    context: Mapping[str, Any] | None = None,
    *,
    code: lambda_.Code | None = None,
    env: cdk.Environment | None = None,
    outdir: str | None = None,
) -> tuple[cdk.App, JobschedStack]:
    """The CDK app with the jobsched stack and cdk-nag's AwsSolutions checks applied.

    ``context`` adds CDK context (tests pass ``{"aws:cdk:bundling-stacks": []}`` to skip bundling);
    the stack name is context ``stack_name`` (default ``jobsched``). Raises ``infra.config.ConfigError``
    for an invalid context value.
    """
    app = cdk.App(context=dict(context or {}), outdir=outdir)
    config = DeploymentConfig.from_context(context_values(app.node))
    name = app.node.try_get_context("stack_name") or DEFAULT_STACK_NAME
    if not isinstance(name, str) or not STACK_NAME_PATTERN.match(name):
        raise ConfigError(
            f"context value 'stack_name': {name!r} is not a CloudFormation stack name (a letter, then letters, "
            "digits and hyphens, 128 at most)"
        )
    stack = JobschedStack(
        app,
        name,
        config=config,
        code=code,
        env=env,
        description="jobsched: serverless distributed job scheduler (on time, effectively once)",
    )
    cdk.Tags.of(stack).add("app", "jobsched")
    # Findings go to the synth output and cdk.out/policy-validation-report.json; an unacknowledged
    # error fails the synth. Acknowledgments (with reasons) are copied into the template's Metadata.
    cdk.Validations.of(app).add_plugins(
        AwsSolutionsChecks(app, verbose=True, write_suppressions_to_cloud_formation=True)
    )
    return app, stack
