"""``docs/protocol.md`` shows the run state machine as the code has it: its table is
``jobsched.domain.run_states.markdown_table()`` verbatim, between its markers."""

from __future__ import annotations

from pathlib import Path

from jobsched.domain.run_states import TRANSITIONS, markdown_table

DOC = Path(__file__).resolve().parents[2] / "docs" / "protocol.md"
START = "<!-- run-state-table: generated from domain/run_states.markdown_table(); do not edit by hand -->\n"
END = "<!-- /run-state-table -->"


def test_the_protocol_docs_run_state_table_is_the_codes() -> None:
    text = DOC.read_text()
    shown = text.split(START, 1)[1].split(END, 1)[0]
    assert shown == markdown_table()
    # one line per transition, each named once
    rows = [line.split("|")[1].strip() for line in shown.splitlines()[2:]]
    assert rows == list(TRANSITIONS)
