"""Job routes end to end through the Lambda handler on moto: what the DynamoDB adapters store (the scheduling
item, its due-index entry, the tombstone) and the handler's routing. The use cases' logic is tested on the
fakes (``tests/unit/api/test_jobs.py``)."""

from __future__ import annotations

from typing import Any

from boto3.dynamodb.conditions import Key

from jobsched import resources
from jobsched.domain.registration import partition_of
from jobsched.dynamodb import layout
from jobsched.dynamodb.layout import SCHED_SK, job_pk

TOMORROW_2AM = "2026-03-03T02:00:00Z"


def sched_item(http: Any, job_id: str) -> dict[str, Any]:
    item = http.aws.table(http.settings.jobs_table).get_item(Key={"pk": job_pk(job_id), "sk": SCHED_SK})[
        "Item"
    ]
    return dict(item)


def test_create_answers_201_with_the_job_its_location_and_first_fire(http):
    reply = http("POST", "/jobs", body=http.job_body("nightly-report", timezone="Europe/Berlin"))

    assert reply.status == 201
    job = reply.body
    assert job["id"].startswith("j_")
    assert reply.headers["location"] == f"/prod/jobs/{job['id']}"  # under the stage, as the caller sees it
    assert job["owner"] == http.alice_owner  # the assumed-role session maps to its role
    assert job["schedule"] == "0 2 * * *"
    assert job["target"] == {"type": "command", "name": "echo"}  # the "command" shorthand
    assert job["next_run_at"] == "2026-03-03T01:00:00Z"  # 02:00 in Berlin (UTC+1 in March)
    assert job["created_at"] == job["updated_at"] == "2026-03-02T10:00:00Z"


def test_create_writes_an_active_scheduling_item_in_the_jobs_partition(http):
    job = http.create()

    item = sched_item(http, job["id"])
    assert int(item["next_run_at"]) == 1_772_503_200_000  # 2026-03-03T02:00Z
    assert int(item["partition"]) == partition_of(job["id"], http.settings.scheduler_partitions)
    assert int(item["term"]) == 0
    assert item["timer_pk"].startswith(f"due#p{int(item['partition'])}#")  # its timer item's key
    assert "due_pk" not in item  # not in the due GSI (design, Upgrades in flight)
    assert int(item["anchor_at"]) == http.NOW_MS


def test_delete_leaves_a_tombstone_that_expires_with_the_history(http):
    job = http.create()
    http.clock.now_ms = http.NOW_MS + 5_000

    http("DELETE", f"/jobs/{job['id']}")

    table = http.aws.table(http.settings.jobs_table)
    items = {
        i["sk"]: i
        for i in table.query(KeyConditionExpression=Key("pk").eq(layout.job_pk(job["id"])))["Items"]
    }
    assert set(items) == {layout.SPEC_SK}  # the scheduling item (and so the due-index entry) is gone
    tombstone = items[layout.SPEC_SK]
    assert tombstone["deleted_owner"] == http.alice_owner and tombstone["deleted_name"] == job["name"]
    assert int(tombstone["deleted_at"]) == http.NOW_MS + 5_000
    retention_s = http.settings.retention_days * 86400
    assert int(tombstone["expires_at"]) == (http.NOW_MS + 5_000) // 1000 + retention_s
    assert resources.JOBS.ttl_attribute == "expires_at"
    # not in the by_owner index (no owner/name pair), no spec document, no name lock
    assert not {"owner", "name", "doc"} & set(tombstone)
    assert "Item" not in table.get_item(Key=layout.name_key(http.alice_owner, job["name"]))
    # workers and the sweeper read it as deleted
    assert http.api.service.jobs.get_spec(job["id"]) is None


def test_resume_continues_with_the_first_fire_after_the_resume_instant(http):
    # Given: a daily 02:00 job paused before its 02:00 fire, resumed two days later (at 10:00)
    job = http.create()
    http("POST", f"/jobs/{job['id']}/pause")
    http.clock.advance(2 * 86_400_000)

    resumed = http("POST", f"/jobs/{job['id']}/resume").body

    # Then: the fires of the paused time are not run: next_run_at is the next 02:00 after the resume, filed there
    item = sched_item(http, job["id"])
    assert resumed["next_run_at"] == "2026-03-05T02:00:00Z"
    assert int(item["due_at"]) == 1_772_503_200_000 + 2 * 86_400_000


def test_an_unknown_path_is_404_and_a_wrong_method_405_with_allow(http):
    missing = http("GET", "/nothing-here")
    wrong = http("PUT", "/jobs")

    assert missing.status == 404 and missing.error["code"] == "not_found"
    assert wrong.status == 405 and wrong.headers["allow"] == "GET, POST"
    assert wrong.error["code"] == "method_not_allowed"


def test_openapi_json_is_served_without_credentials(http):
    reply = http("GET", "/openapi.json", caller=None)

    assert reply.status == 200
    assert reply.body["openapi"].startswith("3.")
    assert "/jobs/{id}/trigger" in reply.body["paths"]
