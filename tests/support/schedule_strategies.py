"""Hypothesis strategies for schedule expressions, zones and instants anyone could type, shared by the
"never a traceback, never a 500" properties of ``jobsched next`` and ``POST /jobs``."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from hypothesis import strategies as st

_NUMBERS = st.integers(0, 99).map(str)
_NAMES = st.sampled_from(["mon", "FRI", "sun", "jan", "Dec", "xyz"])
_ATOMS = st.one_of(
    _NUMBERS, _NAMES, st.sampled_from(["*", "?", "L", "W", "LW", "L-3", "L-40", "15W", "H", "R", ""])
)
_RANGES = st.builds(lambda a, b: f"{a}-{b}", _ATOMS, _ATOMS)
_STEPPED = st.builds(
    lambda a, n: f"{a}/{n}",
    st.one_of(_ATOMS, _RANGES),
    st.sampled_from(["0", "1", "2", "5", "7", "60", "999999"]),
)
_SPECIAL = st.builds(lambda a, n: f"{a}#{n}", _ATOMS, st.sampled_from(["0", "1", "3", "5", "6"])) | st.builds(
    lambda a: f"{a}L", _ATOMS
)
_ITEM = st.one_of(_ATOMS, _RANGES, _STEPPED, _SPECIAL)
FIELDS = st.lists(_ITEM, min_size=1, max_size=3).map(",".join)
CRON = st.lists(FIELDS, min_size=4, max_size=8).map(" ".join)
EVENTBRIDGE = CRON.map(lambda body: f"cron({body})")
PLAUSIBLE_CRON = st.builds(
    lambda m, h, dom, mon, dow: f"{m} {h} {dom} {mon} {dow}",
    st.sampled_from(["0", "*/5", "*", "55-5/2", "30"]),
    st.sampled_from(["*", "2", "23-3/2", "0,12"]),
    st.sampled_from(["*", "L", "LW", "15W", "29", "31", "L-2", "?"]),
    st.sampled_from(["*", "2", "9-8/3", "feb"]),
    st.sampled_from(["*", "1,5L", "sat-tue/2", "2#1", "?", "*/7"]),
)
OTHER_FORMS = st.one_of(
    st.builds(
        lambda n, u: f"rate({n} {u})",
        st.integers(0, 10**13),
        st.sampled_from(["second", "minutes", "hour", "days", "weeks"]),
    ),
    st.builds(
        lambda n, u: f"every {n} {u}", st.integers(0, 10**6), st.sampled_from(["seconds", "minute", "day"])
    ),
    st.builds(lambda h, m: f"daily {h}:{m:02d}", st.integers(0, 30), st.integers(0, 70)),
    st.sampled_from(["@daily", "@hourly", "@yearly", "@reboot", "@every 5m", "@weekly", "@fortnightly"]),
    st.text(alphabet="0123456789*/-,?#LWHabc() @", max_size=30),
)

ZONES = st.sampled_from(
    [
        "UTC",
        "Etc/GMT+12",
        "Etc/GMT-14",
        "Pacific/Kiritimati",
        "Pacific/Apia",
        "America/New_York",
        "Asia/Tokyo",
        "Europe/Berlin",
        "Australia/Lord_Howe",
        "America/Santiago",
        "PST",
        "Mars/Olympus",
    ]
)

_EDGE_INSTANTS = st.sampled_from(
    [
        "0001-01-01T00:00:00Z",
        "0001-01-01T00:00:00",
        "0001-01-01T00:00:00+14:00",
        "9999-12-31T23:59:59Z",
        "9999-12-31T23:59:58.999999Z",
        "9999-12-31T23:00:00-12:00",
        "9999-12-31T23:59:59",
    ]
)


def _iso(moment: datetime, offset_minutes: int | None) -> str:
    if offset_minutes is None:
        return moment.isoformat()
    return moment.replace(tzinfo=timezone(timedelta(minutes=offset_minutes))).isoformat()


INSTANTS = st.one_of(
    _EDGE_INSTANTS,
    st.builds(
        _iso,
        st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31, 23, 59, 59)),
        st.one_of(st.none(), st.integers(-12 * 60, 14 * 60)),
    ),
)
"""ISO 8601 instants from year 1 to 9999, naive or with an offset, the edges of the range included."""

EXPRESSIONS = st.one_of(
    CRON, EVENTBRIDGE, PLAUSIBLE_CRON, OTHER_FORMS, INSTANTS.map(lambda text: f"at {text}")
)
