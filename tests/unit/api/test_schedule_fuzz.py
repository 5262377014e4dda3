"""``POST /jobs`` answers any schedule, zone, start_at and end_at with 201 or a 400 naming the field: never
a 500 (the registration runs the same schedule code as ``jobsched next``, years 1 and 9999 included)."""

from __future__ import annotations

import itertools

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.schedule_strategies import EXPRESSIONS, INSTANTS, ZONES

_names = itertools.count(1)
FIELDS = {"schedule", "timezone", "start_at", "end_at"}


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(EXPRESSIONS, ZONES, st.one_of(st.none(), INSTANTS), st.one_of(st.none(), INSTANTS))
def test_create_never_answers_500(http, expression, zone, start_at, end_at):
    body = {"name": f"fuzz-{next(_names)}", "schedule": expression, "timezone": zone, "command": "echo"}
    body.update(
        {key: value for key, value in (("start_at", start_at), ("end_at", end_at)) if value is not None}
    )

    reply = http("POST", "/jobs", body=body)

    assert reply.status in (201, 400), reply.body
    if reply.status == 400:
        assert reply.error["field"] in FIELDS, reply.error
        assert reply.error["message"]
