"""The run archive's figures (design §11): bytes per archived run, what a year of a million runs costs in the archive
and in DynamoDB Standard, and the bytes a query engine scans for the common questions.

The data: ``OWNERS`` owners, each with ``JOBS_PER_OWNER`` jobs firing every ``EVERY_MIN`` minutes for ``DAYS`` days,
built as the worker leaves them (succeeded after one try; every ``DEAD_EVERY``-th dead after three), each row's
TTL deletion made a stream record exactly as DynamoDB sends it and archived through the archive function's own
code (``dynamodb.stream.expired_runs``, ``domain.archive.archive_batch``) into a directory, in stream batches:
the records of one shard (``SHARDS``, by job), in expiry order, ``ARCHIVE_BATCH_SIZE`` at a time or fewer when
the batch's event would pass Lambda's ``INVOCATION_PAYLOAD_BYTES`` (the mapping stops a batch there).

Scans are what Athena reads of gzip JSON Lines: every byte of every object of the partitions the query names
(a text format is read whole; the partitions are ``owner`` and ``month``), so "one job's runs in one month" reads
its owner's month (January 2026 here) and "all dead runs of one owner last quarter" that owner's three months.
"""

from __future__ import annotations

import gzip
import json
import tempfile
import time
import uuid
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.capacity import item_size
from bench.cost import PRICES
from jobsched.domain.archive import RUNS_PREFIX, archive_batch, month_of, owner_partition
from jobsched.dynamodb.layout import run_item
from jobsched.dynamodb.stream import TTL_PRINCIPAL, expired_runs
from jobsched.local.archive import LocalArchive
from jobsched.models import RunStatus
from jobsched.ports.runs import RunRow
from jobsched.ports.tries import TryRecord

OWNERS = 3
JOBS_PER_OWNER = 10
EVERY_MIN = 30
DAYS = 90
DEAD_EVERY = 50
SHARDS = 4
T0 = 1_767_225_600_000
"""2026-01-01T00:00:00Z, epoch ms."""
DAY_MS = 86_400_000
GIB = 1024**3
MIN_TRANSITION_BYTES = 128 * 1024
"""S3 Lifecycle does not move objects under 128 KB to another class (its default since September 2024)."""
PUT_LATENCY_MS = 30.0
"""One PutObject from Lambda, in-region (assumed; S3's first-byte latency is tens of milliseconds)."""
LAMBDA_MB_PER_VCPU = 1769
"""Lambda gives one vCPU at 1,769 MB and CPU in proportion to memory below it."""
INVOCATION_PAYLOAD_BYTES = 6 * 1024 * 1024
"""An event source mapping passes a batch's records in one call "up to the payload limit for synchronous
invocation (6 MB)" (Lambda API reference, CreateEventSourceMapping, ``BatchSize``): with records of about 1.3 KB,
a batch holds about 4,700 of them whatever ``BatchSize`` allows (10,000 at most)."""
STREAM_ARN = "arn:aws:dynamodb:us-east-1:123456789012:table/jobsched-runs/stream/2026-01-01T00:00:00.000"
"""A stream ARN of a realistic length, for the records' size."""


@dataclass(frozen=True)
class ArchivePrices:
    """List prices, us-east-1, USD (as of ``as_of``), free tiers not counted. Sources: "Amazon S3 pricing"
    (Storage: S3 Standard first 50 TB $0.023 per GB-month, S3 Standard-Infrequent Access $0.0125 per GB-month;
    Requests: PUT $0.005 per 1,000 in Standard, Lifecycle Transition into Standard-IA $0.01 per 1,000), "Amazon
    DynamoDB pricing" (Data storage, Standard table class: $0.25 per GB-month, each item counted with 100 bytes of
    overhead; DynamoDB Streams reads by a Lambda trigger are free), "AWS Lambda pricing" (requests and x86
    duration; events dropped by an event filter are not billed); the Lambda prices are ``bench.cost.PRICES``."""

    as_of: str = "2026-12-01"
    s3_standard_gb_month: float = 0.023
    s3_standard_ia_gb_month: float = 0.0125
    s3_put_per_thousand: float = 0.005
    s3_transition_ia_per_thousand: float = 0.01
    dynamodb_standard_gb_month: float = 0.25
    dynamodb_item_overhead_bytes: int = 100


ARCHIVE_PRICES = ArchivePrices()


def synthetic_runs(days: int = DAYS) -> list[RunRow]:
    """The bench's runs (see the module docstring), in expiry order (``scheduled_for``)."""
    jobs = [
        (f"team-{o}", str(uuid.UUID(int=o * 1000 + j))) for o in range(OWNERS) for j in range(JOBS_PER_OWNER)
    ]
    rows = []
    step = EVERY_MIN * 60_000
    for slot in range(days * DAY_MS // step):
        at = T0 + slot * step
        worker = str(uuid.UUID(int=slot + 10**9))  # one worker invocation takes a batch of runs
        for n, (owner, job_id) in enumerate(jobs):
            started = at + 40 + (slot * 7 + n * 13) % 900
            finished = started + 150 + (slot * 31 + n * 17) % 20_000
            dead = (slot + n) % DEAD_EVERY == 0
            tries = tuple(
                TryRecord(
                    k,
                    started + (k - 1) * 60_000,
                    finished + (k - 1) * 60_000,
                    worker,
                    "HTTP 503" if dead else None,
                    '{"status":200}' if not dead else "Service Unavailable",
                )
                for k in range(1, 4 if dead else 2)
            )
            rows.append(
                RunRow(
                    job_id=job_id,
                    scheduled_for=at,
                    status=RunStatus.DEAD if dead else RunStatus.SUCCEEDED,
                    attempt=len(tries),
                    enqueued_at=at - 200,
                    dispatch_at=at,
                    started_at=tries[-1].started_at,
                    heartbeat_at=tries[-1].started_at,
                    finished_at=tries[-1].finished_at,
                    lateness_ms=started - at,
                    worker=worker,
                    error="HTTP 503" if dead else None,
                    owner=owner,
                    term=4,
                    expires_at_s=at // 1000 + 90 * 86_400,
                    tries=tries,
                )
            )
    return rows


def stream_record(item: dict[str, Any]) -> dict[str, Any]:
    """The TTL deletion record DynamoDB streams for ``item`` (OLD_IMAGE), with the fields of a Lambda event's
    record ("DynamoDB Streams and Lambda triggers": ``eventID``, ``eventVersion``, ``eventSource``,
    ``awsRegion``, ``dynamodb`` with ``Keys``, ``SequenceNumber``, ``SizeBytes``, ``StreamViewType``,
    ``eventSourceARN``), so its size is a real record's."""
    from boto3.dynamodb.types import TypeSerializer

    serializer = TypeSerializer()
    image = {k: serializer.serialize(v) for k, v in item.items()}
    sequence = zlib.crc32(f"{item['job_id']}{item['scheduled_for']}".encode())
    return {
        "eventID": f"{sequence:032x}",
        "eventName": "REMOVE",
        "eventVersion": "1.1",
        "eventSource": "aws:dynamodb",
        "awsRegion": "us-east-1",
        "userIdentity": {"type": "Service", "principalId": TTL_PRINCIPAL},
        "dynamodb": {
            "ApproximateCreationDateTime": item.get("expires_at", 0),
            "Keys": {"job_id": image["job_id"], "scheduled_for": image["scheduled_for"]},
            "OldImage": image,
            "SequenceNumber": f"{sequence:021d}",
            "SizeBytes": item_size(image),
            "StreamViewType": "OLD_IMAGE",
        },
        "eventSourceARN": STREAM_ARN,
    }


def stream_batches(
    records: list[dict[str, Any]], batch_size: int, payload_bytes: int = INVOCATION_PAYLOAD_BYTES
) -> list[list[dict[str, Any]]]:
    """``records`` (one shard's, in order) cut into invocations: at most ``batch_size`` records each, and no more
    than fit in ``payload_bytes`` of event JSON (``{"Records": [...]}``, compact)."""
    batches: list[list[dict[str, Any]]] = []
    batch: list[dict[str, Any]] = []
    size = len('{"Records":[]}')
    for record in records:
        length = len(json.dumps(record, separators=(",", ":"))) + 1
        if batch and (len(batch) == batch_size or size + length > payload_bytes):
            batches.append(batch)
            batch, size = [], len('{"Records":[]}')
        batch.append(record)
        size += length
    if batch:
        batches.append(batch)
    return batches


class _NoSpill:
    def spill(self, items: Any) -> None:
        raise AssertionError("the bench's directory never refuses a write")


def _bytes_under(root: Path, owner: str, months: list[str]) -> int:
    """Bytes of the objects of ``owner`` in ``months`` (``YYYY-MM``): what Athena reads for a query naming them."""
    total = 0
    for month in months:
        folder = root / RUNS_PREFIX / f"owner={owner_partition(owner)}" / f"month={month}"
        total += sum(path.stat().st_size for path in folder.glob("*.json.gz"))
    return total


def measure_archive(
    days: int = DAYS, batch_size: int | None = None, memory_mb: int | None = None
) -> dict[str, Any]:
    """Archive the bench's runs of ``days`` days into a temporary directory and report the figures (see the
    module docstring): ``bytes_per_run``, ``rows_per_object``, ``usd_per_million_runs_per_year`` (with its
    items), ``dynamodb_usd_per_million_runs_per_year``, ``ratio_to_dynamodb``, ``scan_bytes_one_job_month``,
    ``scan_bytes_dead_runs_owner_quarter``, the DynamoDB item size and the archive function's CPU per batch.
    ``batch_size`` (stream records per invocation) and ``memory_mb`` (the function's) default to the stack's."""
    if batch_size is None or memory_mb is None:  # the stack's own (importing the CDK app takes seconds)
        from infra.functions import ARCHIVE_BATCH_SIZE, ARCHIVE_MEMORY_MB

        batch_size, memory_mb = batch_size or ARCHIVE_BATCH_SIZE, memory_mb or ARCHIVE_MEMORY_MB
    size = batch_size
    rows = synthetic_runs(days)
    items = [run_item(row) for row in rows]
    with tempfile.TemporaryDirectory(prefix="jobsched-archive-bench-") as tmp:
        root = Path(tmp)
        archive = LocalArchive(root)
        shards: list[list[dict[str, Any]]] = [[] for _ in range(SHARDS)]
        for item in items:
            shards[zlib.crc32(item["job_id"].encode()) % SHARDS].append(stream_record(item))
        batches = [batch for shard in shards for batch in stream_batches(shard, size)]
        cpu = 0.0
        for batch in batches:
            started = time.process_time()
            expired = expired_runs(batch).rows
            archive_batch(expired, archive, _NoSpill())
            cpu += time.process_time() - started
        objects = list((root / RUNS_PREFIX).glob("*/*/*.json.gz"))
        sizes = [path.stat().st_size for path in objects]
        stored = sum(sizes)
        month = _bytes_under(root, "team-0", [month_of(T0)])
        quarter = _bytes_under(
            root, "team-0", sorted({month_of(T0 + d * DAY_MS) for d in range(min(90, days))})
        )
        parquet = _parquet_bytes_per_run(root, objects[:20])
    runs = len(rows)
    bytes_per_run = stored / runs
    objects_per_run = len(objects) / runs
    eligible = sum(s for s in sizes if s >= MIN_TRANSITION_BYTES) / stored
    eligible_objects = sum(1 for s in sizes if s >= MIN_TRANSITION_BYTES) / runs
    p = ARCHIVE_PRICES
    gib = bytes_per_run * 1_000_000 / GIB
    cpu_ms = cpu * 1000 / len(batches) * LAMBDA_MB_PER_VCPU / memory_mb
    duration_ms = cpu_ms + PUT_LATENCY_MS * len(objects) / len(batches)
    invocations = 1_000_000 * len(batches) / runs
    cost = {
        "storage_standard": gib * p.s3_standard_gb_month * (1 + 11 * (1 - eligible)),
        "storage_standard_ia": gib * p.s3_standard_ia_gb_month * 11 * eligible,
        "put_requests": 1_000_000 * objects_per_run * p.s3_put_per_thousand / 1000,
        "transition_requests": 1_000_000 * eligible_objects * p.s3_transition_ia_per_thousand / 1000,
        "lambda_requests": invocations * PRICES.lambda_per_million_requests / 1_000_000,
        "lambda_duration": invocations * duration_ms / 1000 * memory_mb / 1024 * PRICES.lambda_per_gb_second,
    }
    cost["total"] = sum(cost.values())
    item_bytes = sum(item_size(stream_record(item)["dynamodb"]["OldImage"]) for item in items) / runs
    dynamodb = (
        (item_bytes + p.dynamodb_item_overhead_bytes) * 1_000_000 / GIB * p.dynamodb_standard_gb_month * 12
    )
    return {
        "runs": runs,
        "days": days,
        "owners": OWNERS,
        "objects": len(objects),
        "rows_per_object": runs / len(objects),
        "stream_batches": len(batches),
        "records_per_batch": runs / len(batches),
        "bytes_per_run": bytes_per_run,
        "parquet_bytes_per_run": parquet,
        "objects_eligible_for_ia": eligible_objects * runs / len(objects),
        "usd_per_million_runs_per_year": cost["total"],
        "usd_items": cost,
        "dynamodb_item_bytes": item_bytes,
        "dynamodb_usd_per_million_runs_per_year": dynamodb,
        "ratio_to_dynamodb": cost["total"] / dynamodb,
        "scan_bytes_one_job_month": month,
        "scan_bytes_dead_runs_owner_quarter": quarter,
        "lambda_ms_per_batch": duration_ms,
        "prices": ARCHIVE_PRICES.__dict__,
    }


def _parquet_bytes_per_run(root: Path, objects: list[Path]) -> float | None:
    """Bytes per run of the same objects written as Parquet (zstd) one file each, by DuckDB; None without it."""
    try:
        import duckdb
    except ImportError:
        return None
    total = rows = 0
    with duckdb.connect() as connection:
        for index, path in enumerate(objects):
            out = root / f"sample-{index}.parquet"
            with gzip.open(path) as lines:
                count = sum(1 for _ in lines)
            source = str(path).replace("'", "''")
            connection.execute(
                f"COPY (SELECT * FROM read_json('{source}', format = 'newline_delimited')) TO '{out}' "
                "(FORMAT parquet, COMPRESSION zstd)"
            )
            total += out.stat().st_size
            rows += count
    return total / rows if rows else None


def main() -> None:
    """Print the figures as JSON (``python -m bench.archive``)."""
    print(json.dumps(measure_archive(), indent=1))


if __name__ == "__main__":
    main()
