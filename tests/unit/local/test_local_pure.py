"""Local mode's pure parts: tokens, re-enqueueing unfinished runs, demo jobs, the DynamoDB endpoint test."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
from boto3.dynamodb.types import TypeSerializer

from jobsched.api.schemas import JobCreate
from jobsched.local.config import LocalConfig
from jobsched.local.demo import DEMO_DIR, demo_jobs
from jobsched.local.embedded_aws import _is_dynamodb, isolate_from_aws
from jobsched.local.recovery import unfinished_messages
from jobsched.local.tokens import load_tokens_file, prepare_tokens
from jobsched.ports.run_messages import RunMessage

NOW = 1_800_000_000_000
_serializer = TypeSerializer()


def low_level(**item: object) -> dict[str, object]:
    return {k: _serializer.serialize(v) for k, v in item.items()}


def test_dev_token_is_generated_once_and_private(tmp_path: Path) -> None:
    tokens_path, token, generated = prepare_tokens(tmp_path, None)
    again_path, again, _ = prepare_tokens(tmp_path, None)

    assert generated and token.startswith("dev-") and again == token and again_path == tokens_path
    assert json.loads(tokens_path.read_text()) == {token: {"owner": "local", "shell": True}}
    assert (tmp_path / "dev-token").read_text().strip() == token
    assert stat.S_IMODE((tmp_path / "dev-token").stat().st_mode) == 0o600


def test_tokens_file_gets_an_internal_local_token_only_when_needed(tmp_path: Path) -> None:
    teams = tmp_path / "teams.json"
    teams.write_text(json.dumps({"t-billing": "billing", "t-search": "search"}))
    path, demo_token, generated = prepare_tokens(tmp_path / "data", teams)
    effective = json.loads(path.read_text())
    assert not generated
    assert effective[demo_token] == {"owner": "local", "shell": True} and demo_token.startswith("internal-")
    assert {k: v for k, v in effective.items() if k != demo_token} == {
        "t-billing": {"owner": "billing", "shell": False},
        "t-search": {"owner": "search", "shell": False},
    }

    teams.write_text(json.dumps({"mine": "local"}))
    _, demo_token, _ = prepare_tokens(tmp_path / "data", teams)
    assert demo_token == "mine"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{", "not valid JSON"),
        ("[]", "JSON object"),
        ('{"t": 1}', "token number 1"),
        ("{}", "JSON object"),
        ('{"t": "a", "u": {"owner": "b", "shell": "yes"}}', "token number 2"),
        ('{"t": {"shell": true}}', "token number 1"),
        ('{"t": {"owner": "b", "admin": true}}', "token number 1"),
        ('{"t": "a", "u": ""}', "token number 2"),  # an empty owner: the token would never authenticate
        ('{"t": {"owner": "", "shell": true}}', "token number 1"),
        ('{"t": "a", "": "b"}', "token number 2"),  # an empty token: never sent by a client
    ],
)
def test_bad_tokens_files_are_refused(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "tokens.json"
    path.write_text(content)
    with pytest.raises(ValueError, match=message):
        load_tokens_file(path)
    with pytest.raises(ValueError, match="cannot read"):
        load_tokens_file(tmp_path / "absent.json")


def test_unfinished_runs_are_enqueued_again_when_each_may_run() -> None:
    runs = [
        low_level(job_id="a", scheduled_for=NOW - 5000, status="queued", dispatch_at=NOW - 5000),
        low_level(job_id="b", scheduled_for=NOW, status="queued", dispatch_at=NOW + 30_500),  # jitter
        low_level(job_id="c", scheduled_for=NOW - 60_000, status="retrying", retry_at=NOW + 4000),
        low_level(job_id="d", scheduled_for=NOW - 60_000, status="running", heartbeat_at=NOW - 100_000),
        low_level(job_id="e", scheduled_for=NOW - 60_000, status="running", heartbeat_at=NOW - 500_000),
        low_level(job_id="f", scheduled_for=NOW - 60_000, status="succeeded"),
        low_level(job_id="g", scheduled_for=NOW - 60_000, status="dead"),
        low_level(job_id="h", scheduled_for=NOW + 10_000_000, status="queued", dispatch_at=NOW + 10_000_000),
    ]

    messages = unfinished_messages(runs, now_ms=NOW, heartbeat_stale_s=120)

    assert messages == [
        RunMessage("a", NOW - 5000, 0),
        RunMessage("b", NOW, 31),
        RunMessage("c", NOW - 60_000, 4),
        RunMessage("d", NOW - 60_000, 21),  # stale 120 s after its last beat (+1 s margin)
        RunMessage("e", NOW - 60_000, 0),
        RunMessage("h", NOW + 10_000_000, 900),  # SQS's cap; the sweeper covers the rest
    ]


def test_demo_jobs_are_valid_job_bodies_with_the_api_url() -> None:
    jobs = demo_jobs("http://127.0.0.1:9999")
    assert len(jobs) >= 5
    names = [JobCreate.model_validate(body).name for body in jobs]
    assert len(set(names)) == len(names)
    assert all(name.startswith("demo-") for name in names)
    health = next(j for j in jobs if j.get("target", {}).get("type") == "http")
    assert health["target"]["url"].startswith("http://127.0.0.1:9999/")
    assert "${API_URL}" not in json.dumps(jobs)
    assert demo_jobs("x", folder=DEMO_DIR / "absent") == []


def test_demo_file_that_is_not_an_object_is_refused(tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text("[1]")
    with pytest.raises(ValueError, match="JSON object"):
        demo_jobs("x", folder=tmp_path)


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://dynamodb.us-east-1.amazonaws.com/", True),
        ("https://123456789012.ddb.us-east-1.amazonaws.com/", True),
        ("https://streams.dynamodb.us-east-1.amazonaws.com/", True),
        ("https://123456789012.streams-ddb.us-east-1.amazonaws.com/", True),
        ("https://sqs.us-east-1.amazonaws.com/", False),
        ("https://sns.us-east-1.amazonaws.com/", False),
    ],
)
def test_dynamodb_endpoints_are_recognised(url: str, expected: bool) -> None:
    assert _is_dynamodb(url) is expected


def test_isolation_removes_profiles_and_endpoints() -> None:
    env = {
        "AWS_PROFILE": "prod",
        "AWS_ENDPOINT_URL": "https://example.com",
        "AWS_SESSION_TOKEN": "x",
        "HOME": "/h",
    }
    isolate_from_aws(env)
    assert "AWS_PROFILE" not in env and "AWS_ENDPOINT_URL" not in env and "AWS_SESSION_TOKEN" not in env
    assert (
        env["AWS_ACCESS_KEY_ID"] == "local"
        and env["AWS_DEFAULT_REGION"] == "us-east-1"
        and env["HOME"] == "/h"
    )


def test_config_refuses_zero_loops() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        LocalConfig(schedulers=0)


def test_config_reads_the_quotas_file_into_the_settings(tmp_path: Path) -> None:
    quotas = tmp_path / "quotas.json"
    quotas.write_text(json.dumps({"default": {"jobs": 10}, "owners": {"local": {"jobs": 50}}}))

    config = LocalConfig(quotas_file=quotas)

    assert config.settings["quotas"].for_owner("local").jobs == 50
    assert config.settings["quotas"].for_owner("other").jobs == 10


def test_config_refuses_a_quotas_file_naming_an_unknown_quota(tmp_path: Path) -> None:
    quotas = tmp_path / "quotas.json"
    quotas.write_text(json.dumps({"default": {"runs_per_day": 10}}))

    with pytest.raises(ValueError, match=r"--quotas .*runs_per_day"):
        LocalConfig(quotas_file=quotas)
