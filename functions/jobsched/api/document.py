"""The parts of the OpenAPI document the models cannot generate, so that the document describes exactly what
the API accepts (a request valid by the document is never refused with 400, an invalid one always is).

- ``describe_rules`` (once, when the document is generated): the rules pydantic checks in code, written into
  the schemas: a target's ``type`` required (the union's tag), IANA zone names as an enum (``TimeZone``), the target headers' RFC 9110 grammar as patterns,
  the formats ``schedule`` and ``http-url`` (defined below: custom formats, as JSON Schema allows, for
  grammars no pattern can state), ``next_cursor`` in the form ``cursor`` takes, the rules between fields and
  with the clock in the descriptions, and
  OpenAPI links from a created job's ``id`` to every operation on it.
- ``for_deployment`` (each time the document is served): the limits a deployment sets, which the API
  enforces: ``timeout_s`` at most ``worker_timeout_cap_s``, and no ``shell`` target where they are disabled.

Pure dict work on the document of ``jobsched.api.app``; no HTTP, no AWS.
"""

from __future__ import annotations

import copy
from functools import cache
from typing import Any
from zoneinfo import available_timezones

from jobsched.api.cursor import CURSOR_PATTERN, MAX_CURSOR_CHARS
from jobsched.http_rules import URL_PATTERN
from jobsched.models import MAX_INPUT_BYTES, MAX_INPUT_DEPTH
from jobsched.schedule.engine import ScheduleError, get_zone
from jobsched.settings import Settings

SCHEDULE_FORMAT = "schedule"
"""``format`` of ``schedule``: one of the schedule forms the description lists, with at least one fire."""
HTTP_URL_FORMAT = "http-url"
"""``format`` of an http target's ``url``: what the worker's HTTP client can request (see the description)."""

_SCHEDULE_DESCRIPTION = (
    "Format `schedule`: a 5-field cron expression (minute hour day-of-month month day-of-week, Vixie-cron "
    "semantics, `L`, `W`, `#`), a 6-field one with seconds first, a macro (`@hourly`, `@daily`, `@midnight`, "
    "`@weekly`, `@monthly`, `@yearly`, `@annually`), a rate (`rate(5 minutes)`, `every 30 seconds`; "
    "seconds/minutes/hours/days), `daily HH:MM`, or a one-off `at <ISO 8601 date-time>`, in `timezone`. "
    "It must fire at least once between `start_at` and `end_at` after now (a one-off at most 60 s in the "
    "past runs once, now), and no two fires may be closer than the deployment's minimum interval (1 s)."
)
_URL_DESCRIPTION = (
    "Format `http-url`: an absolute `http://` or `https://` URL without spaces or control characters "
    "(percent-encode them); its host a DNS name (labels of letters, digits, `-`, `_` or non-ASCII letters, "
    "at most 63 characters each, 253 in all), an IPv4 address (a host ending in a numeric label must be "
    "one) or a bracketed IPv6 address; its port, if any, 1-65535."
)
_INPUT_DESCRIPTION = (
    f"Any JSON value, given to every run's target: at most {MAX_INPUT_BYTES // 1024} KiB as compact JSON, "
    f"arrays and objects at most {MAX_INPUT_DEPTH} levels deep"
)
_START_DESCRIPTION = "ISO 8601 with an offset: no fire before it (a rate counts from it)"
_END_DESCRIPTION = "ISO 8601 with an offset, after `start_at`: no fire after it"
_INSTANT_YEARS_PATTERN = "^[1-8][0-9]{3}-"
"""The years 1000 to 8999 (``models.INSTANT_YEARS``), as the date-time is written."""
_HEADER_NAME_PATTERN = r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$"
_HEADER_VALUE_PATTERN = r"^([!-~]([ \t]*[!-~])*)?$"

_JOB_BODIES = ("JobCreate", "JobPatch")
_JOB_OPERATIONS = ("getJob", "updateJob", "deleteJob", "pauseJob", "resumeJob", "triggerJob", "listRuns")


@cache
def zone_names() -> tuple[str, ...]:
    """Every ``timezone`` the API accepts (tzdata's names that ``schedules.get_zone`` takes), sorted."""
    accepted = []
    for name in sorted(available_timezones()):
        try:
            get_zone(name)
        except ScheduleError:
            continue
        accepted.append(name)
    return tuple(accepted)


def describe_rules(document: dict[str, Any]) -> None:
    """Write the API's own checks into ``document`` (in place; see the module docstring)."""
    schemas = document["components"]["schemas"]
    schemas["TimeZone"] = {
        "type": "string",
        "enum": list(zone_names()),
        "description": "An IANA time zone name (Area/Location, UTC or GMT), case-sensitive",
    }
    for name in _JOB_BODIES:
        properties = schemas[name]["properties"]
        properties["schedule"].update(format=SCHEDULE_FORMAT, description=_SCHEDULE_DESCRIPTION)
        properties["input"]["description"] = _INPUT_DESCRIPTION
        zone = properties["timezone"]
        properties["timezone"] = {
            "$ref": "#/components/schemas/TimeZone",
            "title": zone.get("title", "Timezone"),
        }
        if "default" in zone:
            properties["timezone"]["default"] = zone["default"]
        for field, description in (("start_at", _START_DESCRIPTION), ("end_at", _END_DESCRIPTION)):
            properties[field]["description"] = description
            for variant in properties[field].get("anyOf", []):
                if variant.get("format") == "date-time":
                    variant["pattern"] = _INSTANT_YEARS_PATTERN
    for reference in schemas["JobCreate"]["properties"]["target"]["discriminator"]["mapping"].values():
        # the union's tag: a target without it is refused (Python callers may omit it: it has a default)
        target = schemas[reference.rsplit("/", 1)[-1]]
        target["required"] = ["type", *(name for name in target.get("required", []) if name != "type")]
    http = schemas["HttpTarget"]["properties"]
    http["url"].update(format=HTTP_URL_FORMAT, pattern=URL_PATTERN, description=_URL_DESCRIPTION)
    http["headers"]["propertyNames"] = {"pattern": _HEADER_NAME_PATTERN}
    http["headers"]["additionalProperties"] = {"type": "string", "pattern": _HEADER_VALUE_PATTERN}
    for name in ("Page_Job_", "Page_Run_"):
        cursor = schemas[name]["properties"]["next_cursor"]
        cursor["description"] = "pass as `cursor` for the next page; null on the last page"
        for variant in cursor.get("anyOf", []):
            if variant.get("type") == "string":
                variant.update(pattern=CURSOR_PATTERN, maxLength=MAX_CURSOR_CHARS)
    _link_created_jobs(document)


def _link_created_jobs(document: dict[str, Any]) -> None:
    """OpenAPI links: the ``id`` of the job ``createJob`` answers is the ``id`` of the job operations."""
    operations = {
        operation.get("operationId"): (path, method)
        for path, methods in document["paths"].items()
        for method, operation in methods.items()
    }
    create_path, create_method = operations["createJob"]
    responses = document["paths"][create_path][create_method]["responses"]
    links = {
        target: {"operationId": target, "parameters": {"id": "$response.body#/id"}}
        for target in _JOB_OPERATIONS
        if target in operations
    }
    for status in ("200", "201"):
        responses[status]["links"] = copy.deepcopy(links)


def for_deployment(document: dict[str, Any], settings: Settings) -> dict[str, Any]:
    """``document`` (not changed) with the limits of the deployment ``settings`` describes."""
    served = copy.deepcopy(document)
    schemas = served["components"]["schemas"]
    for name in _JOB_BODIES:
        properties = schemas[name]["properties"]
        properties["timeout_s"]["maximum"] = settings.worker_timeout_cap_s
        if not settings.allow_shell_targets:
            _drop_shell(properties["target"])
    return served


def _drop_shell(target: dict[str, Any]) -> None:
    """Remove the ``shell`` variant from a target property's ``oneOf`` and discriminator."""
    union = target if "oneOf" in target else next(v for v in target.get("anyOf", []) if "oneOf" in v)
    union["oneOf"] = [v for v in union["oneOf"] if not v.get("$ref", "").endswith("/ShellTarget")]
    union.get("discriminator", {}).get("mapping", {}).pop("shell", None)
