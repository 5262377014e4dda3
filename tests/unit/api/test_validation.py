"""Bad input is a 400 naming the field, 413 past the body limit, 401 without credentials; never a 500."""

from __future__ import annotations

import json

import pytest

from tests.support.api import job_body, without_chain

VALID = {"name": "report", "schedule": "0 2 * * *", "command": "echo"}


def _with(**changes):
    body = dict(VALID)
    for key, value in changes.items():
        if value is ...:
            body.pop(key, None)
        else:
            body[key] = value
    return body


@pytest.mark.parametrize(
    ("body", "field", "code", "hint"),
    [
        (_with(schedule="every fortnight"), "schedule", "invalid_schedule", "rate"),
        (_with(schedule="0 0 30 2 *"), "schedule", "invalid_schedule", "never fires"),
        (_with(schedule="@reboot"), "schedule", "invalid_schedule", "@reboot"),
        (_with(schedule="*/0.5 * * * * *"), "schedule", "invalid_schedule", ""),
        (_with(schedule="at 2026-03-02T09:00:00"), "schedule", "invalid_schedule", "in the past"),
        (_with(schedule="rate(99999999999999999999 minutes)"), "schedule", "invalid_schedule", "3650 days"),
        (_with(schedule="every 9999999999999 seconds"), "schedule", "invalid_schedule", "3650 days"),
        (_with(schedule="*/99999999999 * * * *"), "schedule", "invalid_schedule", "between 1 and 59"),
        (_with(schedule=""), "schedule", "invalid_input", "schedule"),
        (_with(schedule=...), "schedule", "invalid_input", "required"),
        (_with(timezone="PST"), "timezone", "invalid_timezone", "America/Los_Angeles"),
        (_with(timezone="Mars/Olympus"), "timezone", "invalid_timezone", ""),
        (_with(timezone=""), "timezone", "invalid_timezone", ""),
        (_with(command=..., target={"type": "ftp"}), "target", "invalid_input", "http"),
        (_with(command=..., target={"url": "https://x"}), "target", "invalid_input", "type"),
        (
            _with(command=..., target={"type": "http", "url": "ftp://x"}),
            "target.url",
            "invalid_input",
            "http",
        ),
        (_with(command=..., target={"type": "http"}), "target.url", "invalid_input", "required"),
        (
            _with(command=..., target={"type": "shell", "command": "ls"}),
            "target",
            "invalid_input",
            "disabled",
        ),
        (_with(command=...), "target", "invalid_input", "required"),
        (_with(retry={"max_attempts": 11}), "retry.max_attempts", "invalid_input", "10"),
        (_with(retry={"backoff_s": -1}), "retry.backoff_s", "invalid_input", ""),
        (_with(retry={"tries": 3}), "retry.tries", "invalid_input", "not a known field"),
        (_with(retry=5), "retry", "invalid_input", ""),
        (_with(jitter_s=-5), "jitter_s", "invalid_input", "0"),
        (_with(jitter_s=100_000), "jitter_s", "invalid_input", ""),
        (_with(timeout_s=0), "timeout_s", "invalid_input", ""),
        (_with(timeout_s=900), "timeout_s", "invalid_input", "840"),
        (_with(name="has spaces"), "name", "invalid_input", "pattern"),
        (_with(name="x" * 129), "name", "invalid_input", ""),
        (_with(name=...), "name", "invalid_input", "required"),
        (_with(input={"blob": "x" * 70_000}), "input", "invalid_input", "64 KiB"),
        (_with(start_at="2026-04-01T00:00:00"), "start_at", "invalid_input", "offset"),
        (_with(start_at="yesterday"), "start_at", "invalid_input", ""),
        (
            _with(start_at="2026-05-01T00:00:00Z", end_at="2026-04-01T00:00:00Z"),
            "end_at",
            "invalid_input",
            "",
        ),
        (_with(end_at="2026-03-01T00:00:00Z"), "end_at", "invalid_input", "never run"),
        (_with(start_at="9999-12-31T23:59:59Z"), "start_at", "invalid_input", "years 1000 to 8999"),
        (_with(missed="sometimes"), "missed", "invalid_input", "catch_up"),
        (_with(overlap="queue"), "overlap", "invalid_input", ""),
        (_with(catch_up_window_s=-1), "catch_up_window_s", "invalid_input", ""),
        (
            _with(owner="arn:aws:iam::999999999999:role/admin"),
            "owner",
            "invalid_input",
            "authenticated caller",
        ),
        (_with(target={"type": "command", "name": "x"}), "command", "invalid_input", "command or target"),
        (_with(target={"type": "ftp"}), "target", "invalid_input", "http"),
        # JSON types as the OpenAPI document gives them: no lax coercion of strings, numbers or booleans
        (_with(paused=0), "paused", "invalid_input", "boolean"),
        (_with(paused="true"), "paused", "invalid_input", "boolean"),
        (_with(timeout_s="30"), "timeout_s", "invalid_input", "integer"),
        (_with(timeout_s=True), "timeout_s", "invalid_input", "integer"),
        (_with(jitter_s=1.5), "jitter_s", "invalid_input", "integer"),
        (_with(retry={"max_attempts": "3"}), "retry.max_attempts", "invalid_input", "integer"),
        (_with(start_at=1_800_000_000), "start_at", "invalid_input", "ISO 8601"),
    ],
)
def test_create_rejects_bad_input_with_400_naming_the_field(http, body, field, code, hint):
    reply = http("POST", "/jobs", body=body)

    assert reply.status == 400, reply.body
    assert reply.error["field"] == field
    assert reply.error["code"] == code
    assert hint in reply.error["message"]


@pytest.mark.parametrize(
    ("body", "field", "message"),
    [
        (
            _with(command=..., target={"type": "http", "url": "ftp://x"}),
            "target.url",
            "url must be an absolute http:// or https:// URL",
        ),
        (_with(timeout_s=0), "timeout_s", "timeout_s should be greater than or equal to 1"),
        (
            _with(retry={"max_attempts": 11}),
            "retry.max_attempts",
            "retry.max_attempts should be less than or equal to 10",
        ),
        (
            _with(start_at="2026-04-01T00:00:00"),
            "start_at",
            "start_at needs an offset or Z (e.g. 2026-12-04T18:00:00Z)",
        ),
        (
            _with(end_at=1_800_000_000),
            "end_at",
            "end_at must be an ISO 8601 date-time string with an offset, e.g. 2026-12-04T18:00:00Z",
        ),
        (
            _with(command=..., target={"type": "ftp"}),
            "target",
            "target type 'ftp' is unknown; use one of command, http, lambda, shell, sqs",
        ),
    ],
)
def test_messages_do_not_repeat_the_field_they_already_name(http, body, field, message):
    reply = http("POST", "/jobs", body=body)

    assert reply.status == 400
    assert reply.error == {"code": "invalid_input", "message": message, "field": field}


def test_a_patch_refused_by_the_merged_job_names_the_field_once(http):
    # Given: a PATCH body valid on its own, refused when merged into the job (a naive start_at)
    job = http.create("naive")

    reply = http("PATCH", f"/jobs/{job['id']}", body={"start_at": "2026-04-01T00:00:00"})

    assert reply.status == 400
    assert reply.error == {
        "code": "invalid_input",
        "message": "start_at needs an offset or Z (e.g. 2026-12-04T18:00:00Z)",
        "field": "start_at",
    }


def test_command_shorthand_and_target_together_name_command_on_create_and_patch(http):
    job = http.create()
    both = {"command": "echo", "target": {"type": "command", "name": "echo"}}

    for reply in (http("POST", "/jobs", body=_with(**both)), http("PATCH", f"/jobs/{job['id']}", body=both)):
        assert reply.status == 400, reply.body
        assert reply.error == {
            "code": "invalid_input",
            "message": "give either command or target, not both",
            "field": "command",
        }
    patched = http("PATCH", f"/jobs/{job['id']}", body={"command": "sleep"})
    assert patched.status == 200 and patched.body["target"] == {"type": "command", "name": "sleep"}


def _http_target(url: str = "https://hooks.example.com/run", **fields):
    return _with(command=..., target={"type": "http", "url": url, **fields})


@pytest.mark.parametrize(
    ("url", "hint"),
    [
        ("http://[::1", "not a valid URL"),
        ("http://[zz]/", "not a valid URL"),
        ("http://exa mple.com/", "spaces or control characters"),
        ("http://example.com/\x00", "spaces or control characters"),
        ("http://999.999.999.999/", "IPv4"),
        ("http://1.2.3/", "IPv4"),
        ("http://0x7f.1/", "IPv4"),
        ("http://example.com:99999/", "out of range"),
        ("http://example.com:0/", "port 0"),
        ("http://example.com:http/", "not a valid URL"),
        ("http:///path", "no host"),
        ("http://a..b/", "not a valid host name"),
        ("http://%41.com/", "not a valid host name"),
        ("http://" + "a" * 64 + ".com/", "not a valid host name"),
    ],
)
def test_an_http_target_url_that_cannot_be_requested_is_400(http, url, hint):
    reply = http("POST", "/jobs", body=_http_target(url))

    assert reply.status == 400, reply.body
    assert reply.error["field"] == "target.url" and reply.error["code"] == "invalid_input"
    assert hint in reply.error["message"]


@pytest.mark.parametrize(
    "url",
    [
        "https://hooks.example.com/services/T0/B0?token=x#frag",
        "http://127.0.0.1:8080/hook",
        "http://[::1]:8080/",
        "http://localhost/",
        "http://user:secret@internal_service.example:443/a%20b",
        "https://bücher.example/",
        "https://example.com./",
    ],
)
def test_usable_http_target_urls_are_accepted(http, url):
    reply = http("POST", "/jobs", body=_http_target(url))

    assert reply.status == 201, reply.body
    assert reply.body["target"]["url"] == url


@pytest.mark.parametrize(
    ("headers", "hint"),
    [
        ({"a\nb": "c"}, "not a valid HTTP field name"),
        ({"X Trace": "1"}, "not a valid HTTP field name"),
        ({"X-Tráce": "1"}, "not a valid HTTP field name"),
        ({"": "1"}, "not a valid HTTP field name"),
        ({"X-Trace": "1\r\nX-Injected: yes"}, "no CR, LF"),
        ({"X-Trace": "1\n"}, "no CR, LF"),
        ({"X-Trace": "a\x00b"}, "control characters"),
        ({"X-Trace": " padded"}, "leading or trailing"),
        ({"X-Trace": "caf\u00e9"}, "printable ASCII"),
    ],
)
def test_http_target_headers_that_would_break_the_request_are_400(http, headers, hint):
    job = http.create()

    for reply in (
        http("POST", "/jobs", body=_http_target(headers=headers)),
        http(
            "PATCH",
            f"/jobs/{job['id']}",
            body={"target": {"type": "http", "url": "https://x.io/", "headers": headers}},
        ),
    ):
        assert reply.status == 400, reply.body
        assert reply.error["field"] == "target.headers" and reply.error["code"] == "invalid_input"
        assert hint in reply.error["message"]


def test_valid_http_target_headers_are_kept(http):
    headers = {"Authorization": "Bearer abc.def", "X-Empty": "", "X-Tab": "a\tb", "x-custom_1!": "v=1; w=2"}

    reply = http("POST", "/jobs", body=_http_target(headers=headers))

    assert reply.status == 201, reply.body
    assert reply.body["target"]["headers"] == headers


def test_the_sample_bad_input_event_names_the_schedule(http):
    reply = http.invoke(http.sample("create_job_bad_schedule"))

    assert reply.status == 400
    assert reply.error == {
        "code": "invalid_schedule",
        "message": "cron schedule '0 0 30 2 *' never fires: no calendar date matches its day-of-month, "
        "month and day-of-week fields",
        "field": "schedule",
    }


def test_the_minimum_interval_is_a_deployment_setting(http):
    assert http("POST", "/jobs", body=_with(schedule="every 1 second")).status == 201
    http.reconfigure(http.settings, min_interval_s=60.0)

    reply = http("POST", "/jobs", body=_with(name="fast", schedule="*/10 * * * * *"))

    assert reply.status == 400 and reply.error["field"] == "schedule" and "1 minute" in reply.error["message"]


@pytest.mark.parametrize(
    ("raw", "field", "code"),
    [
        ('{"name": "x",', "body", "invalid_json"),
        ("not json at all", "body", "invalid_json"),
        ("[1, 2]", "body", "invalid_input"),
        ('"a string"', "body", "invalid_input"),
        ("null", "body", "invalid_input"),
    ],
)
def test_malformed_bodies_are_400(http, raw, field, code):
    reply = http("POST", "/jobs", raw_body=raw)

    assert reply.status == 400
    assert reply.error["field"] == field and reply.error["code"] == code


@pytest.mark.parametrize(
    ("raw", "hint"),
    [
        ('{"name": "deep", "input": ' + "[" * 5000 + "]" * 5000 + "}", "nested too deeply"),
        ('{"name": "deep", "input": ' + '{"a":' * 5000 + "1" + "}" * 5000 + "}", "nested too deeply"),
        ('{"name": "long", "input": ' + "7" * 5000 + "}", "4300 digits"),
    ],
)
def test_json_the_parser_cannot_take_is_400_invalid_json(http, raw, hint):
    # Given: a body well under the size limit that json.loads refuses with RecursionError / ValueError
    for method, path in (("POST", "/jobs"), ("PATCH", "/jobs/j_00000000000000000000")):
        reply = http(method, path, raw_body=raw)

        assert reply.status == 400, (method, reply.body)
        assert reply.error["code"] == "invalid_json" and reply.error["field"] == "body"
        assert hint in reply.error["message"]


@pytest.mark.parametrize(
    "value",
    ['{"a": NaN}', "Infinity", "[1, -Infinity]", '{"x": {"y": 1e999}}', "NaN"],
)
def test_input_with_nan_or_infinity_is_400_naming_input(http, value):
    # Given: JSON extensions Python's parser accepts; stored, they would reach the target as null
    job = http.create("finite")
    create = '{"name": "nan", "schedule": "0 2 * * *", "command": "echo", "input": ' + value + "}"
    patch = '{"input": ' + value + "}"

    for reply in (
        http("POST", "/jobs", raw_body=create),
        http("PATCH", f"/jobs/{job['id']}", raw_body=patch),
    ):
        assert reply.status == 400, reply.body
        assert reply.error["field"] == "input" and reply.error["code"] == "invalid_input"
        assert "NaN or Infinity" in reply.error["message"]
    assert http("GET", f"/jobs/{job['id']}").body["input"] == {"n": 1}  # unchanged


def test_input_nested_deeper_than_the_limit_is_400_naming_input(http):
    deepest = "[" * 128 + "]" * 128
    too_deep = "[" * 129 + "]" * 129
    body = '{"name": "%s", "schedule": "0 2 * * *", "command": "echo", "input": %s}'

    accepted = http("POST", "/jobs", raw_body=body % ("deepest", deepest))
    refused = http("POST", "/jobs", raw_body=body % ("too-deep", too_deep))
    far_too_deep = http("POST", "/jobs", raw_body=body % ("far", "[" * 400 + "]" * 400))

    assert accepted.status == 201, accepted.body
    assert accepted.body["input"] == json.loads(deepest)
    for reply in (refused, far_too_deep):
        assert reply.status == 400 and reply.error["field"] == "input"
        assert "more than 128 levels" in reply.error["message"]


def test_a_missing_body_is_400(http):
    reply = http("POST", "/jobs")

    assert reply.status == 400
    assert reply.error == {"code": "invalid_input", "message": "request body is required", "field": "body"}


@pytest.mark.parametrize(
    "content_type", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"]
)
def test_a_non_json_content_type_is_400_naming_it(http, content_type):
    reply = http("POST", "/jobs", body=job_body("form"), headers={"Content-Type": content_type})

    assert reply.status == 400
    assert reply.error == {
        "code": "unsupported_media_type",
        "message": "send the request body as JSON (Content-Type: application/json)",
        "field": "Content-Type",
    }
    assert http("GET", "/jobs").body["items"] == []


@pytest.mark.parametrize(
    ("method", "path"), [("POST", "/jobs"), ("POST", "/jobs/{id}/pause"), ("PATCH", "/jobs/{id}")]
)
def test_a_body_without_a_content_type_is_400_naming_it(http, method, path):
    # Given a paused job, and a request whose JSON body comes without a Content-Type (as a page of another
    # site can send one without a CORS preflight)
    job = http.create("unlabelled")
    assert http("POST", f"/jobs/{job['id']}/pause").status == 200
    body = {
        "/jobs": job_body("unlabelled-2"),
        "/jobs/{id}/pause": {"reason": "x"},
        "/jobs/{id}": {"schedule": "0 3 * * *"},
    }[path]
    event = http.event(method, path.format(id=job["id"]), body=body)
    event["headers"] = {k: v for k, v in event["headers"].items() if k.lower() != "content-type"}
    event["multiValueHeaders"] = {k: [v] for k, v in event["headers"].items()}

    reply = http.invoke(event)

    assert reply.status == 400
    assert reply.error["code"] == "unsupported_media_type" and reply.error["field"] == "Content-Type"
    after = http("GET", f"/jobs/{job['id']}").body
    assert after["paused"] is True and after["schedule"] == job["schedule"]
    assert [j["name"] for j in http("GET", "/jobs").body["items"]] == ["unlabelled"]


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"limit": "0"}, "limit"),
        ({"limit": "101"}, "limit"),
        ({"limit": "ten"}, "limit"),
        ({"cursor": "!!!"}, "cursor"),
        ({"cursor": "eyJ2IjoxfQ=="}, "cursor"),
    ],
)
def test_bad_list_parameters_are_400(http, query, field):
    reply = http("GET", "/jobs", query=query)

    assert reply.status == 400 and reply.error["field"] == field


def test_a_well_formed_cursor_the_listing_did_not_issue_is_404_naming_the_cursor(http):
    reply = http("GET", "/jobs", query={"cursor": "eyJ2IjoxfQ"})

    assert reply.status == 404 and reply.error["field"] == "cursor"


def test_bad_runs_parameters_are_400(http):
    job = http.create()

    bad_status = http("GET", f"/jobs/{job['id']}/runs", query={"status": "exploded"})
    bad_cursor = http("GET", f"/jobs/{job['id']}/runs", query={"cursor": "x!"})
    unknown_cursor = http("GET", f"/jobs/{job['id']}/runs", query={"cursor": "x"})

    assert bad_status.status == 400 and bad_status.error["field"] == "status"
    assert bad_cursor.status == 400 and bad_cursor.error["field"] == "cursor"
    assert unknown_cursor.status == 404 and unknown_cursor.error["field"] == "cursor"


def test_a_bad_idempotency_key_is_400_naming_the_header(http):
    reply = http("POST", "/jobs", body=VALID, headers={"Idempotency-Key": "k" * 300})

    assert reply.status == 400 and reply.error["field"] == "Idempotency-Key"


# --- 413 ------------------------------------------------------------------------------------------


def test_a_body_over_the_limit_is_413_before_validation(http):
    body = json.dumps(_with(input={"blob": "x" * (256 * 1024)}))

    reply = http("POST", "/jobs", raw_body=body)

    assert reply.status == 413
    assert reply.error["code"] == "payload_too_large" and reply.error["field"] == "body"
    assert str(256 * 1024) in reply.error["message"]


def test_the_body_limit_is_a_deployment_setting_and_counts_bytes(http):
    http.reconfigure(http.settings, api_max_body_bytes=200)
    patch = json.dumps({"input": {"text": "é" * 90}})  # 90 characters, 180+ bytes of UTF-8

    job_id = "j_00000000000000000000"
    assert http("PATCH", f"/jobs/{job_id}", raw_body=patch).status == 413
    assert http("PATCH", f"/jobs/{job_id}", raw_body=json.dumps({"input": "é" * 10})).status == 404


def test_a_base64_body_is_measured_decoded(http):
    http.reconfigure(http.settings, api_max_body_bytes=100)
    event = http.event("POST", "/jobs", body=_with(input="y" * 200))
    event["body"] = __import__("base64").b64encode(event["body"].encode()).decode()
    event["isBase64Encoded"] = True

    assert http.invoke(event).status == 413


# --- 401 ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/jobs"),
        ("GET", "/jobs"),
        ("GET", "/runs"),
        ("GET", "/jobs/j_00000000000000000000"),
        ("PATCH", "/jobs/j_00000000000000000000"),
        ("DELETE", "/jobs/j_00000000000000000000"),
        ("POST", "/jobs/j_00000000000000000000/pause"),
        ("POST", "/jobs/j_00000000000000000000/resume"),
        ("POST", "/jobs/j_00000000000000000000/trigger"),
        ("GET", "/jobs/j_00000000000000000000/runs"),
        ("GET", "/jobs/j_00000000000000000000/fires"),
        ("GET", "/jobs/j_00000000000000000000/events"),
        ("POST", "/jobs/j_00000000000000000000/backfill"),
    ],
)
def test_every_route_needs_a_caller_identity(http, method, path):
    reply = http(
        method, path, caller=None, raw_body="{not even json" if method in ("POST", "PATCH") else None
    )

    assert reply.status == 401
    assert reply.error["code"] == "unauthorized"
    assert reply.headers["www-authenticate"] == "AWS4-HMAC-SHA256"


def test_a_caller_that_is_not_an_arn_is_401(http):
    assert http("GET", "/jobs", caller="alice@example.com").status == 401


@pytest.fixture
def tokens(http, tmp_path):
    path = tmp_path / "tokens.json"
    path.write_text(json.dumps({"tok-alice": http.alice_owner, "tok-bob": http.bob_owner}))
    http.reconfigure(http.settings, local_tokens_file=str(path))
    return path


def test_local_mode_maps_bearer_tokens_to_owners(http, tokens):
    reply = http("POST", "/jobs", body=VALID, caller=None, headers={"Authorization": "Bearer tok-alice"})
    listed = http("GET", "/jobs", caller=None, headers={"authorization": "bearer tok-bob"})

    assert reply.status == 201 and reply.body["owner"] == http.alice_owner
    assert listed.status == 200 and listed.body["items"] == []


@pytest.mark.parametrize(
    "authorization",
    [None, "Bearer", "Bearer nope", "Basic dG9rLWFsaWNlOg==", "tok-alice", "Bearer tok-alice2"],
)
def test_local_mode_refuses_missing_and_bad_tokens_with_401(http, tokens, authorization):
    headers = {"Authorization": authorization} if authorization else {}

    reply = http("GET", "/jobs", caller="alice", headers=headers)  # an IAM identity does not count locally

    assert reply.status == 401
    assert reply.headers["www-authenticate"].startswith("Bearer")


def test_whole_numbers_written_with_a_fraction_are_integers_as_json_schema_says(http):
    created = http("POST", "/jobs", body=http.job_body("floats", timeout_s=30.0, retry={"max_attempts": 2.0}))
    patched = http("PATCH", f"/jobs/{created.body['id']}", body={"jitter_s": 5.0})
    fractional = http("PATCH", f"/jobs/{created.body['id']}", body={"jitter_s": 5.5})
    boolean = http("PATCH", f"/jobs/{created.body['id']}", body={"jitter_s": True})

    assert (
        created.status == 201
        and created.body["timeout_s"] == 30
        and created.body["retry"]["max_attempts"] == 2
    )
    assert patched.status == 200 and patched.body["jitter_s"] == 5
    assert fractional.status == 400 and fractional.error["field"] == "jitter_s"
    assert boolean.status == 400 and boolean.error["field"] == "jitter_s"


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("start_at", "0001-01-01T00:01:00+02:01"),  # before year 1 in UTC: no datetime can hold it
        ("start_at", "0999-12-31T23:59:59Z"),
        ("end_at", "9999-12-31T23:00:00-05:00"),  # after year 9999 in UTC
    ],
)
def test_instants_outside_the_years_1000_to_8999_are_400_naming_the_field(http, field, value):
    reply = http("POST", "/jobs", body=http.job_body(f"range-{field}", **{field: value}))

    assert reply.status == 400 and reply.error["field"] == field
    assert "1000" in reply.error["message"]


def test_a_body_wrapped_in_a_json_array_is_refused_not_unwrapped(http):
    """Powertools' body validation takes the one object of ``[{...}]`` as the body; a job wrapped in an array
    is refused, not created."""
    job = http.create()
    calls = [
        ("POST", "/jobs", [http.job_body("wrapped")]),
        ("PATCH", f"/jobs/{job['id']}", [{"timeout_s": 60}]),
        ("POST", f"/jobs/{job['id']}/pause", [{}]),
    ]

    for method, path, body in calls:
        reply = http(method, path, body=body)
        assert reply.status == 400, (method, path, reply.body)
        assert reply.error == {
            "code": "invalid_input",
            "message": "request body must be a JSON object",
            "field": "body",
        }
    assert without_chain(http("GET", f"/jobs/{job['id']}").body) == job
    assert http("GET", "/jobs").body["items"] == [job]


@pytest.mark.parametrize("text", ["1772445600", "1872445600000", "-1", "1.5e9"])
@pytest.mark.parametrize(
    ("method", "path", "body", "field"),
    [
        ("POST", "/jobs", lambda text: _with(start_at=text), "start_at"),
        ("POST", "/jobs", lambda text: _with(end_at=text), "end_at"),
        ("PATCH", "/jobs/{id}", lambda text: {"end_at": text}, "end_at"),
        ("POST", "/jobs/{id}/backfill", lambda text: {"start": text, "end": "2026-03-02T00:00:00Z"}, "start"),
    ],
    ids=["create start_at", "create end_at", "patch end_at", "backfill start"],
)
def test_an_instant_given_as_a_string_of_digits_is_a_400_naming_it(http, text, method, path, body, field):
    # Instants are ISO 8601 date-times with an offset; a JSON number is refused, and so must a number in a string
    # be, rather than read as epoch seconds (or milliseconds, by pydantic's rule on the number's size)
    job = http.create("existing")

    reply = http(method, path.format(id=job["id"]), body=body(text))

    assert reply.status == 400 and reply.error["field"] == field, reply.body


@pytest.mark.parametrize("zone", ["UTC\n", " Europe/Berlin", "Europe/Berlin\t", "\u00a0UTC"])
def test_a_timezone_with_whitespace_around_it_is_a_400_naming_timezone_not_stored_as_given(http, zone):
    # Time zones are IANA names only: 'UTC\n' is not one. Accepting it (the check strips it) stores and returns a
    # zone name that the console, the CLI and any other reader of the job cannot use as given
    job = http.create("existing")

    created = http("POST", "/jobs", body=_with(timezone=zone))
    patched = http("PATCH", f"/jobs/{job['id']}", body={"timezone": zone})

    for reply in (created, patched):
        assert reply.status == 400 and reply.error["field"] == "timezone", reply.body
    assert http("GET", f"/jobs/{job['id']}").body["timezone"] == "UTC"


@pytest.mark.parametrize(
    "schedule",
    ["every \u0665 minutes", "rate(\u0665 minutes)", "daily \u0660\u0662:00", "every \uff15 minutes"],
    ids=["every arabic-indic", "rate arabic-indic", "daily arabic-indic", "every fullwidth"],
)
def test_a_rate_or_daily_schedule_with_non_ascii_digits_is_a_400_as_a_cron_one_is(http, schedule):
    # cron fields refuse digits other than 0-9; rates and daily times must too (Python's \d and int() take any
    # Unicode digit): the stored expression is read by the console and other tools that know ASCII digits only
    cron = http("POST", "/jobs", body=_with(name="cron", schedule="\u0665 2 * * *"))
    reply = http("POST", "/jobs", body=_with(schedule=schedule))

    assert cron.status == 400 and cron.error["code"] == "invalid_schedule", cron.body
    assert reply.status == 400 and reply.error["code"] == "invalid_schedule", reply.body
    assert reply.error["field"] == "schedule"


@pytest.mark.parametrize(
    "content_type",
    [
        "application/json; charset=utf-8",
        "Application/JSON",
        "APPLICATION/JSON; charset=UTF-8",
        "application/vnd.api+json",
        "application/merge-patch+json",
    ],
)
def test_every_spelling_of_a_json_content_type_is_taken_as_json(http, content_type):
    # Given a job, and a PATCH whose Content-Type is JSON spelled another way (media types are case-insensitive,
    # RFC 9110 §8.3.1; application/*+json is JSON, as admission says)
    job = http.create("spelled")

    reply = http(
        "PATCH", f"/jobs/{job['id']}", body={"input": {"n": 2}}, headers={"Content-Type": content_type}
    )

    assert reply.status == 200, reply.body
    assert http("GET", f"/jobs/{job['id']}").body["input"] == {"n": 2}


@pytest.mark.parametrize("value", ["yes", "false", 1, 0])
def test_secret_path_is_a_json_boolean_not_a_word_or_number(http, value):
    # "false" read as a flag would be True or False by pydantic's lax spelling rules: refused, as every flag is
    body = job_body(
        "hooked", target={"type": "http", "url": "https://hooks.example.com/T0/B0/XyZ", "secret_path": value}
    )

    reply = http("POST", "/jobs", body=body)

    assert reply.status == 400
    assert reply.error["field"] == "target.secret_path" and reply.error["code"] == "invalid_input"
    assert http("GET", "/jobs").body["items"] == []


@pytest.mark.parametrize("reason", ["\u0124\u00be\u0010\u0121w%", "a\x00b", "ok\x1b[31m", "x\x85y", "a\tb"])
def test_the_documented_pause_reason_pattern_refuses_what_the_api_refuses(http, reason):
    import re

    from jobsched.api.schemas import PauseRequest

    pattern = PauseRequest.model_json_schema()["properties"]["reason"]["pattern"]
    job = http.create("paused-with-control")
    refused = http("POST", f"/jobs/{job['id']}/pause", body={"reason": reason})

    assert refused.status == 400 and refused.error["field"] == "reason"
    assert re.search(pattern, reason) is None  # a generated client refuses it too
