"""DynamoDB tables, built from the one definition in ``jobsched.resources`` (never a second key schema)."""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from constructs import Construct

from infra.nag import acknowledge
from jobsched import resources
from jobsched.resources import Key, TableDef

_ATTRIBUTE_TYPES = {"S": dynamodb.AttributeType.STRING, "N": dynamodb.AttributeType.NUMBER}
_PROJECTIONS = {
    "ALL": dynamodb.ProjectionType.ALL,
    "KEYS_ONLY": dynamodb.ProjectionType.KEYS_ONLY,
    "INCLUDE": dynamodb.ProjectionType.INCLUDE,
}

# Tables whose loss would lose a team's jobs or its run history: kept when the stack is deleted and
# protected against deletion. The control (leases, watermarks) and idempotency tables are rebuilt
# from nothing: a new leader takes a lease, the watermark restarts at "now", and idempotency records
# are short-lived by design.
RETAINED = frozenset({resources.JOBS.id, resources.RUNS.id})


# Why a table has no point-in-time recovery (jobsched.resources decides which tables have it).
_NO_PITR_REASONS = {
    resources.RUNS.id: "Run history is append-mostly, expires by TTL (retention_days) and is retained with "
    "deletion protection; PITR would bill for a backup of history that grows with every run. The job "
    "definitions that produce new runs are in the jobs table, which has PITR.",
    resources.CONTROL.id: "Leases and watermarks are rebuilt from nothing: a new leader takes the lease and "
    "the watermark restarts at the present; nothing here needs restoring.",
    resources.IDEMPOTENCY.id: "Idempotency-Key records are short-lived replay protection that expire by TTL; "
    "restoring them would serve no one.",
}


def _attribute(key: Key) -> dynamodb.Attribute:
    return dynamodb.Attribute(name=key.name, type=_ATTRIBUTE_TYPES[key.type])


def build_table(scope: Construct, definition: TableDef) -> dynamodb.Table:
    """One on-demand table from its shared definition: keys, GSIs with their projections, TTL, PITR.

    Retained tables (jobs, runs) get ``RemovalPolicy.RETAIN`` and deletion protection; the others
    are destroyed with the stack.
    """
    retained = definition.id in RETAINED
    table = dynamodb.Table(
        scope,
        definition.id,
        partition_key=_attribute(definition.partition),
        sort_key=_attribute(definition.sort) if definition.sort else None,
        billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
        # Encrypted at rest with the AWS owned key (DynamoDB's default, no KMS cost).
        time_to_live_attribute=definition.ttl_attribute,
        point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
            point_in_time_recovery_enabled=True
        )
        if definition.point_in_time_recovery
        else None,
        deletion_protection=retained,
        removal_policy=RemovalPolicy.RETAIN if retained else RemovalPolicy.DESTROY,
    )
    for index in definition.indexes:
        table.add_global_secondary_index(
            index_name=index.name,
            partition_key=_attribute(index.partition),
            sort_key=_attribute(index.sort) if index.sort else None,
            projection_type=_PROJECTIONS[index.projection],
            non_key_attributes=list(index.non_key) if index.projection == "INCLUDE" else None,
        )
    if not definition.point_in_time_recovery:
        acknowledge(table, "AwsSolutions-DDB3", _NO_PITR_REASONS[definition.id])
    return table


class Storage(Construct):
    """Every table of ``resources.TABLES``; ``tables`` maps a definition's ``env_var`` to its table.

    Attributes ``jobs``, ``runs``, ``control`` and ``idempotency`` name them for the other constructs.
    """

    def __init__(self, scope: Construct, construct_id: str) -> None:
        super().__init__(scope, construct_id)
        self.tables: dict[str, dynamodb.Table] = {
            definition.env_var: build_table(self, definition) for definition in resources.TABLES
        }
        self.jobs = self.tables[resources.JOBS.env_var]
        self.runs = self.tables[resources.RUNS.env_var]
        self.control = self.tables[resources.CONTROL.env_var]
        self.idempotency = self.tables[resources.IDEMPOTENCY.env_var]

    def index_arn(self, table: dynamodb.Table, index_name: str) -> str:
        """The ARN of one named GSI of ``table`` (grants name the index, never ``index/*``)."""
        return f"{table.table_arn}/index/{index_name}"

    def environment(self) -> dict[str, str]:
        """``{"JOBS_TABLE": <name>, ...}`` for the functions' environment."""
        return {env_var: table.table_name for env_var, table in self.tables.items()}
