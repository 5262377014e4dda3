"""``docs/security.md`` names a test for every guard: each test it names exists. A reference is
``tests/<path>.py::<name>``, or ``::<name>`` after it in the same table cell for another test of that file,
or ``tests/<path>.py`` alone for a whole file."""

from __future__ import annotations

from tests.support.doc_refs import ROOT, defined_functions, missing_tests, named_tests

DOC = ROOT / "docs" / "security.md"


def test_every_test_the_threat_model_names_exists() -> None:
    named = named_tests(DOC.read_text())
    assert len(named) > 30
    assert missing_tests(named) == []


def test_a_wrong_name_is_found() -> None:
    named = named_tests(
        "| guard | `tests/unit/test_security_doc.py::no_such_test`, `::test_a_wrong_name_is_found` |"
    )
    assert named == [
        ("tests/unit/test_security_doc.py", "no_such_test"),
        ("tests/unit/test_security_doc.py", "test_a_wrong_name_is_found"),
    ]
    assert "no_such_test" not in defined_functions(ROOT / "tests/unit/test_security_doc.py")
