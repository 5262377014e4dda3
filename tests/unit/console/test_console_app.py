"""The console's WSGI app: its files at /ui/, nothing else of the package, every other path to the API."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from jobsched.console import CONSOLE_DIR, ConsoleApp, console_files


def api_app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
    """Stands in for the API's WSGI app: says which path it was given."""
    body = json.dumps({"api_saw": environ["PATH_INFO"]}).encode()
    start_response("200 OK", [("Content-Type", "application/json")])
    return [body]


@pytest.fixture
def http() -> httpx.Client:
    return httpx.Client(transport=httpx.WSGITransport(app=ConsoleApp(api_app)), base_url="http://console")


def test_ui_redirects_to_the_folder_so_relative_links_resolve(http: httpx.Client) -> None:
    response = http.get("/ui")

    assert response.status_code == 302
    assert response.headers["Location"] == "/ui/"


def test_the_folder_is_the_page_and_its_files_have_their_types(http: httpx.Client) -> None:
    page = http.get("/ui/")
    script = http.get("/ui/app.js")
    style = http.get("/ui/console.css")

    assert page.status_code == 200 and page.headers["Content-Type"].startswith("text/html")
    assert page.text == (CONSOLE_DIR / "index.html").read_text()
    assert script.headers["Content-Type"].startswith("text/javascript")
    assert style.headers["Content-Type"].startswith("text/css")
    # everything from this origin: no CDN, no inline script
    assert "default-src 'self'" in page.headers["Content-Security-Policy"]


def test_page_loads_only_files_of_the_package(http: httpx.Client) -> None:
    page = http.get("/ui/").text

    assert "http://" not in page and "https://" not in page
    for name in ("console.css", "app.js"):
        assert name in page and http.get(f"/ui/{name}").status_code == 200


@pytest.mark.parametrize(
    "path", ["/ui/__init__.py", "/ui/../pyproject.toml", "/ui/nothing.js", "/ui/sub/app.js", "/ui/%2e%2e/x"]
)
def test_nothing_but_console_files_is_served(path: str) -> None:
    # PATH_INFO as a server hands it over, without any client normalising it first
    seen: list[str] = []
    body = ConsoleApp(api_app)(
        {"PATH_INFO": path, "REQUEST_METHOD": "GET"}, lambda status, headers: seen.append(status)
    )

    assert seen == ["404 Not Found"]
    assert json.loads(b"".join(body))["error"]["code"] == "not_found"


def test_other_methods_are_refused_in_the_api_error_shape(http: httpx.Client) -> None:
    response = http.post("/ui/app.js", content=b"x")

    assert response.status_code == 405
    assert response.json()["error"]["code"] == "method_not_allowed"


@pytest.mark.parametrize("path", ["/jobs", "/jobs/j_1/runs", "/openapi.json", "/", "/uix"])
def test_every_other_path_goes_to_the_api(http: httpx.Client, path: str) -> None:
    assert http.get(path).json() == {"api_saw": path}


def test_console_files_are_html_js_and_css_only() -> None:
    names = set(console_files())

    assert {"index.html", "app.js", "api.js", "describe.js", "console.css"} <= names
    assert all(name.rsplit(".", 1)[1] in ("html", "js", "css") for name in names)
