"""The embedded SQLite backend of local mode: the job store, the run store and the CONTROL store in one
database file (the standard library's ``sqlite3``, WAL journal), behind the same ports as the DynamoDB
adapters (``jobsched.ports``) and held to the same contract suites (``tests/contract``).

Every write is one transaction committed before the call returns, so a write the API or a worker was told
succeeded survives a ``kill -9`` of the process (``database.SqliteDatabase``). Queries go through real
indexes (the due index by ``(partition, bucket, shard, due_at)``, the sweep index by ``(shard, sweep_at)``,
a job's history by its key), so their cost follows the result, not the table."""
