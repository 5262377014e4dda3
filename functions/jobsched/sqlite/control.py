"""The CONTROL store on SQLite: leases (``domain.lease.LeaseStore``), watermarks (``ports.control.WatermarkStore``),
lateness summaries (``ports.lateness.LatenessStore``) and the partitions' high-water mark
(``ports.control.PartitionMarks``), with the conditions of ``store.control.ControlStore``
(``tests/contract/test_control_store_contract.py``). Each write is one conditional statement in its own
transaction."""

from __future__ import annotations

from jobsched.domain.lease import LeaseRecord
from jobsched.sqlite.database import SqliteDatabase

_HIGH_WATER = "partition_high_water"
_SHARD_HIGH_WATER = "due_shard_high_water"


class SqliteControlStore:
    """Leases, watermarks and the high-water mark in ``database``. Raises ``StoreUnavailable`` when the
    database is busy or failing."""

    def __init__(self, database: SqliteDatabase) -> None:
        self.db = database

    # --- leases ---------------------------------------------------------------------------------

    def read_lease(self, partition: int) -> LeaseRecord | None:
        """The lease record of ``partition``, or None."""
        with self.db.read() as conn:
            row = conn.execute(
                "SELECT partition, holder, term, expires_at FROM leases WHERE partition = ?", (partition,)
            ).fetchone()
        return LeaseRecord(*row) if row else None

    def take_lease(self, record: LeaseRecord, *, previous: LeaseRecord | None, now_ms: int) -> bool:
        """Write ``record`` if the stored lease is still ``previous`` (same term) and expired by ``now_ms``
        (epoch ms); with ``previous=None``, only if none exists."""
        values = (record.partition, record.holder, record.term, record.expires_at)
        with self.db.write() as conn:
            if previous is None:
                sql = "INSERT OR IGNORE INTO leases (partition, holder, term, expires_at) VALUES (?, ?, ?, ?)"
                return conn.execute(sql, values).rowcount == 1
            return (
                conn.execute(
                    "UPDATE leases SET holder = ?, term = ?, expires_at = ? WHERE partition = ? AND term = ?"
                    " AND expires_at < ?",
                    (record.holder, record.term, record.expires_at, record.partition, previous.term, now_ms),
                ).rowcount
                == 1
            )

    def renew_lease(self, record: LeaseRecord) -> bool:
        """Move ``expires_at`` of the held lease to ``record.expires_at``, if holder and term are unchanged. A
        release is the same write at the release instant (``release_lease``)."""
        with self.db.write() as conn:
            return (
                conn.execute(
                    "UPDATE leases SET expires_at = ? WHERE partition = ? AND holder = ? AND term = ?",
                    (record.expires_at, record.partition, record.holder, record.term),
                ).rowcount
                == 1
            )

    release_lease = renew_lease

    # --- watermarks -----------------------------------------------------------------------------

    def read_watermark(self, partition: int) -> int | None:
        """The stored watermark bucket of ``partition``, or None."""
        with self.db.read() as conn:
            row = conn.execute("SELECT bucket FROM watermarks WHERE partition = ?", (partition,)).fetchone()
        return int(row[0]) if row else None

    def advance_watermark(self, partition: int, bucket: int, *, term: int, now_ms: int) -> bool:
        """Store ``bucket`` if ahead of the stored one and no newer ``term`` wrote it (or none is stored)."""
        with self.db.write() as conn:
            return (
                conn.execute(
                    "INSERT INTO watermarks (partition, bucket, term, updated_at) VALUES (?, ?, ?, ?)"
                    " ON CONFLICT (partition) DO UPDATE SET bucket = excluded.bucket, term = excluded.term,"
                    " updated_at = excluded.updated_at"
                    " WHERE watermarks.bucket < excluded.bucket AND watermarks.term <= excluded.term",
                    (partition, bucket, term, now_ms),
                ).rowcount
                == 1
            )

    def read_positions(self, partition: int) -> str | None:
        """The stored read positions of ``partition``, or None."""
        return self._read_termed("positions", "positions", partition)

    def save_positions(self, partition: int, positions: str, *, term: int) -> bool:
        """Store ``positions`` unless a newer ``term`` stored them."""
        return self._save_termed("positions", "positions", partition, positions, term)

    def read_lateness(self, partition: int) -> str | None:
        """The stored lateness summary of ``partition`` (``ports.lateness.LatenessStore``), or None."""
        return self._read_termed("lateness", "summary", partition)

    def save_lateness(self, partition: int, summary: str, *, term: int) -> bool:
        """Store ``summary`` unless a newer ``term`` stored one."""
        return self._save_termed("lateness", "summary", partition, summary, term)

    def _read_termed(self, table: str, column: str, partition: int) -> str | None:
        """``table.column`` (one of this module's) of ``partition``, or None."""
        with self.db.read() as conn:
            row = conn.execute(f"SELECT {column} FROM {table} WHERE partition = ?", (partition,)).fetchone()
        return str(row[0]) if row else None

    def _save_termed(self, table: str, column: str, partition: int, text: str, term: int) -> bool:
        """Put ``text`` in ``table.column`` (one of this module's) for ``partition`` unless a newer term's is
        there."""
        with self.db.write() as conn:
            return (
                conn.execute(
                    f"INSERT INTO {table} (partition, {column}, term) VALUES (?, ?, ?)"
                    f" ON CONFLICT (partition) DO UPDATE SET {column} = excluded.{column}, term = excluded.term"
                    f" WHERE {table}.term <= excluded.term",
                    (partition, text, term),
                ).rowcount
                == 1
            )

    def raise_partition_high_water(self, partitions: int) -> tuple[int, bool]:
        """Record that a deployment runs ``partitions`` partitions; returns ``(the most any deployment ran,
        whether no mark was stored yet)``."""
        return self._raise(_HIGH_WATER, partitions)

    def raise_shard_high_water(self, shards: int) -> tuple[int, bool]:
        """Record that a deployment uses ``shards`` due shards; returns ``(the most any deployment used,
        whether no mark was stored yet)``."""
        return self._raise(_SHARD_HIGH_WATER, shards)

    def _raise(self, name: str, count: int) -> tuple[int, bool]:
        with self.db.write() as conn:
            row = conn.execute("SELECT value FROM marks WHERE name = ?", (name,)).fetchone()
            highest = max(count, int(row[0])) if row else count
            conn.execute("INSERT OR REPLACE INTO marks (name, value) VALUES (?, ?)", (name, highest))
        return highest, row is None
