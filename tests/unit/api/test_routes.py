"""The route table (``jobsched.api.routes``) is what the handler serves: API Gateway and the WSGI adapter
are built from it, so it must hold every route of the handler, with its query parameters."""

from __future__ import annotations

import pytest

from jobsched.api import routes
from jobsched.api.app import allowed_methods, app

DOC = app.openapi_document()


def test_the_documented_routes_are_exactly_the_tables_documented_routes():
    operations = {
        (method.upper(), path, operation["operationId"])
        for path, methods in DOC["paths"].items()
        for method, operation in methods.items()
    }

    assert operations == {(r.method, r.path, r.operation_id) for r in routes.ROUTES if r.documented}


@pytest.mark.parametrize("route", [r for r in routes.ROUTES if r.documented], ids=lambda r: r.operation_id)
def test_the_table_lists_each_routes_query_and_path_parameters(route):
    parameters = DOC["paths"][route.path][route.method.lower()].get("parameters", [])

    assert {p["name"] for p in parameters if p["in"] == "query"} == set(route.query)
    assert tuple(p["name"] for p in parameters if p["in"] == "path") == route.path_parameters


def test_the_undocumented_route_serves_the_document():
    (route,) = [r for r in routes.ROUTES if not r.documented]

    assert (route.method, route.path) == ("GET", "/openapi.json")
    assert allowed_methods("/openapi.json") == ["GET"]


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/jobs", ("/jobs", {})),
        ("/jobs/", ("/jobs", {})),
        ("/jobs/j_1", ("/jobs/{id}", {"id": "j_1"})),
        ("/jobs/j_1/runs/", ("/jobs/{id}/runs", {"id": "j_1"})),
        ("/jobs//runs", None),
        ("/jobs/j_1/other", None),
        ("/", None),
    ],
)
def test_match_maps_a_path_to_its_resource_template(path, expected):
    assert routes.match(path) == expected


def test_resolver_paths_use_powertools_syntax_and_unknown_operations_are_refused():
    assert routes.route("listRuns").resolver_path == "/jobs/<id>/runs"
    with pytest.raises(KeyError, match="noSuchOperation"):
        routes.route("noSuchOperation")
