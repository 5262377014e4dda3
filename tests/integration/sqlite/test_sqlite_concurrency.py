"""Many threads on local mode's SQLite connections: the run store's claim is taken once per run even by threads
of two connections on one file (two processes), and the run queue hands each message to one receiver once."""

from __future__ import annotations

import threading
from collections import Counter
from pathlib import Path

from jobsched.clock import FakeClock
from jobsched.domain.runs import new_run
from jobsched.ports.runs import ClaimRequest, RunKey
from jobsched.sqlite.database import SqliteDatabase
from jobsched.sqlite.queue import SqliteSqsQueue, queue_arn
from jobsched.sqlite.runs import SqliteRunStore

T0 = 1_767_578_400_000
URL = "https://sqs.eu-west-1.amazonaws.com/123456789012/runs"


def test_threads_of_two_connections_claim_each_run_once(tmp_path: Path) -> None:
    # Given one database file opened twice (as by two processes), 16 threads over both
    first, second = SqliteDatabase(tmp_path / "db.sqlite3"), SqliteDatabase(tmp_path / "db.sqlite3")
    stores = [SqliteRunStore(first), SqliteRunStore(second)]
    wins: list[tuple[int, int]] = []
    errors: list[BaseException] = []
    try:
        for run in range(10):
            start = threading.Barrier(16)

            def claim(worker: int, run: int = run, start: threading.Barrier = start) -> None:
                start.wait()
                try:
                    claimed = (
                        stores[worker % 2]
                        .claim(
                            ClaimRequest(
                                RunKey("j_a", T0 + run),
                                worker=f"w{worker}",
                                now_ms=T0 + 1_000,
                                stale_before_ms=T0 - 120_000,
                                retry_due_by_ms=T0 + 1_000,
                                create=new_run(
                                    "j_a", T0 + run, now_ms=T0, retention_days=90, sweep_after_ms=None
                                ),
                            )
                        )
                        .claimed
                    )
                except BaseException as error:  # a thread's error is judged below
                    errors.append(error)
                    return
                if claimed:
                    wins.append((run, worker))

            # When they all claim the same scheduled run at once
            threads = [threading.Thread(target=claim, args=(worker,)) for worker in range(16)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
    finally:
        first.close()
        second.close()

    # Then each run was claimed exactly once, and no claim failed
    assert errors == []
    assert Counter(run for run, _ in wins) == Counter(range(10))


def test_receivers_on_many_threads_get_each_message_once(tmp_path: Path) -> None:
    # Given a queue file, 4 threads sending 500 messages in batches while 8 threads receive and delete
    queue = SqliteSqsQueue(
        URL,
        queue_arn(URL),
        visibility_timeout_s=30,
        max_receive_count=5,
        clock=FakeClock(T0),
        path=tmp_path / "q",
    )
    received: Counter[str] = Counter()
    errors: list[BaseException] = []
    lock = threading.Lock()
    all_sent = threading.Event()

    def send(sender: int) -> None:
        try:
            for batch in range(0, 125, 5):
                queue.send_message_batch(
                    QueueUrl=URL,
                    Entries=[{"Id": str(n), "MessageBody": f"{sender}-{batch + n}"} for n in range(5)],
                )
        except BaseException as error:
            errors.append(error)

    def receive() -> None:
        try:
            while True:
                messages = queue.receive_message(QueueUrl=URL, MaxNumberOfMessages=10).get("Messages", [])
                with lock:
                    received.update(m["Body"] for m in messages)
                    done = sum(received.values()) >= 500
                if messages:
                    queue.delete_message_batch(
                        QueueUrl=URL,
                        Entries=[
                            {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]}
                            for i, m in enumerate(messages)
                        ],
                    )
                if done or (not messages and all_sent.is_set()):
                    return
        except BaseException as error:
            errors.append(error)

    # When they all run at once (the clock stands still: nothing becomes visible again)
    senders = [threading.Thread(target=send, args=(sender,)) for sender in range(4)]
    receivers = [threading.Thread(target=receive) for _ in range(8)]
    for thread in senders + receivers:
        thread.start()
    for thread in senders:
        thread.join()
    all_sent.set()  # a receiver that finds the queue empty from now on may stop
    for thread in receivers:
        thread.join()

    # Then every message was received once, and the queue is empty
    assert errors == []
    assert received == Counter(f"{s}-{n}" for s in range(4) for n in range(125))
    attributes = queue.get_queue_attributes(QueueUrl=URL)["Attributes"]
    assert attributes["ApproximateNumberOfMessages"] == "0"
    assert attributes["ApproximateNumberOfMessagesNotVisible"] == "0"
