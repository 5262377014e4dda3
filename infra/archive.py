"""The run archive's storage and SQL (design §11): the archive bucket, the spill and failure queues, the Glue
table with partition projection and the Athena workgroup. The archive function and its stream mapping are in
``infra.functions`` (``Functions.archive``).

- **Bucket**: S3-managed encryption (SSE-S3), TLS only, public access blocked, versioned, kept when the stack is
  deleted. Lifecycle: objects move to Standard-IA after ``archive_infrequent_access_days`` (S3 leaves objects
  under 128 KB in Standard) and expire after ``archive_retention_days`` (0: never); an overwritten version is
  kept 30 days.
- **Queues**: ``spill`` holds, for 14 days, whole objects the bucket refused (``jobsched.aws.archive``), so the
  stream's 24 hours are never the only copy; ``failures`` is the stream mapping's on-failure destination (the
  shard and sequence numbers of a batch that failed every retry). An alarm watches each (``infra.monitoring``).
- **Glue table** ``<stack>_archive.audit``: the audit events TTL deleted from the jobs table, columns from
  ``AUDIT_COLUMNS``, under ``audit/``; its one partition ``month`` projected as the runs table's is.
- **Glue table** ``<stack>_archive.runs``: gzip JSON Lines read by the OpenX JSON SerDe, columns from
  ``jobsched.domain.archive.ARCHIVE_COLUMNS``; partitions by projection (no crawler): ``owner`` injected (every
  query names the owner) and ``month`` a date (``yyyy-MM``) from 1970-01 (a backfill's earliest fire) to now.
- **Athena workgroup** ``<stack>-archive``: its own result bucket (SSE-S3, results expire after 7 days), the
  workgroup's settings enforced, at most ``archive_scan_limit_mb`` scanned per query.
"""

from __future__ import annotations

import re

from aws_cdk import Aws, Duration, RemovalPolicy, Stack
from aws_cdk import aws_athena as athena
from aws_cdk import aws_glue as glue
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.config import InfraOptions
from infra.nag import acknowledge
from jobsched.domain.archive import (
    ARCHIVE_COLUMNS,
    AUDIT_COLUMNS,
    AUDIT_PARTITION_COLUMNS,
    AUDIT_PREFIX,
    PARTITION_COLUMNS,
    RUNS_PREFIX,
    month_of,
)

NONCURRENT_DAYS = 30
"""Days an overwritten object version is kept (a retried batch rewrites its objects in place)."""
RESULT_DAYS = 7
"""Days an Athena query result is kept."""
QUEUE_RETENTION = Duration.days(14)
PROJECTION_START = month_of(0)
"""The first ``month`` partition the table projects: 1970-01, the earliest ``scheduled_for`` a run can have (a backfill
takes fires from 1970 on, and TTL archives those runs too)."""
TABLE_NAME = "runs"
AUDIT_TABLE_NAME = "audit"
JSON_SERDE = "org.openx.data.jsonserde.JsonSerDe"


def glue_database_name(stack_name: str) -> str:
    """``<stack>_archive``, lower case, hyphens as underscores (what Glue and Athena accept unquoted)."""
    return re.sub(r"[^a-z0-9_]", "_", f"{stack_name}_archive".lower())


class Archive(Construct):
    """Attributes: ``bucket``, ``results``, ``spill``, ``failures``, ``database_name``, ``table``,
    ``audit_table``, ``workgroup`` (its ``name``)."""

    def __init__(self, scope: Construct, construct_id: str, *, options: InfraOptions) -> None:
        super().__init__(scope, construct_id)
        retention = options.archive_retention_days
        self.bucket = self._bucket(
            "Bucket",
            versioned=True,
            rule=s3.LifecycleRule(
                id="archive",
                transitions=[
                    s3.Transition(
                        storage_class=s3.StorageClass.INFREQUENT_ACCESS,
                        transition_after=Duration.days(options.archive_infrequent_access_days),
                    )
                ],
                expiration=Duration.days(retention) if retention else None,
                noncurrent_version_expiration=Duration.days(NONCURRENT_DAYS),
                abort_incomplete_multipart_upload_after=Duration.days(1),
            ),
        )
        self.results = self._bucket(
            "Results",
            versioned=False,
            rule=s3.LifecycleRule(id="results", expiration=Duration.days(RESULT_DAYS)),
        )
        self.spill = self._queue("Spill", "holds whole archive objects the bucket refused, for a redrive")
        self.failures = self._queue(
            "Failures", "the stream mapping's on-failure destination: batches that failed every retry"
        )
        stack_name = Stack.of(self).stack_name
        self.database_name = glue_database_name(stack_name)
        database = glue.CfnDatabase(
            self,
            "Database",
            catalog_id=Aws.ACCOUNT_ID,
            database_input=glue.CfnDatabase.DatabaseInputProperty(
                name=self.database_name, description="jobsched run archive"
            ),
        )
        self.table = self._table(
            "Table",
            TABLE_NAME,
            "Runs deleted from the runs table by TTL (one row per copy: dedupe by job_id, scheduled_for)",
            RUNS_PREFIX,
            ARCHIVE_COLUMNS,
            PARTITION_COLUMNS,
        )
        self.audit_table = self._table(
            "AuditTable",
            AUDIT_TABLE_NAME,
            "Audit events deleted from the jobs table by TTL (one row per copy: dedupe by job_id, at, key)",
            AUDIT_PREFIX,
            AUDIT_COLUMNS,
            AUDIT_PARTITION_COLUMNS,
        )
        for table in (self.table, self.audit_table):
            table.add_resource_dependency(database)
        self.workgroup = athena.CfnWorkGroup(
            self,
            "WorkGroup",
            name=f"{stack_name}-archive",
            description="jobsched run archive queries",
            recursive_delete_option=True,
            work_group_configuration=athena.CfnWorkGroup.WorkGroupConfigurationProperty(
                enforce_work_group_configuration=True,
                publish_cloud_watch_metrics_enabled=True,
                bytes_scanned_cutoff_per_query=options.archive_scan_limit_mb * 1024 * 1024,
                engine_version=athena.CfnWorkGroup.EngineVersionProperty(
                    selected_engine_version="Athena engine version 3"
                ),
                result_configuration=athena.CfnWorkGroup.ResultConfigurationProperty(
                    output_location=f"s3://{self.results.bucket_name}/",
                    encryption_configuration=athena.CfnWorkGroup.EncryptionConfigurationProperty(
                        encryption_option="SSE_S3"
                    ),
                ),
            ),
        )

    def _bucket(self, name: str, *, versioned: bool, rule: s3.LifecycleRule) -> s3.Bucket:
        bucket = s3.Bucket(
            self,
            name,
            encryption=s3.BucketEncryption.S3_MANAGED,
            enforce_ssl=True,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            versioned=versioned,
            lifecycle_rules=[rule],
            removal_policy=RemovalPolicy.RETAIN if versioned else RemovalPolicy.DESTROY,
        )
        acknowledge(
            bucket,
            "AwsSolutions-S1",
            "Writes come only from the archive function (its role may PutObject under runs/) and reads from Athena "
            "in this account, both recorded by CloudTrail; server access logs would add a log bucket and an "
            "object per request to a store whose point is to cost almost nothing.",
        )
        return bucket

    def _queue(self, name: str, purpose: str) -> sqs.Queue:
        queue = sqs.Queue(
            self,
            name,
            retention_period=QUEUE_RETENTION,
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
        )
        acknowledge(
            queue,
            "AwsSolutions-SQS3",
            f"This queue {purpose}: it is itself the end of the line, watched by an alarm on its depth; nothing "
            "consumes it automatically, so there is nothing to redrive into another queue.",
        )
        return queue

    def _table(
        self,
        construct_id: str,
        name: str,
        description: str,
        prefix: str,
        columns: tuple[tuple[str, str], ...],
        partitions: tuple[tuple[str, str], ...],
    ) -> glue.CfnTable:
        """The Glue table ``name`` over the objects under ``prefix``: gzip JSON Lines of ``columns``, partitioned by
        ``partitions`` (``owner`` injected, ``month`` a date), projected from the layout."""
        location = f"s3://{self.bucket.bucket_name}/{prefix}"
        projection = {
            "projection.month.type": "date",
            "projection.month.format": "yyyy-MM",
            "projection.month.range": f"{PROJECTION_START},NOW",
            "projection.month.interval": "1",
            "projection.month.interval.unit": "MONTHS",
        }
        if ("owner", "string") in partitions:
            projection["projection.owner.type"] = "injected"
        template = "".join(f"{column}=${{{column}}}/" for column, _ in partitions)
        return glue.CfnTable(
            self,
            construct_id,
            catalog_id=Aws.ACCOUNT_ID,
            database_name=self.database_name,
            table_input=glue.CfnTable.TableInputProperty(
                name=name,
                description=description,
                table_type="EXTERNAL_TABLE",
                parameters={
                    "classification": "json",
                    "compressionType": "gzip",
                    "projection.enabled": "true",
                    **projection,
                    "storage.location.template": location + template,
                },
                partition_keys=[
                    glue.CfnTable.ColumnProperty(name=column, type=kind) for column, kind in partitions
                ],
                storage_descriptor=glue.CfnTable.StorageDescriptorProperty(
                    location=location,
                    columns=[
                        glue.CfnTable.ColumnProperty(name=column, type=kind) for column, kind in columns
                    ],
                    input_format="org.apache.hadoop.mapred.TextInputFormat",
                    output_format="org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat",
                    serde_info=glue.CfnTable.SerdeInfoProperty(
                        serialization_library=JSON_SERDE, parameters={"ignore.malformed.json": "false"}
                    ),
                ),
            ),
        )

    def object_arn(self, prefix: str) -> str:
        """The ARN of the archive bucket's objects under ``prefix`` (``runs/`` -> ``arn:...:bucket/runs/*``)."""
        return self.bucket.arn_for_objects(f"{prefix}*")
