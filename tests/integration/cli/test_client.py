"""The HTTP client: SigV4 for API Gateway URLs, bearer tokens otherwise, and error bodies to one line."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
import typer
from botocore.credentials import Credentials
from typer.testing import CliRunner

from jobsched.cli import options as cli_options
from jobsched.cli import register
from jobsched.cli.import_crontab import system_zone_name
from jobsched.cli.options import find_dev_token
from jobsched.client import ApiError, ApiUnreachable, JobschedClient, api_gateway_region, is_loopback
from jobsched.local.config import LocalConfig
from jobsched.local.tokens import prepare_tokens
from jobsched.schedule.engine import get_zone
from tests.support.aws import remove_aws_credentials

GATEWAY = "https://abc123defg.execute-api.eu-west-1.amazonaws.com/prod"


def recording(
    status: int = 200, body: object = None, text: str | None = None
) -> tuple[list[httpx.Request], httpx.MockTransport]:
    seen: list[httpx.Request] = []

    def reply(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if text is not None:
            return httpx.Response(status, text=text)
        return httpx.Response(status, json=body if body is not None else {"items": [], "next_cursor": None})

    return seen, httpx.MockTransport(reply)


@pytest.mark.parametrize(
    ("url", "region"),
    [
        (GATEWAY, "eu-west-1"),
        ("https://x1.execute-api.us-east-2.amazonaws.com", "us-east-2"),
        ("http://127.0.0.1:8080", None),
        ("https://jobs.example.com/prod", None),
        ("https://execute-api.eu-west-1.amazonaws.com.evil.example/prod", None),
    ],
)
def test_api_gateway_urls_are_recognised(url: str, region: str | None) -> None:
    assert api_gateway_region(url) == region


def test_api_gateway_calls_are_sigv4_signed_not_bearer() -> None:
    seen, transport = recording(201, {"id": "j_1", "name": "n"})
    credentials = Credentials("AKIDEXAMPLE", "secret", "session-token")

    with JobschedClient(GATEWAY, token="ignored", transport=transport, credentials=credentials) as client:
        job, created = client.create_job({"name": "n"}, idempotency_key="k-1")

    assert (job["id"], created) == ("j_1", True)
    (request,) = seen
    authorization = request.headers["Authorization"]
    assert authorization.startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")
    assert "/eu-west-1/execute-api/aws4_request" in authorization
    assert "idempotency-key" in authorization and "host" in authorization
    assert request.headers["X-Amz-Security-Token"] == "session-token"
    assert request.url.path == "/prod/jobs"


def test_sigv4_without_credentials_is_one_clear_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    remove_aws_credentials(monkeypatch, tmp_path)
    _, transport = recording()

    with JobschedClient(GATEWAY, transport=transport) as client, pytest.raises(ApiError) as raised:
        client.list_jobs()

    assert raised.value.code == "no_credentials"
    assert "no AWS credentials found" in str(raised.value)


def test_local_calls_carry_the_bearer_token() -> None:
    seen, transport = recording()
    with JobschedClient("http://127.0.0.1:8080", token="dev-abc", transport=transport) as client:
        client.list_runs("j_1", status="dead", limit=5)
    (request,) = seen
    assert request.headers["Authorization"] == "Bearer dev-abc"
    assert request.url.params == httpx.QueryParams({"status": "dead", "limit": "5"})


@pytest.mark.parametrize(
    ("status", "kwargs", "line"),
    [
        (
            400,
            {"body": {"error": {"code": "invalid_schedule", "message": "never fires", "field": "schedule"}}},
            "400 invalid_schedule: never fires (field: schedule)",
        ),
        (
            403,
            {"body": {"message": "Missing Authentication Token"}},
            "403 forbidden: Missing Authentication Token",
        ),
        (502, {"text": "<html> Bad\n gateway </html>"}, "502 http_502: <html> Bad gateway </html>"),
        (429, {"text": ""}, "429 throttled: Too Many Requests"),
    ],
)
def test_error_bodies_become_one_line(status: int, kwargs: dict[str, object], line: str) -> None:
    _, transport = recording(status, **kwargs)  # type: ignore[arg-type]
    with (
        JobschedClient("http://127.0.0.1:8080", transport=transport) as client,
        pytest.raises(ApiError) as raised,
    ):
        client.get_job("j_1")
    assert str(raised.value) == line
    assert raised.value.status == status


def test_paths_never_escape_the_job_segment() -> None:
    seen, transport = recording(200, {"id": "x"})
    with JobschedClient("http://127.0.0.1:8080", transport=transport) as client:
        client.get_job("../openapi.json")
    assert seen[0].url.raw_path == b"/jobs/..%2Fopenapi.json"


def test_iter_jobs_follows_cursors() -> None:
    pages = {
        None: {"items": [{"id": "a"}], "next_cursor": "c1"},
        "c1": {"items": [{"id": "b"}], "next_cursor": None},
    }

    def reply(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json=pages[request.url.params.get("cursor")])

    with JobschedClient("http://127.0.0.1:8080", transport=httpx.MockTransport(reply)) as client:
        assert [j["id"] for j in client.iter_jobs(page_size=1)] == ["a", "b"]


def test_dev_token_is_found_in_a_parent_folder(tmp_path: Path) -> None:
    (tmp_path / ".jobsched").mkdir()
    (tmp_path / ".jobsched" / "dev-token").write_text("dev-xyz\n")
    nested = tmp_path / "a" / "b"
    nested.mkdir(parents=True)
    assert find_dev_token(nested) == "dev-xyz"


def test_no_dev_token_up_to_the_root_is_none(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Given a data-dir name no folder on this machine has (so no parent of tmp_path can hold one)
    unique = Path(f".jobsched-{tmp_path.name}")
    monkeypatch.setattr(cli_options, "DEFAULT_DATA_DIR", unique)
    nested = tmp_path / "a" / "b"
    nested.mkdir(parents=True)

    # Then the search up to / finds nothing, and an empty token file counts as none
    assert find_dev_token(nested) is None
    (tmp_path / unique).mkdir()
    (tmp_path / unique / "dev-token").write_text("\n")
    assert find_dev_token(nested) is None


def test_system_zone_is_an_iana_name() -> None:
    assert get_zone(system_zone_name()) is not None


def test_custom_domain_is_signed_when_a_region_is_given() -> None:
    seen, transport = recording()
    credentials = Credentials("AKIDEXAMPLE", "secret")
    with JobschedClient(
        "https://jobs.example.com", transport=transport, credentials=credentials, sigv4_region="eu-central-1"
    ) as client:
        client.list_jobs()
    assert "/eu-central-1/execute-api/aws4_request" in seen[0].headers["Authorization"]


@pytest.mark.parametrize(
    ("url", "local"),
    [
        ("http://127.0.0.1:8080", True),
        ("http://localhost:9000", True),
        ("http://[::1]:8080", True),
        ("http://127.9.8.7:8080", True),
        ("https://jobs.example.com", False),
        (GATEWAY, False),
        # names are never resolved: a name that looks like a loopback address is another machine's
        ("http://127.attacker.example:8080", False),
        ("http://127.0.0.1.nip.io:8080", False),
        ("http://localhost.attacker.example", False),
    ],
)
def test_only_local_apis_count_as_loopback(url: str, local: bool) -> None:
    assert is_loopback(url) is local


@pytest.mark.parametrize(
    ("url", "hint"),
    [
        ("http://127.0.0.2:8080", ": is `jobsched local` running?"),
        ("http://localhost:9000", ": is `jobsched local` running?"),
        ("http://[::1]:8080", ": is `jobsched local` running?"),
        ("https://jobs.example.com", " (timed out)"),
    ],
)
def test_unreachable_hints_at_local_mode_only_for_a_local_api(url: str, hint: str) -> None:
    error = ApiUnreachable(url, "timed out")
    assert (error.status, error.code) == (0, "unreachable")
    assert str(error) == f"cannot reach the API at {url}{hint}"


def test_the_cli_reads_the_dev_token_where_local_mode_writes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given local mode started with its default data dir in this folder
    monkeypatch.chdir(tmp_path)
    _, token, generated = prepare_tokens(LocalConfig().data_dir, None)

    # Then the CLI finds that token from here and from a folder below
    nested = tmp_path / "src" / "app"
    nested.mkdir(parents=True)
    assert generated and token.startswith("dev-")
    assert find_dev_token() == token
    assert find_dev_token(nested) == token


def test_the_saved_dev_token_is_never_sent_to_a_remote_api(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a dev token saved by local mode in the current directory
    (tmp_path / ".jobsched").mkdir()
    (tmp_path / ".jobsched" / "dev-token").write_text("dev-secret\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("JOBSCHED_TOKEN", raising=False)
    monkeypatch.delenv("JOBSCHED_SIGV4_REGION", raising=False)
    seen, transport = recording()
    app = typer.Typer()
    register(app)

    # When the CLI calls a local API, a remote one, and one whose name starts like a loopback address
    local = CliRunner().invoke(app, ["jobs", "list", "--json"], obj={"transport": transport})
    remote = CliRunner().invoke(
        app, ["jobs", "list", "--json", "--api", "https://jobs.example.com"], obj={"transport": transport}
    )
    lookalike = CliRunner().invoke(
        app,
        ["jobs", "list", "--json", "--api", "http://127.attacker.example:8080"],
        obj={"transport": transport},
    )

    # Then only the local call carries it
    assert local.exit_code == 0 and remote.exit_code == 0 and lookalike.exit_code == 0
    assert seen[0].headers["Authorization"] == "Bearer dev-secret"
    assert "Authorization" not in seen[1].headers
    assert seen[2].url.host == "127.attacker.example" and "Authorization" not in seen[2].headers


@pytest.mark.parametrize(
    ("flags", "env"),
    [
        (["--sigv4-region", "eu-central-1"], {}),
        ([], {"JOBSCHED_SIGV4_REGION": "eu-central-1"}),
    ],
)
def test_the_cli_signs_a_custom_domain_from_the_flag_or_its_variable(
    flags: list[str], env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given credentials in the standard chain and no token
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "JOBSCHED_TOKEN", "JOBSCHED_SIGV4_REGION"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    seen, transport = recording()
    app = typer.Typer()
    register(app)

    # When the CLI calls an API on a custom domain with the region given
    result = CliRunner().invoke(
        app,
        ["jobs", "list", "--json", "--api", "https://jobs.example.com", *flags],
        obj={"transport": transport},
        env=env,
    )

    # Then the call is SigV4-signed for that region
    assert result.exit_code == 0, result.stderr
    authorization = seen[0].headers["Authorization"]
    assert authorization.startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")
    assert "/eu-central-1/execute-api/aws4_request" in authorization


@pytest.mark.parametrize(
    "args", [("jobs", "list"), ("jobs", "get", "j_00000000000000000000"), ("runs", "--all")]
)
def test_a_success_whose_body_is_not_json_is_one_error_line_not_a_traceback(args: tuple[str, ...]) -> None:
    # --api pointing at another web server (a proxy's or a portal's page, the console's port) answers 200 with
    # HTML: the CLI says so on one line and exits 1
    _, transport = recording(200, text="<html><body>Welcome</body></html>")
    app = typer.Typer()
    register(app)

    result = CliRunner().invoke(
        app, [*args, "--api", "http://127.0.0.1:8080", "--token", "t"], obj={"transport": transport}
    )

    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.exit_code == 1 and not isinstance(result.exception, ValueError), result.exception
    assert len(lines) == 1 and lines[0].startswith("error: 200 "), result.stderr
