"""The scheduler's leader lease: one holder per scheduler partition, with a fencing term.

Rules (design §4.3):

- The lease is one record per partition (``lease#<partition>`` in the CONTROL table) holding
  ``holder``, ``term`` and ``expires_at`` (epoch ms, by the holder's clock). Every change is a
  conditional write, so at most one contender wins each change.
- Acquire: allowed when no record exists or the record has expired (``expires_at < now``). The new
  holder's term is ``max(previous term + 1, now_ms)``: strictly higher than every earlier term, and
  (being at least the acquisition time) still higher than the terms stamped on jobs if the lease
  record itself were ever lost. The record is never deleted, so terms only grow.
- Renew: the holder pushes ``expires_at`` to ``now + ttl`` once less than half of its own validity is left
  (every third tick with the defaults, not every tick: a renewal is a write unit), conditional on
  ``holder`` and ``term`` being unchanged (nobody acquired in between).
- Release: ``expires_at`` = the instant before the release (holder's clock; conditional on holder and term), so a
  standby takes over on its next poll instead of waiting for the TTL, and learns when the holder stopped.
- An acquirer keeps the ``expires_at`` of the lease it replaced (:attr:`LeaderLease.earlier_terms_until`):
  no earlier term wrote or sent anything after it (each holder checks its lease before every write), which
  bounds the fires an earlier term may have dispatched (``jobsched.domain.planning.plan_fires``).
- A standby polls each second and takes over at most ``ttl + 1 s`` after the leader's last renewal.

Self-fencing: a holder considers its lease valid until ``renewal sent + ttl - safety`` by its own
injected clock, and checks (:meth:`LeaderLease.check`) before every write of a tick. ``safety``
covers clock skew between holder and standby. The residual window is one request: a check passes,
the process pauses past the lease, a new leader takes over, and the write then lands. It cannot
duplicate a run: runs are inserted conditionally on the unique ``(job_id, scheduled_for)``, job
moves are conditional on ``next_run_at`` and refuse an older term (``JobStore.move``), and an extra
queue message is harmless because workers claim runs conditionally.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field
from typing import Protocol

from jobsched.clock import Clock

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class LeaseRecord:
    """A lease as stored: ``holder`` id, fencing ``term``, ``expires_at`` (epoch ms, holder's clock)."""

    partition: int
    holder: str
    term: int
    expires_at: int


class LeaseStore(Protocol):
    """Storage of lease records (``store.control.ControlStore`` in AWS and under moto)."""

    def read_lease(self, partition: int) -> LeaseRecord | None:
        """The partition's lease record read consistently, or None if never written."""
        ...

    def take_lease(self, record: LeaseRecord, *, previous: LeaseRecord | None, now_ms: int) -> bool:
        """Write ``record`` if ``previous`` is still the stored lease (same term) and expired at ``now_ms``
        (or, when ``previous`` is None, if none exists). True when written."""
        ...

    def renew_lease(self, record: LeaseRecord) -> bool:
        """Store ``record.expires_at`` if holder and term are unchanged. True when written."""
        ...

    def release_lease(self, record: LeaseRecord) -> bool:
        """Store ``record.expires_at`` (the release instant) if holder and term are unchanged. True when
        written."""
        ...


LEADERLESS_RECHECK_S = 3.0
"""How long ``partitions_without_leader`` waits before it reads again the leases it found without a holder: a
hand-over leaves a partition without one for about a second each minute (the leaving invocation releases, the next
takes over at its next poll), which must not count."""


def partitions_without_leader(
    leases: LeaseStore,
    partitions: int,
    clock: Clock,
    wait: Callable[[float], None],
    *,
    recheck_s: float = LEADERLESS_RECHECK_S,
) -> list[int]:
    """The partitions among ``0..partitions-1`` that have no leader: no lease record, or one expired or released
    (``expires_at <=`` now, epoch ms by ``clock``), when read and again ``recheck_s`` later (``wait``), so a
    hand-over (about a second without a holder) does not count while a stopped clock (its EventBridge rule
    disabled, its invocations failing) does. One consistent read per partition, and one more per partition found
    without a leader. Raises what ``read_lease`` raises."""

    def leaderless(partition: int) -> bool:
        lease = leases.read_lease(partition)
        return lease is None or lease.expires_at <= clock()

    first = [partition for partition in range(partitions) if leaderless(partition)]
    if not first:
        return []
    wait(recheck_s)
    return [partition for partition in first if leaderless(partition)]


class LeaseLost(Exception):
    """The holder's lease expired by its own clock or was taken over: stop writing at once."""


def new_holder_id(hint: str | None = None) -> str:
    """A unique contender id: ``<hint or host:pid>/<8 hex>`` (unique per loop instance)."""
    base = hint or f"{socket.gethostname()}:{os.getpid()}"
    return f"{base}/{uuid.uuid4().hex[:8]}"


@dataclass(eq=False)
class LeaderLease:
    """One contender for the lease of ``partition``.

    ``clock`` returns epoch ms; ``ttl_ms`` is how long a silent holder keeps the lease
    (``Settings.lease_ttl_s``); ``safety_ms`` (``min(1000, ttl_ms // 5)``) is how much earlier than
    the stored expiry the holder itself stops writing. Thread-safe: the scheduler's write threads call
    :meth:`check` concurrently.
    """

    store: LeaseStore
    partition: int
    holder: str
    _: KW_ONLY
    clock: Clock
    ttl_ms: int
    safety_ms: int = field(init=False)
    _record: LeaseRecord | None = field(default=None, init=False)
    _valid_until: int = field(default=0, init=False)
    _earlier_until: int | None = field(default=None, init=False)
    _lock: threading.RLock = field(default_factory=threading.RLock, init=False)

    def __post_init__(self) -> None:
        self.safety_ms = min(1000, self.ttl_ms // 5)

    @property
    def term(self) -> int:
        """The held term. Raises ``LeaseLost`` when not holding the lease."""
        record = self._record
        if record is None:
            raise LeaseLost(f"not holding the lease of partition {self.partition}")
        return record.term

    @property
    def held(self) -> bool:
        """True while this contender believes it holds the lease (it may have expired: see :meth:`check`)."""
        return self._record is not None

    @property
    def earlier_terms_until(self) -> int | None:
        """Epoch ms (the earlier holder's clock): the ``expires_at`` of the lease this holder replaced when it
        acquired, plus 1 ms (a released lease stores the instant before its release); no earlier term wrote or
        sent anything after it. None when it replaced none (the first lease of the partition)."""
        return self._earlier_until

    @property
    def valid_until(self) -> int:
        """Epoch ms (own clock) after which this holder writes nothing without renewing first."""
        return self._valid_until

    def ensure(self) -> LeaseRecord | None:
        """Renew the lease if held and less than half of its validity is left (:meth:`_renew_due`), else try to
        acquire it. Returns the held lease, or None.

        Requests: 1 (renewal) per renewal while leading, that is once every ``(ttl - safety) / 2`` (2 s with
        the defaults: every third tick); 1 (consistent read) as a standby, +1 write when it takes an expired
        lease. A refused renewal means someone else took over: the lease is dropped. An error
        of the store (network, throttling) keeps the lease unrenewed: :meth:`check` stops writes once it
        runs out.
        """
        with self._lock:
            if self._record is not None:
                if not self._renew_due(self.clock()):
                    return self._record
                if self._renew():
                    return self._record
                if self._record is not None:
                    return self._record  # renewal failed with an error: still ours until valid_until
                return None
            return self._acquire()

    def check(self) -> int:
        """Return the held term if the lease is valid now by the own clock; renew first when less than half
        of its validity is left (so a long tick keeps its lease). Raises ``LeaseLost`` otherwise. Call before each
        write."""
        with self._lock:
            record = self._record
            if record is None:
                raise LeaseLost(f"not holding the lease of partition {self.partition}")
            now = self.clock()
            if self._renew_due(now) and not self._renew():
                if self._record is None:
                    raise LeaseLost(f"lease of partition {self.partition} was taken over")
                if self.clock() >= self._valid_until:
                    raise LeaseLost(f"lease of partition {self.partition} expired (term {record.term})")
            return record.term

    def release(self) -> None:
        """Give the lease up: its ``expires_at`` becomes the instant before now, so a standby takes over at once
        and knows when this holder stopped (``earlier_terms_until``). Never raises."""
        with self._lock:
            record, self._record, self._valid_until = self._record, None, 0
        if record is None:
            return
        try:
            released = self.store.release_lease(
                LeaseRecord(record.partition, record.holder, record.term, self.clock() - 1)
            )
        except Exception as error:  # the lease then simply runs out after its TTL
            logger.warning(
                "lease release failed",
                extra={"partition": self.partition, "term": record.term, "error": str(error)},
            )
            return
        logger.info(
            "lease released", extra={"partition": self.partition, "term": record.term, "released": released}
        )

    def forget(self) -> None:
        """Drop the lease locally without writing (after a crash-like abort; the TTL frees it)."""
        with self._lock:
            self._record, self._valid_until = None, 0

    # --- internals ---------------------------------------------------------------------------

    def _renew_due(self, now: int) -> bool:
        """Whether less than half of the holder's validity (``ttl - safety`` from its last renewal) is left at
        ``now`` (epoch ms, own clock)."""
        return self._valid_until - now < (self.ttl_ms - self.safety_ms) // 2

    def _renew(self) -> bool:
        """Renew the held lease. True when renewed; on refusal the lease is dropped."""
        record = self._record
        assert record is not None
        sent_at = self.clock()
        renewed = LeaseRecord(record.partition, record.holder, record.term, sent_at + self.ttl_ms)
        try:
            ok = self.store.renew_lease(renewed)
        except Exception as error:
            logger.warning(
                "lease renewal failed",
                extra={"partition": self.partition, "term": record.term, "error": str(error)},
            )
            return False
        if not ok:
            logger.warning(
                "lease taken over",
                extra={"partition": self.partition, "term": record.term, "holder": self.holder},
            )
            self._record, self._valid_until = None, 0
            return False
        self._record = renewed
        self._valid_until = sent_at + self.ttl_ms - self.safety_ms
        return True

    def _acquire(self) -> LeaseRecord | None:
        now = self.clock()
        try:
            current = self.store.read_lease(self.partition)
            if current is not None and current.expires_at >= now:
                return None
            term = max((current.term if current else 0) + 1, now)
            record = LeaseRecord(self.partition, self.holder, term, now + self.ttl_ms)
            if not self.store.take_lease(record, previous=current, now_ms=now):
                return None
        except Exception as error:
            logger.warning(
                "lease acquisition failed", extra={"partition": self.partition, "error": str(error)}
            )
            return None
        self._record = record
        self._valid_until = now + self.ttl_ms - self.safety_ms
        # + 1: a released lease stores the instant before its release, when its last tick may have sent
        self._earlier_until = current.expires_at + 1 if current is not None else None
        logger.info(
            "lease acquired", extra={"partition": self.partition, "term": term, "holder": self.holder}
        )
        return record
