"""``jobsched ui`` against a deployment that wants SigV4: local mode behind a test double of API Gateway's IAM
auth that recomputes each request's signature with botocore from fixed keys and compares. The console's
calls get through signed, the browser never holds a credential, and a wrong signature is refused."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from selenium.webdriver.common.by import By

from jobsched.local.server import ApiServer
from tests.e2e.browser import chromium, element, fetch, text_of_row, until
from tests.e2e.support import LocalProcess, free_port, python_process
from tests.support.iam_gateway import KEYS, REGION, IamGateway

pytestmark = pytest.mark.e2e


@dataclass
class Stack:
    local: LocalProcess
    gateway: IamGateway
    gateway_url: str
    ui_url: str


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """Local mode, the IAM double in front of it, and ``jobsched ui --api <double> --sigv4-region`` as a
    process with fixed AWS keys in its environment (and no shared config or instance role to find)."""
    folder = tmp_path_factory.mktemp("sigv4")
    local = LocalProcess(folder / "data")
    gateway = IamGateway(local.url, local.token)
    server = ApiServer(gateway, "127.0.0.1", 0)
    server.start()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "JOBSCHED_"))}
    env |= {
        "AWS_ACCESS_KEY_ID": KEYS.access_key,
        "AWS_SECRET_ACCESS_KEY": KEYS.secret_key,
        "AWS_CONFIG_FILE": str(folder / "none"),
        "AWS_SHARED_CREDENTIALS_FILE": str(folder / "none"),
        "AWS_EC2_METADATA_DISABLED": "true",
    }
    port = free_port()
    ui = python_process(
        "-c",
        "from jobsched.cli import main; main()",
        *("ui", "--api", server.url, "--sigv4-region", REGION, "--port", str(port)),
        env=env,
        cwd=folder,
    )
    assert ui.stdout is not None
    banner = ui.stdout.readline()
    try:
        assert f"console on http://127.0.0.1:{port}/ui/" in banner, banner
        yield Stack(local, gateway, server.url, f"http://127.0.0.1:{port}")
    finally:
        ui.terminate()
        ui.wait(timeout=10)
        server.stop()
        local.stop()


def test_the_consoles_calls_get_through_signed(stack: Stack) -> None:
    console = {"Origin": stack.ui_url, "X-Jobsched-Console": "1"}
    with httpx.Client(base_url=stack.ui_url, headers=console, timeout=10) as browser:
        # the calls the console makes, on its own origin, with no credential of its own
        assert browser.get("/openapi.json").status_code == 200
        created = browser.post("/jobs", json={"name": "via-ui", "schedule": "daily 02:00", "command": "echo"})
        assert created.status_code == 201, created.text
        job_id = created.json()["id"]
        triggered = browser.post(f"/jobs/{job_id}/trigger", headers={"Idempotency-Key": "ui-1"})
        assert triggered.status_code in (200, 201, 202), triggered.text
        listed = browser.get("/jobs", params={"limit": "100"})
        runs = browser.get(f"/jobs/{job_id}/runs", params={"limit": "10"})

    assert [j["name"] for j in listed.json()["items"]] == ["via-ui"]
    assert [r["id"] for r in runs.json()["items"]] == [triggered.json()["id"]]
    # every call reached local mode through the signature check, none was refused
    assert stack.gateway.refused == []
    assert {
        "GET /openapi.json",
        "POST /jobs",
        f"POST /jobs/{job_id}/trigger",
        "GET /jobs",
        f"GET /jobs/{job_id}/runs",
    } <= set(stack.gateway.verified)


def test_the_double_refuses_a_wrong_signature(stack: Stack) -> None:
    # Given a call to the double signed with the right key id but another secret, and one unsigned
    wrong = AWSRequest(method="GET", url=f"{stack.gateway_url}/jobs")
    SigV4Auth(Credentials(KEYS.access_key, "not-the-secret"), "execute-api", REGION).add_auth(wrong)

    bad = httpx.get(f"{stack.gateway_url}/jobs", headers=dict(wrong.headers.items()))
    unsigned = httpx.get(f"{stack.gateway_url}/jobs")

    # Then both are refused as API Gateway refuses them, and neither reached local mode
    assert bad.status_code == 403 and unsigned.status_code == 403
    assert stack.gateway.refused[-2:] == [
        "GET /jobs signature mismatch",
        "GET /jobs no SigV4 Authorization header",
    ]
    stack.gateway.refused.clear()


def test_the_console_opens_through_ui_without_a_token(stack: Stack, tmp_path: Path) -> None:
    stack.local.http.post(
        "/jobs", json={"name": "via-ui-browser", "schedule": "every 1 hour", "command": "echo"}
    )
    driver = chromium()
    try:
        driver.get(f"{stack.ui_url}/ui/")
        # the jobs page, not the sign-in form: the proxy signs every call
        element(driver, "h1", "Jobs")
        row = until(driver, "the job's row", lambda d: text_of_row(d, "via-ui-browser"))
        assert "every hour" in row
        assert driver.find_elements(By.ID, "token") == []
    finally:
        driver.quit()
    assert stack.gateway.refused == []


def test_a_page_of_a_rebound_name_gets_nothing_from_jobsched_ui(stack: Stack) -> None:
    # Given a browser in which rebind.example now resolves to 127.0.0.1 (DNS rebinding: the page came from
    # the attacker's server under that name, and is now same-origin with the proxy's port)
    port = httpx.URL(stack.ui_url).port
    driver = chromium(resolve_to_loopback=("rebind.example",))
    try:
        # When it loads the console under that name, then reads and writes the API as its own origin
        driver.get(f"http://rebind.example:{port}/ui/")
        page = driver.find_element(By.TAG_NAME, "body").text
        read = fetch(driver, "GET", "/jobs")
        created = fetch(
            driver,
            "POST",
            "/jobs",
            headers={"Content-Type": "application/json", "X-Jobsched-Console": "1"},
            body=json.dumps({"name": "rebound", "schedule": "daily 02:00", "command": "id"}),
        )
        # and the same browser opens the console on 127.0.0.1
        driver.get(f"{stack.ui_url}/ui/")
        element(driver, "h1", "Jobs")
    finally:
        driver.quit()

    # Then under the foreign name the proxy answers nothing but its refusal, and forwards nothing
    assert page.startswith("421 Misdirected Request"), page
    assert read[0] == 421 and created[0] == 421
    assert "rebound" not in [job["name"] for job in stack.local.http.get("/jobs").json()["items"]]
    assert stack.gateway.refused == []


def test_a_form_of_another_site_changes_nothing_through_jobsched_ui(stack: Stack) -> None:
    # Given a paused job, and a page of another site (evil.example, another port) with a form aimed at
    # the proxy's resume route
    job = stack.local.http.post(
        "/jobs", json={"name": "cross-site-target", "schedule": "daily 02:00", "command": "echo"}
    ).json()
    paused = stack.local.http.post(f"/jobs/{job['id']}/pause")
    assert paused.status_code == 200, paused.text
    # (a form without fields: its POST has an empty body, which every route takes)
    form = f'<form id="f" method="post" action="{stack.ui_url}/jobs/{job["id"]}/resume"></form>'.encode()

    def evil_site(environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        start_response("200 OK", [("Content-Type", "text/html"), ("Content-Length", str(len(form)))])
        return [form]

    evil = ApiServer(evil_site, "127.0.0.1", 0, accept_hosts=("evil.example",))
    evil.start()
    driver = chromium(resolve_to_loopback=("evil.example",))
    try:
        driver.get(f"http://evil.example:{evil.port}/")
        # When its script sends a simple POST (no preflight) to trigger the job, then one with the
        # console's header (which needs a preflight), and then it submits its form
        simple = fetch(driver, "POST", f"{stack.ui_url}/jobs/{job['id']}/trigger", mode="no-cors")
        with_header = fetch(
            driver, "POST", f"{stack.ui_url}/jobs/{job['id']}/trigger", headers={"X-Jobsched-Console": "1"}
        )
        driver.find_element(By.ID, "f").submit()
        until(driver, "the form's answer", lambda d: d.current_url.startswith(stack.ui_url))
        answer = driver.find_element(By.TAG_NAME, "body").text
    finally:
        driver.quit()
        evil.stop()

    # Then the proxy refused each (the script saw no answer) and the job is unchanged: paused, never run
    assert simple[0] == 0 and with_header[0] == 0
    assert json.loads(answer)["error"]["code"] == "forbidden", answer
    after = stack.local.http.get(f"/jobs/{job['id']}").json()
    assert after["paused"] is True
    assert stack.local.http.get(f"/jobs/{job['id']}/runs").json()["items"] == []
    assert not [line for line in stack.gateway.verified if line.startswith(f"POST /jobs/{job['id']}/")]
