"""The web console in a real browser (headless Chromium) against ``jobsched local``: the jobs page, a job,
pause, trigger, a run, health, errors as the API words them, another team's view, a phone's width.

One local-mode process with two teams' tokens and one browser serve the module (each start costs seconds);
each test registers its own jobs."""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import Select

from tests.e2e.browser import (
    DESKTOP,
    PHONE,
    chromium,
    click,
    confirm,
    element,
    fetch,
    page_errors,
    screenshots,
    sign_in,
    text_of_row,
    until,
)
from tests.e2e.support import LocalProcess, wait_for
from tests.support.processes import pid_written, process_gone

pytestmark = pytest.mark.e2e

TEAM_A, TEAM_B = "console-team-a-token", "console-team-b-token"
_names = itertools.count(1)


@pytest.fixture(scope="module")
def local(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalProcess]:
    """``jobsched local --tokens`` with teams a and b; its HTTP client is team a's."""
    folder = tmp_path_factory.mktemp("console")
    tokens = folder / "tokens.json"
    tokens.write_text(
        json.dumps({TEAM_A: {"owner": "team-a", "shell": True}, TEAM_B: "team-b"})
    )  # a runs shell jobs
    data = folder / "data"
    data.mkdir()
    (data / "dev-token").write_text(TEAM_A)  # LocalProcess's client reads its token here
    process = LocalProcess(data, "--tokens", str(tokens))
    yield process
    process.stop()


@pytest.fixture(scope="module")
def driver() -> Iterator[WebDriver]:
    browser = chromium(DESKTOP)
    yield browser
    browser.quit()


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    return screenshots(tmp_path)


@pytest.fixture
def desktop(driver: WebDriver) -> WebDriver:
    driver.set_window_size(*DESKTOP)
    return driver


def create(local: LocalProcess, **fields: Any) -> dict[str, Any]:
    """A job of team a's (``schedule=None``: none, for a job that runs after another)."""
    body = {"name": f"console-{next(_names)}", "schedule": "daily 02:00", **fields}
    body = {key: value for key, value in body.items() if value is not None}
    if "target" not in body:
        body.setdefault("command", "echo")
    reply = local.http.post("/jobs", json=body)
    assert reply.status_code == 201, reply.text
    return dict(reply.json())


def trigger(local: LocalProcess, job: dict[str, Any]) -> dict[str, Any]:
    """The run of ``job`` triggered now (``POST /jobs/{id}/trigger``, answered 202)."""
    reply = local.http.post(f"/jobs/{job['id']}/trigger")
    assert reply.status_code == 202, reply.text
    return dict(reply.json())


def runs_of(local: LocalProcess, job_id: str) -> list[dict[str, Any]]:
    reply = local.http.get(f"/jobs/{job_id}/runs")
    assert reply.status_code == 200, reply.text
    return list(reply.json()["items"])


def row_of(driver: WebDriver, name: str) -> str:
    """The text of the jobs table's row for job ``name``, once it is listed."""
    return str(until(driver, f"the row of {name}", lambda d: text_of_row(d, name)))


def finished(local: LocalProcess, job_id: str) -> list[dict[str, Any]]:
    return [r for r in runs_of(local, job_id) if r["status"] in ("succeeded", "dead")]


def test_jobs_page_shows_each_job_with_its_schedule_in_words_and_filters(
    local: LocalProcess, desktop: WebDriver, shots: Path
) -> None:
    # Given jobs of team a: a nightly one, a frequent one, a paused one, and one whose run died
    nightly = create(local, name="nightly-billing", schedule="0 2 * * *", timezone="Europe/Berlin")
    often = create(local, name="heartbeat", schedule="*/30 * * * * *")
    create(local, name="weekly-report", schedule="0 9 * * 1-5", timezone="America/New_York", paused=True)
    broken = create(local, name="broken-export", command="fail", retry={"max_attempts": 1})
    assert local.http.post(f"/jobs/{broken['id']}/trigger").status_code in (200, 201, 202)
    wait_for("the broken job's run to die", lambda: finished(local, broken["id"]), 45)
    wait_for("a run of the frequent job", lambda: finished(local, often["id"]), 45)

    # When team a opens the console
    sign_in(desktop, local.url, TEAM_A)

    # Then each job is listed with its schedule as written and in words, its next fire and its state
    row = row_of(desktop, nightly["name"])
    assert "0 2 * * *" in row and "every day at 02:00, Europe/Berlin" in row and "active" in row
    assert nightly["next_run_at"][:10] in row
    assert "every 30 seconds" in row_of(desktop, often["name"])
    assert "paused" in row_of(desktop, "weekly-report") and "\u2013 (paused)" in row_of(
        desktop, "weekly-report"
    )
    # with the last run's status, the success rate and the start lateness over the runs
    until(desktop, "the frequent job's last run", lambda d: "succeeded" in row_of(d, often["name"]))
    assert "100%" in row_of(desktop, often["name"])
    assert re.search(r"\d+\.\d\ds / \d+\.\d\ds", row_of(desktop, often["name"]))
    broken_row = row_of(desktop, broken["name"])
    assert "dead" in broken_row and "0%" in broken_row
    desktop.save_screenshot(str(shots / "jobs.png"))

    # When the list is filtered by state, then by name, only the matching jobs are left
    Select(element(desktop, "#filter-state")).select_by_value("dead")
    until(desktop, "the state filter", lambda d: not text_of_row(d, often["name"]))
    assert row_of(desktop, broken["name"])
    Select(element(desktop, "#filter-state")).select_by_value("paused")
    until(desktop, "the paused filter", lambda d: not text_of_row(d, broken["name"]))
    assert row_of(desktop, "weekly-report")
    Select(element(desktop, "#filter-state")).select_by_value("all")
    element(desktop, "#filter-name").send_keys("billing")
    until(desktop, "the name filter", lambda d: not text_of_row(d, often["name"]))
    assert row_of(desktop, nightly["name"])
    assert page_errors(desktop) == []


def test_jobs_page_shows_labels_and_filters_by_them(local: LocalProcess, desktop: WebDriver) -> None:
    # Given labelled jobs and one without labels
    gold = create(local, labels={"team": "billing", "tier": "gold"})
    silver = create(local, labels={"team": "billing", "tier": "silver"})
    plain = create(local)
    sign_in(desktop, local.url, TEAM_A)

    # Then each job's row shows its labels
    assert "team=billing" in row_of(desktop, gold["name"]) and "tier=gold" in row_of(desktop, gold["name"])
    row_of(desktop, plain["name"])

    # When the list is filtered by labels, only the jobs carrying every one are left
    element(desktop, "#filter-label").send_keys("team=billing")
    until(desktop, "the label filter", lambda d: not text_of_row(d, plain["name"]))
    assert row_of(desktop, silver["name"])
    element(desktop, "#filter-label").send_keys(" tier=gold")
    until(desktop, "the second label", lambda d: not text_of_row(d, silver["name"]))
    assert row_of(desktop, gold["name"])

    # and the job's own page shows its labels
    click(desktop, "#jobs a", gold["name"])
    element(desktop, "#labels", "tier=gold")
    assert page_errors(desktop) == []


def test_a_job_paused_and_triggered_from_its_page(
    local: LocalProcess, desktop: WebDriver, shots: Path
) -> None:
    job = create(local)
    sign_in(desktop, local.url, TEAM_A)

    # When the job is opened from the jobs page
    click(desktop, "#jobs a", job["name"])
    element(desktop, "h1", job["name"])
    assert "every day at 02:00, UTC" in desktop.find_element(By.ID, "main").text

    # and paused with a reason, after the confirmation
    click(desktop, "#pause")
    confirm(desktop, reason="ledger migration")

    # Then the page shows it paused, by whom and why (and the API agrees), with Resume instead of Pause
    element(desktop, "h1 .status.paused")
    element(desktop, "#resume")
    element(desktop, "#paused-reason", "ledger migration")
    stored = local.http.get(f"/jobs/{job['id']}").json()
    assert stored["paused"] is True and stored["paused_reason"] == "ledger migration"
    assert stored["paused_by"] in desktop.find_element(By.ID, "paused-reason").text
    # and its events list the pause with the reason, newest first
    element(desktop, "#main", "ledger migration")
    assert [e["kind"] for e in local.http.get(f"/jobs/{job['id']}/events").json()["items"]] == [
        "paused",
        "created",
    ]

    # When it is triggered, the new run appears in its runs table and timeline, and finishes
    click(desktop, "#trigger")
    confirm(desktop)
    element(desktop, "#main table", "manual")
    until(
        desktop,
        "the run to succeed",
        lambda d: d.find_elements(By.CSS_SELECTOR, "#main table .status.succeeded"),
        45,
    )
    assert len(desktop.find_elements(By.CSS_SELECTOR, "#timeline .mark.succeeded")) == 1
    (run,) = runs_of(local, job["id"])
    assert run["kind"] == "manual"
    desktop.save_screenshot(str(shots / "job.png"))

    # When the run is opened, its page shows the run's fields
    click(desktop, "#main table a", run["scheduled_for"])
    element(desktop, "h1", "Run")
    text = desktop.find_element(By.ID, "main").text
    assert run["id"] in text and "manual" in text and "succeeded" in text
    desktop.save_screenshot(str(shots / "run.png"))
    assert page_errors(desktop) == []


def test_a_jobs_page_draws_its_chain_with_links_up_and_down(local: LocalProcess, desktop: WebDriver) -> None:
    # Given three jobs in a chain (design §2.1)
    extract = create(local)
    load = create(local, schedule=None, after={"job": extract["id"]})
    report = create(local, schedule=None, after={"job": load["id"], "on": ["any"]})
    sign_in(desktop, local.url, TEAM_A)

    # When the middle job's page is opened, it shows upstream -> it -> downstream, and runs after instead of a
    # schedule
    click(desktop, "#jobs a", load["name"])
    element(desktop, "h1", load["name"])
    chain = element(desktop, "#chain", load["name"])
    assert chain.text.split("\n")[-1] == f"{extract['name']} → {load['name']} → {report['name']}"
    assert f"Runs after\n{extract['name']}\non succeeded" in desktop.find_element(By.ID, "main").text

    # Then its links lead along the chain
    click(desktop, "#chain .chain-downstream a", report["name"])
    element(desktop, "h1", report["name"])
    element(desktop, "#chain .chain-upstream a", load["name"])
    click(desktop, "#chain .chain-upstream a", load["name"])
    click(desktop, "#chain .chain-upstream a", extract["name"])
    element(desktop, "h1", extract["name"])
    assert element(desktop, "#chain").text.split("\n")[-1] == f"{extract['name']} → {load['name']}"
    assert page_errors(desktop) == []


def test_a_dead_runs_output_is_read_then_the_run_is_retried_to_success(
    local: LocalProcess, desktop: WebDriver, tmp_path: Path, shots: Path
) -> None:
    # Given a job whose first try finds no data and says so on stderr, with one attempt: its run dies
    marker = tmp_path / "data-ready"
    command = f'test -f {marker} || {{ echo "no data for $JOBSCHED_SCHEDULED_FOR yet" >&2; exit 3; }}'
    job = create(local, target={"type": "shell", "command": command}, retry={"max_attempts": 1})
    run = trigger(local, job)
    wait_for("the run to die", lambda: [r for r in finished(local, job["id"]) if r["status"] == "dead"], 45)

    # When its owner opens the run from the job's page
    sign_in(desktop, local.url, TEAM_A)
    click(desktop, "#jobs a", job["name"])
    click(desktop, "#main table a", run["scheduled_for"])
    element(desktop, "h1 .status.dead")
    # Then the tries table shows the failed try with its error and the command's own words
    tries = element(desktop, "#main table", "no data for")
    assert "exit status 3" in tries.text and "stderr: no data for" in tries.text
    desktop.save_screenshot(str(shots / "run-dead.png"))

    # When the data arrives and the run is retried from its page, after the confirmation
    marker.write_text("ok")
    click(desktop, "#retry")
    confirm(desktop)
    # Then the same run (same id and scheduled_for) runs again and succeeds; its earlier try stays in the history
    until(
        desktop,
        "the re-run to succeed",
        lambda d: d.find_elements(By.CSS_SELECTOR, "h1 .status.succeeded"),
        45,
    )
    element(desktop, "#main", "Earlier tries")
    assert "no data for" in desktop.find_element(By.ID, "main").text  # the dead try's output, still shown
    assert "[object Object]" not in desktop.find_element(By.ID, "main").text  # a try with no error shows none
    desktop.save_screenshot(str(shots / "run-retried.png"))
    detail = local.http.get(f"/jobs/{job['id']}/runs/{run['id']}").json()
    assert detail["status"] == "succeeded" and detail["reruns"] == 1
    assert [a["attempt"] for a in detail["attempts"]] == [1] and detail["attempts"][0]["error"] is None
    assert "no data for" in detail["previous_attempts"][0]["output"]
    assert [r["id"] for r in runs_of(local, job["id"])] == [run["id"]]
    kinds = [e["kind"] for e in local.http.get(f"/jobs/{job['id']}/events").json()["items"]]
    assert kinds[:2] == ["run_retried", "triggered"]
    assert page_errors(desktop) == []


def test_a_running_run_is_cancelled_from_its_page_after_confirmation(
    local: LocalProcess, desktop: WebDriver, tmp_path: Path, shots: Path
) -> None:
    # Given a shell job whose triggered run is running a long command
    child = tmp_path / "child.pid"
    command = f"sleep 300 & echo $! > {child}; wait"
    job = create(local, target={"type": "shell", "command": command}, cancel_grace_s=1)
    run = trigger(local, job)
    wait_for("the command to start", lambda: pid_written(child), 45)

    # When its owner opens the run and dismisses the confirmation, nothing happens
    sign_in(desktop, local.url, TEAM_A)
    desktop.get(f"{local.url}/ui/#/jobs/{job['id']}/runs/{run['id']}")
    element(desktop, "h1 .status.running")
    click(desktop, "#cancel-run")
    dialog = element(desktop, "dialog#confirm")
    assert "may still finish" in dialog.text
    dialog.find_element(By.CSS_SELECTOR, "button[value=cancel]").click()
    until(desktop, "the dialog to close", lambda d: not d.find_element(By.ID, "confirm").is_displayed())
    assert local.http.get(f"/jobs/{job['id']}/runs/{run['id']}").json()["status"] == "running"

    # When it is cancelled with a reason, after the confirmation
    click(desktop, "#cancel-run")
    confirm(desktop, reason="stuck on a lock")

    # Then the page shows it cancelled, by whom and why, without the button; the command is stopped
    element(desktop, "h1 .status.cancelled")
    element(desktop, "#main", "stuck on a lock")
    assert not desktop.find_elements(By.ID, "cancel-run")
    assert process_gone(int(child.read_text()))
    detail = local.http.get(f"/jobs/{job['id']}/runs/{run['id']}").json()
    assert detail["status"] == "cancelled" and detail["cancel_reason"] == "stuck on a lock"
    assert detail["cancelled_by"] in desktop.find_element(By.ID, "main").text
    desktop.save_screenshot(str(shots / "run-cancelled.png"))
    # and the job's page shows it in the cancelled colour, named in the legend
    click(desktop, "#main a", job["name"])
    element(desktop, "#timeline .mark.cancelled")
    element(desktop, ".legend", "cancelled")
    assert page_errors(desktop) == []


def test_the_failures_view_lists_dead_runs_across_jobs_and_leads_to_their_page(
    local: LocalProcess, desktop: WebDriver
) -> None:
    # Given a job whose two tries failed: its run is dead
    broken = create(local, command="fail", retry={"max_attempts": 2, "backoff_s": 0})
    run = trigger(local, broken)
    wait_for("the run to die", lambda: finished(local, broken["id"]), 45)

    # When the team opens the Failures view
    sign_in(desktop, local.url, TEAM_A)
    click(desktop, "#nav a[data-view=failures]")

    # Then the dead run is listed with its job's name, the lateness of its first and of its last try, and its
    # link opens the run's page
    row = element(desktop, "#main table", broken["name"])
    assert "dead" in row.text and "(last try " in row.text
    click(desktop, "#main table a", run["scheduled_for"])
    element(desktop, "h1 .status.dead")
    assert run["id"] in desktop.find_element(By.ID, "main").text
    assert page_errors(desktop) == []


def test_a_window_is_backfilled_from_the_jobs_page(local: LocalProcess, desktop: WebDriver) -> None:
    # Given an hourly job created now
    job = create(local, schedule="0 * * * *")
    top = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    start, end = (top - timedelta(hours=3)).isoformat(), (top - timedelta(hours=1)).isoformat()
    sign_in(desktop, local.url, TEAM_A)
    click(desktop, "#jobs a", job["name"])

    # When the two hours before the last are backfilled from its page, after the confirmation
    element(desktop, "#backfill-start").send_keys(start)
    element(desktop, "#backfill-end").send_keys(end)
    click(desktop, "#backfill")
    confirm(desktop)

    # Then the two fires run, as backfill runs, and succeed; a second backfill of the window creates nothing
    wait_for("the backfilled runs to succeed", lambda: len(finished(local, job["id"])) == 2, 45)
    runs = runs_of(local, job["id"])
    assert sorted(r["scheduled_for"] for r in runs) == [
        (top - timedelta(hours=h)).isoformat().replace("+00:00", "Z") for h in (3, 2)
    ]
    assert {(r["kind"], r["status"]) for r in runs} == {("backfill", "succeeded")}
    again = local.http.post(f"/jobs/{job['id']}/backfill", json={"start": start, "end": end})
    assert again.status_code == 200 and again.json()["count"] == 0
    assert page_errors(desktop) == []


def test_resume_and_delete_ask_first_and_cancel_does_nothing(local: LocalProcess, desktop: WebDriver) -> None:
    job = create(local, paused=True)
    sign_in(desktop, local.url, TEAM_A)
    desktop.get(f"{local.url}/ui/#/jobs/{job['id']}")

    # A cancelled delete leaves the job
    click(desktop, "#delete")
    click(desktop, "dialog#confirm button[value=cancel]")
    until(desktop, "the dialog to close", lambda d: not d.find_element(By.ID, "confirm").is_displayed())
    assert local.http.get(f"/jobs/{job['id']}").status_code == 200

    # Resume, confirmed, resumes it
    click(desktop, "#resume")
    confirm(desktop)
    element(desktop, "h1 .status.active")
    assert local.http.get(f"/jobs/{job['id']}").json()["paused"] is False

    # Delete, confirmed, deletes it and goes back to the jobs page
    click(desktop, "#delete")
    confirm(desktop)
    element(desktop, "h1", "Jobs")
    assert local.http.get(f"/jobs/{job['id']}").status_code == 404


def test_a_jobs_priority_is_shown_and_changed_from_its_page(local: LocalProcess, desktop: WebDriver) -> None:
    # Given a job of normal priority, on its page
    job = create(local)
    sign_in(desktop, local.url, TEAM_A)
    desktop.get(f"{local.url}/ui/#/jobs/{job['id']}")
    element(desktop, "#priority", "normal")

    # When high is chosen and set, after the confirmation
    Select(element(desktop, "#priority-select")).select_by_value("high")
    click(desktop, "#set-priority")
    confirm(desktop)

    # Then the job is high, on its page and in the API
    element(desktop, "#priority", "high")
    assert local.http.get(f"/jobs/{job['id']}").json()["priority"] == "high"
    assert page_errors(desktop) == []


def test_api_errors_show_as_the_api_words_them(local: LocalProcess, desktop: WebDriver) -> None:
    job = create(local)
    sign_in(desktop, local.url, TEAM_A)
    desktop.get(f"{local.url}/ui/#/jobs/{job['id']}")
    element(desktop, "h1", job["name"])

    # When the job is deleted elsewhere, the next refresh shows the API's 404 in its words
    assert local.http.delete(f"/jobs/{job['id']}").status_code == 204
    api_error = local.http.get(f"/jobs/{job['id']}").json()["error"]
    shown = element(desktop, "#error", api_error["message"]).text
    assert shown == f"404 {api_error['code']}: {api_error['message']}"


def test_a_refused_token_asks_again(local: LocalProcess, desktop: WebDriver) -> None:
    desktop.get(f"{local.url}/ui/")
    desktop.execute_script("sessionStorage.clear()")
    desktop.get(f"{local.url}/ui/#/jobs")
    element(desktop, "#token").send_keys("not-a-token")
    click(desktop, "#sign-in")

    message = element(desktop, "form.login p", "refused").text
    assert "The API refused the token" in message
    assert desktop.execute_script("return sessionStorage.getItem('jobsched.token')") == "not-a-token"


def test_another_team_sees_none_of_it(local: LocalProcess, desktop: WebDriver) -> None:
    job = create(local)

    # When team b signs in, its jobs page lists nothing of team a
    sign_in(desktop, local.url, TEAM_B)
    element(desktop, "#jobs p", "No jobs yet")
    assert job["name"] not in desktop.find_element(By.ID, "main").text

    # and team a's job, opened by its address, is the API's 404
    desktop.get(f"{local.url}/ui/#/jobs/{job['id']}")
    shown = element(desktop, "#error", "404").text
    assert "not_found" in shown
    assert job["name"] not in desktop.find_element(By.ID, "main").text


def test_health_counts_the_last_hours_runs(local: LocalProcess, desktop: WebDriver, shots: Path) -> None:
    job = create(local)
    assert local.http.post(f"/jobs/{job['id']}/trigger").status_code in (200, 201, 202)
    wait_for(
        "the triggered run", lambda: any(r["status"] == "succeeded" for r in runs_of(local, job["id"])), 45
    )
    sign_in(desktop, local.url, TEAM_A)

    desktop.get(f"{local.url}/ui/#/health")

    count = until(desktop, "a run counted", lambda d: int(d.find_element(By.ID, "health-runs").text or 0))
    assert count >= 1
    assert desktop.find_elements(By.CSS_SELECTOR, "#health-bars .bar span")  # a bar for that minute
    assert "s /" in desktop.find_element(By.ID, "health-start").text
    # the start lateness of the caller's runs by their jobs' priority, and the scheduler's figures (GET /health)
    until(
        desktop, "lateness by priority", lambda d: "normal" in d.find_element(By.ID, "health-priorities").text
    )
    assert "Latest minute of dispatches" in desktop.find_element(By.ID, "health-window").text
    assert "Backlog" in desktop.find_element(By.ID, "health-owners").text  # rows: the test below
    desktop.save_screenshot(str(shots / "health.png"))


def test_health_rows_name_the_caller_among_the_top_owners_and_no_other_owner(
    local: LocalProcess, desktop: WebDriver
) -> None:
    if not desktop.current_url.startswith(f"{local.url}/ui/"):
        desktop.get(f"{local.url}/ui/")
    line = {"priority": "normal", "runs": 3, "p50_ms": 1500, "p99_ms": 30000, "max_ms": 31000}
    health = {
        "top_owners": [
            {"rank": 1, "owner": None, "you": False, "backlog": 900000, "by_priority": [line]},
            {
                "rank": 2,
                "owner": "team-a",
                "you": True,
                "backlog": 150,
                "by_priority": [{**line, "priority": "high"}, line],
            },
            {"rank": 3, "owner": None, "you": False, "backlog": 120, "by_priority": []},
        ],
        "other": [{**line, "priority": "low"}],
    }
    rows = desktop.execute_async_script(
        "const done = arguments[1]; import('./describe.js').then((m) => done(m.healthOwnerRows(arguments[0])));",
        health,
    )
    assert rows == [
        ["#1 another owner", "900000", "normal", "3", "1.50s", "30s", "31s"],
        ["#2 you (team-a)", "150", "high", "3", "1.50s", "30s", "31s"],
        ["", "", "normal", "3", "1.50s", "30s", "31s"],
        ["#3 another owner", "120", "\u2013", "0", "\u2013", "\u2013", "\u2013"],  # none dispatched: kept
        ["every other owner", "\u2013", "low", "3", "1.50s", "30s", "31s"],
    ]
    by_priority = desktop.execute_async_script(
        "const done = arguments[2];"
        "import('./describe.js').then((m) => done(m.latenessByPriority(arguments[0], arguments[1])));",
        [
            {"job_id": "j_a", "lateness_ms": 10},
            {"job_id": "j_b", "lateness_ms": 4000},
            {"job_id": "j_gone", "lateness_ms": 20},
            {"job_id": "j_a", "lateness_ms": None},
        ],
        [{"id": "j_a", "priority": "high"}, {"id": "j_b", "priority": "low"}],
    )
    assert by_priority == [
        {"priority": "high", "runs": 1, "p50": 10, "p99": 10},
        {"priority": "normal", "runs": 1, "p50": 20, "p99": 20},
        {"priority": "low", "runs": 1, "p50": 4000, "p99": 4000},
    ]


def test_usable_at_a_phones_width(local: LocalProcess, driver: WebDriver, shots: Path) -> None:
    create(local)
    driver.set_window_size(*PHONE)
    sign_in(driver, local.url, TEAM_A)
    element(driver, "#jobs a")

    # Nothing is wider than the screen: the table turns into one card per job
    overflow = driver.execute_script("return document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 0
    assert not driver.find_element(By.CSS_SELECTOR, "#jobs thead").is_displayed()
    driver.save_screenshot(str(shots / "phone.png"))


@pytest.mark.parametrize(
    ("schedule", "zone", "words"),
    [
        ("0 2 * * *", "Europe/Berlin", "every day at 02:00, Europe/Berlin"),
        ("daily 02:00:30", "UTC", "every day at 02:00:30, UTC"),
        ("*/30 * * * * *", "UTC", "every 30 seconds"),
        ("every 10 seconds", "UTC", "every 10 seconds"),
        ("rate(1 hour)", "UTC", "every hour"),
        ("0 9 * * 1-5", "America/New_York", "on weekdays at 09:00, America/New_York"),
        ("@monthly", "UTC", "on day 1 of the month at 00:00, UTC"),
        ("at 2026-12-04T18:00:00", "Asia/Tokyo", "once, at 2026-12-04T18:00:00, Asia/Tokyo"),
        ("0 9 15W * *", "UTC", None),  # no words rather than wrong ones
        ("cron(0 12 * * ? *)", "UTC", None),
    ],
)
def test_schedule_in_words(
    local: LocalProcess, desktop: WebDriver, schedule: str, zone: str, words: str | None
) -> None:
    if not desktop.current_url.startswith(f"{local.url}/ui/"):
        desktop.get(f"{local.url}/ui/")
    said = desktop.execute_async_script(
        "const done = arguments[2];"
        "import('./describe.js').then((m) => done(m.describeSchedule(arguments[0], arguments[1])));",
        schedule,
        zone,
    )
    assert said == words


def test_local_mode_prints_the_consoles_address(local: LocalProcess) -> None:
    assert f"console: {local.url}/ui/  (the web console; it asks for a token)" in local.lines


def test_views_of_later_routes_stay_hidden_until_the_api_lists_them(
    local: LocalProcess, desktop: WebDriver
) -> None:
    # Today's API document has every operability route: runs across jobs (the Failures view), one run with its
    # tries and its re-run, backfill, the next fires, the events and the pause reason
    sign_in(desktop, local.url, TEAM_A)
    assert element(desktop, "#nav a[data-view=jobs]").is_displayed()
    assert element(desktop, "#nav a[data-view=failures]").is_displayed()
    today = desktop.execute_async_script(
        "const done = arguments[0]; import('./api.js').then((m) => m.features()).then(done);"
    )
    assert today == {
        "allRuns": True,
        "runDetail": True,
        "retry": True,
        "cancel": True,
        "backfill": True,
        "fires": True,
        "events": True,
        "pauseReason": True,
        "health": True,
    }

    # A document listing them (the paths and names of the operability issue) turns each one on
    later = desktop.execute_async_script(
        """
        const done = arguments[0];
        const op = { responses: {} };
        const doc = { paths: {
          "/runs": { get: op },
          "/jobs/{id}/runs/{run_id}": { get: op },
          "/jobs/{id}/runs/{run_id}/retry": { post: op },
          "/jobs/{id}/runs/{run_id}/cancel": { post: op },
          "/jobs/{id}/backfill": { post: op },
          "/jobs/{id}/fires": { get: op },
          "/jobs/{id}/events": { get: op },
          "/health": { get: op },
          "/jobs/{id}/pause": { post: { requestBody: {}, responses: {} } },
        } };
        const real = window.fetch;
        window.fetch = async () => new Response(JSON.stringify(doc), { status: 200 });
        import('./api.js').then((m) => m.features()).then((f) => { window.fetch = real; done(f); });
        """
    )
    assert later == dict.fromkeys(today, True)


def test_a_page_of_a_rebound_name_gets_nothing_from_local_mode(local: LocalProcess) -> None:
    # Given a browser in which rebind.example now resolves to 127.0.0.1 (DNS rebinding)
    driver = chromium(resolve_to_loopback=("rebind.example",))
    try:
        # When it loads local mode's console under that name and calls the API as its own origin
        driver.get(f"http://rebind.example:{local.port}/ui/")
        page = driver.find_element(By.TAG_NAME, "body").text
        document = fetch(driver, "GET", "/openapi.json")
        listed = fetch(driver, "GET", "/jobs", headers={"Authorization": f"Bearer {TEAM_A}"})
        # and the same browser opens the console on 127.0.0.1
        sign_in(driver, local.url, TEAM_A)
    finally:
        driver.quit()

    # Then under the foreign name local mode answers nothing but its refusal
    assert page.startswith("421 Misdirected Request"), page
    assert document[0] == 421 and listed[0] == 421
    assert "openapi" not in document[1] and "items" not in listed[1]
