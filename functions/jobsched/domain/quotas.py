"""Quotas per owner (design §4.11): the settings' shape, each owner's limits, a schedule's fire rate, and the rule
that refuses a request over a limit.

Pure: the API's ``jobsched.api.quotas.Quotas`` reads the owner's usage from the job store
(``jobsched.ports.quotas``) and asks these functions. Quotas are checked only at the API: the scheduler never
reads them, so a quota never skips, delays or loses a fire.

Units: ``fires_per_minute`` limits are fires per minute (a float); usage is kept as an integer of micro-fires
per minute (``fire_rate``), so that adding and subtracting jobs never accumulates rounding.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from functools import lru_cache

from pydantic import BaseModel, ConfigDict, Field, StrictInt, field_validator

from jobsched.ports.quotas import OwnerUsage, UsageChange
from jobsched.schedule.engine import ScheduleError, every_year, parse_schedule

MICRO = 1_000_000
"""Usage units per fire per minute: ``fire_rate`` is in micro-fires per minute."""

RATE_WINDOW = (datetime(2028, 1, 1, tzinfo=UTC), datetime(2029, 1, 1, tzinfo=UTC))
"""The reference range a schedule's long-run fire rate is averaged over: one whole leap year (UTC), fixed so
that a schedule's rate never depends on when it is computed (an edit's and a delete's subtraction then equals
the create's addition exactly). Its 366 days hold every weekday, month, day of month and daylight-saving
transition."""

RATE_WINDOW_MINUTES = (RATE_WINDOW[1] - RATE_WINDOW[0]).total_seconds() / 60

WINDOW_MS = 60_000
"""Width of the fixed window manual requests are counted in (``triggers_per_minute``), ms."""


class OwnerQuota(BaseModel):
    """One owner's limits; None (the default) is no limit.

    ``jobs``: live jobs; ``fires_per_minute``: the sum of the owner's schedules' long-run average fire rates
    (:func:`fire_rate`), paused jobs included; ``triggers_per_minute``: manual triggers and backfills (each
    request counts one) in a fixed minute window."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    jobs: StrictInt | None = Field(None, ge=0, description="most live jobs per owner")
    fires_per_minute: float | None = Field(
        None,
        ge=0,
        strict=True,
        allow_inf_nan=False,
        description="most fires per minute, summed over the owner's schedules (long-run average)",
    )
    triggers_per_minute: StrictInt | None = Field(
        None, ge=0, description="most manual triggers and backfills a minute"
    )


class QuotaTable(BaseModel):
    """The ``quotas`` setting: ``{"default": {...}, "owners": {"team-a": {...}}}``. An owner's entry overrides the
    default field by field: the fields it gives replace the default's (``null``: no limit for that owner)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    default: OwnerQuota = OwnerQuota()
    owners: dict[str, OwnerQuota] = Field(default_factory=dict)

    @field_validator("owners")
    @classmethod
    def _owner_names(cls, owners: dict[str, OwnerQuota]) -> dict[str, OwnerQuota]:
        """An owner is written as the API names it: not empty, no surrounding spaces (such an entry would
        never apply)."""
        for owner in owners:
            if not owner or owner != owner.strip():
                raise ValueError(
                    f"owner {owner!r} is empty or has surrounding spaces: no caller has that owner"
                )
        return owners

    def for_owner(self, owner: str) -> OwnerQuota:
        """The owner's limits: its entry's fields over the default's."""
        entry = self.owners.get(owner)
        if entry is None:
            return self.default
        return self.default.model_copy(update={name: getattr(entry, name) for name in entry.model_fields_set})


@dataclass(eq=False)
class QuotaExceeded(Exception):
    """A request that would take the owner over ``field``'s ``limit``: ``use`` is the owner's current use and
    ``wanted`` what the request would make it. ``rate``: the quota is a per-minute window (refused with 429 and
    ``retry_after_s``), else a count (409). Fire rates are in fires per minute."""

    owner: str
    field: str
    limit: float
    use: float
    wanted: float
    rate: bool = False
    retry_after_s: int | None = None

    @property
    def message(self) -> str:
        """The refusal, with the owner's numbers."""
        return (
            f"owner {self.owner!r} is at its {self.field} quota: limit {_shown(self.limit)}, in use "
            f"{_shown(self.use)}, this request would make it {_shown(self.wanted)}"
        )


def _shown(value: float) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


@lru_cache(maxsize=4096)
def fire_rate(expression: str, timezone: str) -> int:
    """The schedule's long-run average fire rate in micro-fires per minute, rounded up: its fires over
    :data:`RATE_WINDOW` (counted by ``Schedule.count_fires``, without enumerating) divided by the window's
    minutes. A rate's anchor is the window's start; a one-off (``at ...``) is 0 (it fires once, not at a rate).
    ``start_at``/``end_at`` are not applied (the rate of the schedule as written), nor an EventBridge cron's
    year field (``every_year``: the rate in the years it fires, so that a schedule limited to years outside the
    window is not counted 0). Raises ``ScheduleError`` for a schedule that does not parse."""
    parse_schedule(expression, timezone, start_at=RATE_WINDOW[0])
    schedule = parse_schedule(every_year(expression), timezone, start_at=RATE_WINDOW[0])
    if schedule.kind == "once":
        return 0
    count = schedule.count_fires(RATE_WINDOW[0], RATE_WINDOW[1], cap=2**62)
    return math.ceil(count * MICRO / RATE_WINDOW_MINUTES)


def job_fire_rate(expression: str | None, timezone: str) -> int:
    """A stored job's fire rate (:func:`fire_rate`), 0 for a job without a schedule (one that runs after
    another) or a schedule that no longer parses: the amount its create added to its owner's usage and its
    delete takes away, micro-fires per minute."""
    if expression is None:
        return 0
    try:
        return fire_rate(expression, timezone)
    except ScheduleError:
        return 0


def count_change(owner: str, before: int | None, after: int | None) -> UsageChange:
    """What moving a job's count in its owner's usage from ``before`` to ``after`` adds, the one rule of every
    write that counts (``Job.quota_rate``: the fire rate a job is counted with, micro-fires per minute; None: not
    counted): a create counts (None to its rate), a re-timing edit moves the count (or counts an uncounted job
    whole), a delete uncounts (nothing for an uncounted job), the recount counts an uncounted job. Carries no
    limits."""
    jobs = (after is not None) - (before is not None)
    return UsageChange(owner, jobs, (after or 0) - (before or 0))


def stored_count(value: object) -> int | None:
    """A job's count (``Job.quota_rate``) from its stored ``value``: a whole number of at least 0 (an ``int`` or
    a ``Decimal``, as DynamoDB gives numbers); anything else (absent, text, a fraction, below 0, a boolean) is
    read as not counted, the reading every store's conditions share (an edit then counts the job whole, a
    delete takes nothing away, the recount counts it), so bad stored data never makes a job unreadable."""
    if isinstance(value, Decimal):
        if not value.is_finite() or value != value.to_integral_value():
            return None
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


def per_minute(rate: int) -> float:
    """Micro-fires per minute as fires per minute (3 decimals, rounded up)."""
    return math.ceil(rate / 1000) / 1000


def check_jobs(owner: str, quota: OwnerQuota, jobs_in_use: int, added: int) -> None:
    """Refuse (``QuotaExceeded``, field ``jobs``) ``added`` jobs more when the owner would have more than its
    limit. A change that adds none is never refused (an edit or a delete)."""
    if added > 0 and quota.jobs is not None and jobs_in_use + added > quota.jobs:
        raise QuotaExceeded(owner, "jobs", quota.jobs, jobs_in_use, jobs_in_use + added)


def check_fire_rate(owner: str, quota: OwnerQuota, rate_in_use: int, added: int) -> None:
    """Refuse (``QuotaExceeded``, field ``fires_per_minute``) a change that raises the owner's summed fire rate
    (micro-fires per minute) over its limit. A change that lowers or keeps it is never refused, even when the
    owner is over (after its quota was lowered)."""
    if added <= 0 or quota.fires_per_minute is None:
        return
    if rate_in_use + added > quota.fires_per_minute * MICRO:
        raise QuotaExceeded(
            owner,
            "fires_per_minute",
            quota.fires_per_minute,
            per_minute(rate_in_use),
            per_minute(rate_in_use + added),
        )


def check_usage(change: UsageChange, held: OwnerUsage) -> None:
    """Refuse (``QuotaExceeded``) ``change`` when adding it to the owner's stored usage ``held`` passes a limit
    it carries (``UsageChange.limit_jobs``, ``limit_fires_per_minute``): the job stores' check inside the
    write (:func:`check_jobs`, :func:`check_fire_rate`)."""
    quota = OwnerQuota(jobs=change.limit_jobs, fires_per_minute=change.limit_fires_per_minute)
    check_jobs(change.owner, quota, held.jobs, change.jobs)
    check_fire_rate(change.owner, quota, held.fire_rate, change.fire_rate)


def window_of(now_ms: int) -> int:
    """The start (epoch ms) of the fixed one-minute window ``now_ms`` falls in."""
    return now_ms - now_ms % WINDOW_MS


def request_refused(owner: str, limit: int, now_ms: int) -> QuotaExceeded:
    """The refusal of a manual request over ``triggers_per_minute`` (the window holds ``limit``), with the
    seconds until the next window (``Retry-After``)."""
    retry_after_s = math.ceil((window_of(now_ms) + WINDOW_MS - now_ms) / 1000)
    return QuotaExceeded(
        owner, "triggers_per_minute", limit, limit, limit + 1, rate=True, retry_after_s=retry_after_s
    )
