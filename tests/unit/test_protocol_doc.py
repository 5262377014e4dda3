"""``docs/protocol.md`` shows the run state machine as the code has it: its table is
``jobsched.domain.run_states.markdown_table()`` verbatim, between its markers; and every test its promises name
exists (references as in docs/security.md: ``tests/<path>.py::<name>``, or ``::<name>`` after one on its line)."""

from __future__ import annotations

from jobsched.domain.run_states import TRANSITIONS, markdown_table
from tests.support.doc_refs import ROOT, missing_tests, named_tests

DOC = ROOT / "docs" / "protocol.md"
START = "<!-- run-state-table: generated from domain/run_states.markdown_table(); do not edit by hand -->\n"
END = "<!-- /run-state-table -->"


def test_the_protocol_docs_run_state_table_is_the_codes() -> None:
    text = DOC.read_text()
    shown = text.split(START, 1)[1].split(END, 1)[0]
    assert shown == markdown_table()
    # one line per transition, each named once
    rows = [line.split("|")[1].strip() for line in shown.splitlines()[2:]]
    assert rows == list(TRANSITIONS)


def test_every_test_the_promises_name_exists() -> None:
    promises = DOC.read_text().split("\n## Promises\n", 1)[1]
    named = named_tests(promises)
    assert len(named) > 40
    assert missing_tests(named) == []
