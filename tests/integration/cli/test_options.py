"""Option groups: a dataclass parameter of a command becomes its options, declared once."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

import pytest
import typer
from typer.testing import CliRunner

from jobsched.cli.options import Connection, injected, option_groups

NO_ENV: dict[str, str | None] = {"JOBSCHED_API": None, "JOBSCHED_TOKEN": None, "JOBSCHED_SIGV4_REGION": None}


@dataclass(frozen=True)
class Paging:
    limit: Annotated[int, typer.Option("--limit")] = 20
    api: Annotated[str, typer.Option("--page-api")] = "x"


def test_a_group_becomes_options_with_its_defaults_and_the_context_object_is_at_hand() -> None:
    # Given a command taking the connection options as one parameter
    seen: list[tuple[Connection, object]] = []
    app = typer.Typer()

    @app.command()
    @option_groups
    def show(conn: Connection = Connection()) -> None:
        seen.append((conn, injected("transport")))

    # When it runs with one of the options given, and a test's object in the click context
    result = CliRunner().invoke(app, ["--sigv4-region", "eu-west-1"], obj={"transport": "t"}, env=NO_ENV)

    # Then the group holds the given value and the others' defaults, and the object is reachable
    assert result.exit_code == 0, result.output
    assert seen == [(Connection(sigv4_region="eu-west-1"), "t")]
    assert injected("transport") is None  # only while a command runs


def test_two_groups_with_one_option_name_are_refused_at_declaration() -> None:
    def clash(conn: Connection = Connection(), paging: Paging = Paging()) -> None:
        """Both groups have a field named ``api``."""

    with pytest.raises(TypeError, match="repeat a parameter name"):
        option_groups(clash)
