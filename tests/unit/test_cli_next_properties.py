"""``jobsched next`` answers any expression, zone and instant: exit 0 with strictly increasing instants, or
exit 2 with one line on stderr. Never a traceback."""

from __future__ import annotations

from datetime import datetime
from itertools import pairwise

from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from jobsched.cli import app
from tests.support.schedule_strategies import EXPRESSIONS, INSTANTS, ZONES

runner = CliRunner()


@settings(max_examples=150, deadline=None)
@given(EXPRESSIONS, ZONES, INSTANTS, st.integers(1, 12))
def test_next_never_tracebacks(expression: str, zone: str, after: str, count: int) -> None:
    # options first and "--": an expression such as "-5 * * * *" is not an option
    result = runner.invoke(
        app, ["next", "--tz", zone, "--after", after, "--count", str(count), "--", expression]
    )
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code in (0, 2), (result.exit_code, result.output)
    if result.exit_code == 2:
        assert len(result.stderr.splitlines()) == 1, result.stderr
        assert result.stdout == ""
        return
    fires = [datetime.fromisoformat(line) for line in result.stdout.splitlines()]
    assert len(fires) <= count
    assert all(earlier < later for earlier, later in pairwise(fires))
