"""The pure planning of ``jobsched apply`` (``jobsched.apply_plan``): reading specs, validating them with the
API's schema, planning create / change-only-the-diff / prune, and exporting a job as a spec that plans to no
change."""

from __future__ import annotations

from typing import Any

import pytest

from jobsched.apply_plan import (
    SpecError,
    describe,
    dump_yaml,
    export_spec,
    plan,
    read_documents,
    validate,
)
from jobsched.labels import ContradictorySelector, matches, parse_selector

NOW = "2026-03-02T10:00:00Z"


def stored(name: str, number: int = 1, **fields: Any) -> dict[str, Any]:
    """A job as the API returns it (the defaults of a created job, ``fields`` over them)."""
    job: dict[str, Any] = {
        "id": f"j_{number:020x}",
        "name": name,
        "owner": "team-a",
        "schedule": "0 2 * * *",
        "timezone": "UTC",
        "target": {"type": "command", "name": "echo"},
        "input": None,
        "labels": {},
        "retry": {"max_attempts": 4, "backoff_s": 60, "max_backoff_s": 900},
        "alerts": {"on_dead": True, "on_skipped": False},
        "timeout_s": 300,
        "missed": "catch_up",
        "catch_up_window_s": 86400,
        "misfire_grace_s": 60,
        "overlap": "allow",
        "jitter_s": 0,
        "start_at": None,
        "end_at": None,
        "paused": False,
        "next_run_at": "2026-03-03T02:00:00Z",
        "created_at": NOW,
        "updated_at": NOW,
    }
    job.update(fields)
    return job


def specs_of(text: str, source: str = "jobs.yaml") -> list[Any]:
    return validate(read_documents(text, source))


BILLING = """
name: invoices
schedule: "0 2 * * *"
command: echo
labels: {app: billing}
---
- name: reminders
  schedule: every 5 minutes
  target: {type: http, url: "https://example.com/hook"}
  labels: {app: billing}
- name: ledger
  schedule: "0 3 * * *"
  timezone: Europe/Berlin
  command: echo
  labels: {app: billing}
  start_at: "2026-12-04T19:00:00+01:00"
"""


def test_documents_and_lists_are_read_in_order_with_their_source() -> None:
    specs = specs_of(BILLING)
    assert [(s.source, s.name) for s in specs] == [
        ("jobs.yaml#1", "invoices"),
        ("jobs.yaml#2", "reminders"),
        ("jobs.yaml#3", "ledger"),
    ]
    assert specs[0].request.target.type == "command"
    assert [
        s.name for s in specs_of('[{"name": "a", "schedule": "@daily", "command": "echo"}]', "a.json")
    ] == ["a"]


def test_missing_jobs_are_created_with_their_whole_spec() -> None:
    result = plan(specs_of(BILLING), [])
    assert [s.name for s in result.created] == ["invoices", "reminders", "ledger"]
    body = result.created[0].body()
    assert body["target"] == {"type": "command", "name": "echo"} and "command" not in body
    assert "paused" not in body  # managed only when given
    assert not result.empty


def test_an_identical_job_is_unchanged_even_with_instants_written_in_another_offset() -> None:
    jobs = [
        stored("invoices", 1, labels={"app": "billing"}),
        stored(
            "reminders", 2, schedule="every 5 minutes", labels={"app": "billing"},
            target={"type": "http", "url": "https://example.com/hook", "method": "POST", "headers": {},
                    "secret_headers": [], "secret_path": False},
        ),
        stored(
            "ledger", 3, schedule="0 3 * * *", timezone="Europe/Berlin", labels={"app": "billing"},
            start_at="2026-12-04T18:00:00Z", paused=True,  # paused by an operator: not in the spec
        ),
    ]  # fmt: skip
    result = plan(specs_of(BILLING), jobs)
    assert result.unchanged == ["invoices", "reminders", "ledger"]
    assert result.empty


def test_a_differing_job_is_changed_by_only_its_differing_fields() -> None:
    jobs = [stored("invoices", 1, schedule="0 4 * * *", labels={"app": "billing", "old": "x"}, jitter_s=30)]
    (change,) = plan(specs_of(BILLING)[:1], jobs).changed
    assert change.job_id == "j_" + "0" * 19 + "1"
    assert change.fields == ("schedule", "labels", "jitter_s")
    assert change.after == {"schedule": "0 2 * * *", "labels": {"app": "billing"}, "jitter_s": 0}
    assert change.before == {
        "schedule": "0 4 * * *",
        "labels": {"app": "billing", "old": "x"},
        "jitter_s": 30,
    }


def test_a_label_only_change_patches_only_the_labels() -> None:
    (change,) = plan(specs_of(BILLING)[:1], [stored("invoices", 1, labels={"app": "other"})]).changed
    assert change.after == {"labels": {"app": "billing"}}  # no timing field: next_run_at is kept by the API


def test_paused_is_managed_when_the_spec_gives_it() -> None:
    spec = specs_of("{name: a, schedule: '@daily', command: echo, paused: false}")
    (change,) = plan(spec, [stored("a", paused=True, schedule="@daily")]).changed
    assert change.after == {"paused": False}


def test_prune_deletes_the_selected_jobs_no_spec_names_and_nothing_else() -> None:
    jobs = [
        stored("invoices", 1, labels={"app": "billing"}),
        stored("gone", 2, labels={"app": "billing", "tier": "gold"}),
        stored("other-app", 3, labels={"app": "ops"}),
        stored("unlabelled", 4),
    ]
    specs = specs_of(BILLING)[:1]
    result = plan(specs, jobs, selector={"app": "billing"}, prune=True)
    assert [(d.name, d.job_id) for d in result.deleted] == [("gone", "j_" + "0" * 19 + "2")]
    assert plan(specs, jobs, selector={"app": "billing"}).deleted == []  # no --prune: nothing deleted
    with pytest.raises(ValueError, match="--prune needs --selector"):
        plan(specs, jobs, prune=True)


def test_the_diff_names_each_job_and_field_and_counts_them() -> None:
    jobs = [
        stored("invoices", 1, schedule="0 4 * * *", labels={"app": "billing"}),
        stored("gone", 2, labels={"app": "billing"}),
    ]
    result = plan(specs_of(BILLING), jobs, selector={"app": "billing"}, prune=True)
    lines = describe(result, dry_run=True)
    assert lines == [
        "created reminders",
        "created ledger",
        "changed invoices: schedule",
        '  schedule: "0 4 * * *" -> "0 2 * * *"',
        "deleted gone",
        "apply: 2 created, 1 changed, 1 deleted, 0 unchanged (dry run: nothing was changed)",
    ]


@pytest.mark.parametrize(
    ("text", "where", "field", "says"),
    [
        ("name: a\nschedule: '@daily'\ncommand: echo\nlabels: {'bad key': x}", "j.yaml: job 'a'", "labels", "label key 'bad key'"),
        ("name: a\nschedule: '@daily'\ncommand: echo\njitter_s: -1", "j.yaml: job 'a'", "jitter_s", "greater than or equal"),
        ("name: a\nschedule: '@daily'\ncommand: echo\ncolour: red", "j.yaml: job 'a'", "colour", "Extra inputs"),
        ("name: a\nschedule: '@daily'\ntarget: {type: http, url: 'ftp://x'}", "j.yaml: job 'a'", "target.http.url", ""),
        ("schedule: '@daily'\ncommand: echo", "j.yaml", "name", "Field required"),
        ("name: a\ncommand: echo\n---\nname: b\nschedule: '@daily'", "j.yaml#1", "schedule", "schedule is required"),
        ("- just text", "j.yaml", None, "a spec must be a mapping"),
        ("- {name: a}\n- just text", "j.yaml#2", None, "a spec must be a mapping"),
        ("- {name: a}\n- {name: b}\n---\njust text", "j.yaml#3", None, "a spec must be a mapping"),
        ("name: [unclosed", "j.yaml", None, "not valid YAML or JSON (line 1"),
        ("name: a\nschedule: '@daily'\ncommand: echo\n---\nname: a\nschedule: '@hourly'\ncommand: echo", "j.yaml#2: job 'a'", "name", "also used by j.yaml#1"),
    ],
)  # fmt: skip
def test_an_invalid_spec_is_named_by_file_job_and_field(
    text: str, where: str, field: str | None, says: str
) -> None:
    with pytest.raises(SpecError) as refused:
        specs_of(text, "j.yaml")
    assert str(refused.value).startswith(f"{where}: ")
    assert refused.value.field == field
    assert says in refused.value.message


def test_yaml_tags_that_build_objects_are_refused() -> None:
    with pytest.raises(SpecError, match="not valid YAML"):
        specs_of("!!python/object/apply:os.system ['true']")


JOB = "name: a\nschedule: '0 2 * * *'\ncommand: echo\n"
LAUGHS = "".join(
    f"{chr(98 + n)}: &{chr(98 + n)} [{', '.join([f'*{chr(97 + n)}'] * 10)}]\n  " for n in range(8)
)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (JOB + "schedule: '0 3 * * *'\n", "(line 4, column 1): the key 'schedule' is given twice"),
        (JOB + "input: {n: 1, n: 2}\n", "the key 'n' is given twice"),
        (JOB + "input: {1: one}\n", "(line 4, column 9): a key must be text, not 1"),
        (JOB + "input: !!binary aGVsbG8=\n", "binary has no JSON value"),
        (JOB + "input: !!set {x}\n", "set has no JSON value"),
        (JOB + "input: !!timestamp 2026-12-04\n", "timestamp has no JSON value"),
        (JOB + "input:\n  a: &a [x, x, x, x, x, x, x, x, x, x]\n  " + LAUGHS, "expands to more than 200000 values"),
        (JOB + "input: " + "[" * 200 + "]" * 200 + "\n", "nested deeper than 131 levels"),
        ("[" * 5000 + "]" * 5000, "nested deeper than 131 levels"),
        (JOB + "input: &loop [*loop]\n", "an alias refers to a value that contains it"),
        (JOB + "input: &loop {next: *loop}\n", "an alias refers to a value that contains it"),
    ],
)  # fmt: skip
def test_yaml_that_json_cannot_say_is_refused_with_its_line(text: str, says: str) -> None:
    with pytest.raises(SpecError) as refused:
        specs_of(text, "j.yaml")
    assert str(refused.value).startswith("j.yaml: not valid YAML or JSON (line ")
    assert says in refused.value.message


def test_yaml_reads_as_the_json_the_api_receives() -> None:
    """An unquoted date stays the text it is (a JSON body has no dates); merge keys and anchors still work; an
    input as deep as the API takes is read."""
    deep = "[" * 126 + "[1]" + "]" * 126  # with its mapping, input is 128 deep (models.MAX_INPUT_DEPTH)
    (first, second) = specs_of(
        "- name: a\n  schedule: '0 2 * * *'\n  command: echo\n  start_at: 2026-12-04T10:00:00Z\n"
        f"  input: {{day: 2026-12-04, deep: {deep}}}\n  retry: &r {{max_attempts: 2, backoff_s: 5}}\n"
        "- name: b\n  schedule: '0 2 * * *'\n  command: echo\n  retry: {<<: *r, backoff_s: 9}\n"
    )
    assert first.body()["input"]["day"] == "2026-12-04"
    assert first.body()["start_at"] == "2026-12-04T10:00:00Z"
    assert (second.request.retry.max_attempts, second.request.retry.backoff_s) == (2, 9)


def test_an_exported_input_reads_back_unchanged_whatever_its_text() -> None:
    tricky = {
        "breaks": "\u2028x\x85y\u2029",  # NEL, LINE and PARAGRAPH SEPARATOR, which YAML folds unless escaped
        "nel\x85key": "a\x85b",
        "look-alikes": ["yes", "2026-12-04", "null", "~", "1_000", "0o17", "<<", "*a", "&a", "!t", "---", ""],
        "\ufeffbom": "M\u00fcller\u00a0",
    }
    job = stored("tricky", input=tricky)

    text = dump_yaml([export_spec(job)])

    assert "M\u00fcller" in text  # non-ASCII text stays readable
    result = plan(specs_of(text), [job])
    assert result.unchanged == ["tricky"] and not result.changed


def test_an_exported_job_applies_as_no_change() -> None:
    jobs = [
        stored("plain", 1),
        stored(
            "full", 2, schedule="rate(5 minutes)", timezone="Europe/Berlin", input={"n": [1, 2.5, None]},
            labels={"app": "billing", "x.y/z": ""}, retry={"max_attempts": 2, "backoff_s": 60, "max_backoff_s": 900},
            target={"type": "http", "url": "https://example.com/h", "method": "PUT", "headers": {"X-A": "1"},
                    "secret_headers": [], "secret_path": False},
            start_at="2026-12-04T18:00:00.001Z", paused=True, jitter_s=5,
        ),
    ]  # fmt: skip
    exported = [export_spec(job) for job in jobs]
    assert exported[0] == {
        "name": "plain",
        "schedule": "0 2 * * *",
        "target": {"type": "command", "name": "echo"},
    }
    assert exported[1]["target"] == {
        "type": "http",
        "url": "https://example.com/h",
        "method": "PUT",
        "headers": {"X-A": "1"},
    }
    assert exported[1]["paused"] is True and exported[1]["retry"]["max_attempts"] == 2
    result = plan(specs_of(dump_yaml(exported)), jobs)
    assert result.unchanged == ["plain", "full"] and result.empty


def test_a_label_selector_is_key_value_terms() -> None:
    assert parse_selector(["team=billing", "tier=gold", "team=billing"]) == {
        "team": "billing",
        "tier": "gold",
    }
    assert parse_selector(["empty="]) == {"empty": ""}
    with pytest.raises(ContradictorySelector):
        parse_selector(["team=a", "team=b"])
    for bad in ("team", "=x", "a b=c", "k=a,b"):
        with pytest.raises(ValueError, match="label selector"):
            parse_selector([bad])
    assert matches({"team": "billing", "tier": "gold"}, {"team": "billing"})
    assert not matches({"team": "billing"}, {"team": "billing", "tier": "gold"})
    assert matches({}, {})


def test_a_job_after_another_named_by_its_name_is_unchanged_against_the_stored_id() -> None:
    # Given an upstream job and a job stored as running after it (the API keeps the upstream's id)
    upstream = stored("extract", 1)
    chained = stored("load", 2, schedule=None, after={"job": upstream["id"], "on": ["succeeded"]})
    specs = specs_of(
        "name: extract\nschedule: '0 2 * * *'\ncommand: echo\n---\nname: load\nafter: {job: extract}\ncommand: echo"
    )

    # When the files that name the upstream by its name are planned against them
    result = plan(specs, [upstream, chained])

    # Then nothing changes; a spec naming another upstream still changes `after`
    assert result.unchanged == ["extract", "load"] and result.empty
    moved = specs_of("name: load\nafter: {job: other}\ncommand: echo")
    assert [change.fields for change in plan(moved, [upstream, chained]).changed] == [("after",)]


def test_jobs_created_after_others_the_same_apply_creates_come_after_them() -> None:
    # Given files that list a chain's jobs downstream first
    specs = specs_of(
        "name: report\nafter: {job: load}\ncommand: echo\n---\nname: load\nafter: {job: extract}\ncommand: echo"
        "\n---\nname: extract\nschedule: '0 2 * * *'\ncommand: echo"
    )

    # When they are planned with none of them stored
    result = plan(specs, [])

    # Then each is created after its upstream (the API resolves an upstream's name when it creates a job)
    assert [spec.name for spec in result.created] == ["extract", "load", "report"]
