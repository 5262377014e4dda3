"""DynamoDB tables, built from the one definition in ``jobsched.resources`` (never a second key schema).

Capacity mode is the deployment setting ``capacity`` (``infra.config.InfraOptions``): ``on_demand`` (pay per
request) or ``provisioned``, where every table and every global secondary index gets read and write capacity
that Application Auto Scaling keeps at ``capacity_target_utilization`` percent between the min and max
settings. Local mode and the tests provision from ``TableDef.create_table_kwargs`` and stay on-demand.
"""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from constructs import Construct

from infra.config import InfraOptions
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


WARM_INDEXES = frozenset({resources.RUNS.id})
"""Tables whose indexes get the table's warm throughput too. The runs table's ``sweep`` and ``failures`` indexes
take a write at each failed try (a run that succeeds at its first try never enters them): a rush whose target is
down writes them at the rush's rate, and an index that throttles throttles the table's writes with it. The jobs
table's indexes are written by job edits only (the ``due`` index also by the migration of items from before
timer items), never by a run, so pre-warming them would be a charge for nothing."""

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


def build_table(
    scope: Construct, definition: TableDef, options: InfraOptions | None = None
) -> dynamodb.Table:
    """One table from its shared definition: keys, GSIs with their projections, TTL, PITR, capacity, and the
    warm throughput ``options`` sets for it (``InfraOptions.warm_throughput``; its indexes too if the table is
    one of ``WARM_INDEXES``).

    ``options`` (default: ``InfraOptions()``, on-demand) chooses the capacity mode: with
    ``capacity="provisioned"`` the table and each of its indexes start at the minimum read and write
    capacity and get target-tracking auto scaling on both (``_auto_scale``). Retained tables (jobs, runs)
    get ``RemovalPolicy.RETAIN`` and deletion protection; the others are destroyed with the stack.
    """
    options = options or InfraOptions()
    provisioned = options.provisioned
    # Initial capacity of a provisioned table or index: the floor; auto scaling raises it with the load.
    read_capacity = options.capacity_min_read if provisioned else None
    write_capacity = options.capacity_min_write if provisioned else None
    retained = definition.id in RETAINED
    warm_write, warm_read = options.warm_throughput(definition.id)
    warm = (
        dynamodb.WarmThroughput(write_units_per_second=warm_write, read_units_per_second=warm_read)
        if warm_write or warm_read
        else None
    )
    index_warm = warm if definition.id in WARM_INDEXES else None
    table = dynamodb.Table(
        scope,
        definition.id,
        partition_key=_attribute(definition.partition),
        sort_key=_attribute(definition.sort) if definition.sort else None,
        billing_mode=dynamodb.BillingMode.PROVISIONED
        if provisioned
        else dynamodb.BillingMode.PAY_PER_REQUEST,
        read_capacity=read_capacity,
        write_capacity=write_capacity,
        # Encrypted at rest with the AWS owned key (DynamoDB's default, no KMS cost).
        time_to_live_attribute=definition.ttl_attribute,
        point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
            point_in_time_recovery_enabled=True
        )
        if definition.point_in_time_recovery
        else None,
        deletion_protection=retained,
        removal_policy=RemovalPolicy.RETAIN if retained else RemovalPolicy.DESTROY,
        stream=dynamodb.StreamViewType.OLD_IMAGE if definition.stream_view == "OLD_IMAGE" else None,
        warm_throughput=warm,
    )
    for index in definition.indexes:
        table.add_global_secondary_index(
            index_name=index.name,
            partition_key=_attribute(index.partition),
            sort_key=_attribute(index.sort) if index.sort else None,
            projection_type=_PROJECTIONS[index.projection],
            non_key_attributes=list(index.non_key) if index.projection == "INCLUDE" else None,
            read_capacity=read_capacity,
            write_capacity=write_capacity,
            warm_throughput=index_warm,
        )
    if provisioned:
        _auto_scale(table, definition, options)
    if not definition.point_in_time_recovery:
        acknowledge(table, "AwsSolutions-DDB3", _NO_PITR_REASONS[definition.id])
    return table


def _auto_scale(table: dynamodb.Table, definition: TableDef, options: InfraOptions) -> None:
    """Target-tracking auto scaling of read and write capacity on ``table`` and each of its indexes.

    One scalable target per dimension (``dynamodb:table:ReadCapacityUnits``, ``...:WriteCapacityUnits``
    and the ``dynamodb:index:...`` ones), between ``capacity_min_*`` and ``capacity_max_*`` units, with a
    target-tracking policy holding consumed / provisioned at ``capacity_target_utilization`` percent.
    Auto scaling reacts in minutes (it raises capacity after about two minutes above the target, and
    DynamoDB limits how often capacity may decrease, 27 times a day): a known rush is pre-scaled with
    scheduled actions on these targets (docs/deploy.md).
    """
    read = {"min_capacity": options.capacity_min_read, "max_capacity": options.capacity_max_read}
    write = {"min_capacity": options.capacity_min_write, "max_capacity": options.capacity_max_write}
    target = options.capacity_target_utilization
    table.auto_scale_read_capacity(**read).scale_on_utilization(target_utilization_percent=target)
    table.auto_scale_write_capacity(**write).scale_on_utilization(target_utilization_percent=target)
    for index in definition.indexes:
        table.auto_scale_global_secondary_index_read_capacity(index.name, **read).scale_on_utilization(
            target_utilization_percent=target
        )
        table.auto_scale_global_secondary_index_write_capacity(index.name, **write).scale_on_utilization(
            target_utilization_percent=target
        )


class Storage(Construct):
    """Every table of ``resources.TABLES``; ``tables`` maps a definition's ``env_var`` to its table.

    ``options`` carries the capacity settings (default: on-demand).

    Attributes ``jobs``, ``runs``, ``control`` and ``idempotency`` name them for the other constructs.
    """

    def __init__(self, scope: Construct, construct_id: str, *, options: InfraOptions | None = None) -> None:
        super().__init__(scope, construct_id)
        self.tables: dict[str, dynamodb.Table] = {
            definition.env_var: build_table(self, definition, options) for definition in resources.TABLES
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
