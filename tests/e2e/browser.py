"""Headless Chromium for the console's browser tests: Debian's ``chromium`` and ``chromium-driver`` (``make
test`` installs them with apt), driven by Selenium, offline (Selenium Manager never downloads a driver: both
paths are given). A missing binary FAILS the test, saying how to install it: browser tests never skip.

Screenshots go to ``$JOBSCHED_SCREENSHOTS`` when set (``JOBSCHED_SCREENSHOTS=docs/console`` refreshes the
README's), else to the test's temporary folder.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import WebDriverWait

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
WAIT_S = 20.0
DESKTOP = (1280, 800)
PHONE = (390, 844)


def chromium(size: tuple[int, int] = DESKTOP, *, resolve_to_loopback: tuple[str, ...] = ()) -> WebDriver:
    """A headless Chromium window of ``size`` (CSS pixels) in which each name of ``resolve_to_loopback``
    resolves to 127.0.0.1 (``--host-resolver-rules``: a page of another site whose name now points at this
    machine, as after DNS rebinding). Fails the test when the binaries are missing."""
    missing = [str(path) for path in (CHROMIUM, CHROMEDRIVER) if not path.exists()]
    if missing:
        pytest.fail(
            f"browser tests need {' and '.join(missing)}: run `make test` (it installs them) or "
            "`apt-get install chromium chromium-driver`",
            pytrace=False,
        )
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        f"--window-size={size[0]},{size[1]}",
    ):
        options.add_argument(argument)
    if resolve_to_loopback:
        rules = ", ".join(f"MAP {name} 127.0.0.1" for name in resolve_to_loopback)
        options.add_argument(f"--host-resolver-rules={rules}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(str(CHROMEDRIVER)))
    driver.set_window_size(*size)
    return driver


def screenshots(default: Path) -> Path:
    folder = Path(os.environ.get("JOBSCHED_SCREENSHOTS") or default)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def until(
    driver: WebDriver, what: str, condition: Callable[[WebDriver], Any], timeout_s: float = WAIT_S
) -> Any:
    """Wait for ``condition(driver)`` to be truthy (it polls the page; an element the console re-rendered
    meanwhile counts as not yet); fail naming ``what``."""
    return WebDriverWait(
        driver, timeout_s, poll_frequency=0.2, ignored_exceptions=[StaleElementReferenceException]
    ).until(condition, message=f"timed out after {timeout_s:g} s waiting for {what}")


def element(driver: WebDriver, css: str, text: str | None = None) -> WebElement:
    """The first visible element matching ``css`` (and containing ``text``), waited for."""

    def find(d: WebDriver) -> WebElement | None:
        for found in d.find_elements(By.CSS_SELECTOR, css):
            if found.is_displayed() and (text is None or text in found.text):
                return found
        return None

    return until(driver, f"{css!r}" + (f" with {text!r}" if text else ""), find)


def click(driver: WebDriver, css: str, text: str | None = None) -> None:
    """Click the first visible element matching ``css`` (and containing ``text``), found again if a refresh
    of the page replaced it between finding and clicking."""

    def attempt(d: WebDriver) -> bool:
        element(d, css, text).click()
        return True

    until(driver, f"a click on {css!r}", attempt)


def text_of_row(driver: WebDriver, link_text: str) -> str:
    """The text of the table row holding the link ``link_text`` ("" while there is none), read in one step."""
    return str(
        driver.execute_script(
            "const a = [...document.querySelectorAll('#main td a')].find((x) => x.textContent === arguments[0]);"
            "return a ? a.closest('tr').innerText : '';",
            link_text,
        )
    )


def sign_in(driver: WebDriver, base_url: str, token: str) -> None:
    """Open the console with a fresh tab state and give it ``token`` on its sign-in form."""
    driver.get(f"{base_url}/ui/")
    driver.execute_script("sessionStorage.clear()")
    driver.get(f"{base_url}/ui/#/jobs")
    element(driver, "#token").send_keys(token)
    click(driver, "#sign-in")
    element(driver, "h1", "Jobs")


def confirm(driver: WebDriver, reason: str | None = None) -> None:
    """Accept the console's confirmation dialog (typing ``reason`` when it asks for one)."""
    dialog = element(driver, "dialog#confirm")
    if reason is not None:
        dialog.find_element(By.ID, "confirm-reason").send_keys(reason)
    dialog.find_element(By.ID, "confirm-ok").click()  # the dialog is never re-rendered
    until(driver, "the dialog to close", lambda d: not d.find_element(By.ID, "confirm").is_displayed())


def fetch(driver: WebDriver, method: str, url: str, **init: Any) -> tuple[int, str]:
    """``fetch(url, {method, ...init})`` run by the page open in ``driver``: ``(status, body)``, status 0
    when the browser let the script see no answer (a network error, or an opaque ``no-cors`` answer)."""
    result = driver.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "fetch(arguments[0], Object.assign({method: arguments[1]}, arguments[2]))"
        "  .then((r) => r.text().then((t) => done([r.status, t])))"
        "  .catch((e) => done([0, String(e)]));",
        url,
        method,
        init,
    )
    return int(result[0]), str(result[1])


def page_errors(driver: WebDriver) -> list[str]:
    """Script errors the page logged (failed requests the console handles, such as 401 or 404, excluded)."""
    return [
        entry["message"]
        for entry in driver.get_log("browser")
        if entry["level"] == "SEVERE" and entry.get("source") != "network"
    ]
