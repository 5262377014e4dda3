"""Other cron libraries' published test cases that apply to jobsched, kept as a regression table.

Each file in tests/unit/data/peers/ names the repository and test file its cases come from (written as
data: schedule, zone, start, expected fires). Cases where a peer follows a different convention than
jobsched's (ISC daylight-saving rules, Vixie's day rule, cronie's step limit, wrap-around ranges) are
listed under "differs" with the reason, and not run.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from jobsched.schedule.engine import ScheduleError, get_zone, parse_instant, parse_schedule, validate_schedule

PEERS = sorted((Path(__file__).parent / "data" / "peers").glob("*.json"))
TABLES = {path.stem: json.loads(path.read_text()) for path in PEERS}
END = datetime.max.replace(tzinfo=UTC)
NOW = datetime(2010, 1, 1, tzinfo=UTC)


def _rows(key: str) -> list[Any]:
    return [
        pytest.param(table["source"], row, id=f"{peer}: {row['name']}")
        for peer, table in TABLES.items()
        for row in table.get(key, [])
    ]


def _product_rows() -> list[Any]:
    rows = []
    for peer, table in TABLES.items():
        product = table.get("rejected_product")
        if product:
            for pattern in product["patterns"]:
                for value in product["values"]:
                    schedule = pattern % value
                    rows.append(
                        pytest.param(table["source"], schedule, id=f"{peer}: {product['name']} {schedule!r}")
                    )
    return rows


def _first_fires(row: dict[str, Any], count: int) -> list[str]:
    schedule = parse_schedule(row["schedule"], row["timezone"])
    after = parse_instant(row["after"], get_zone(row["timezone"]), field="after")
    return [fire.isoformat() for fire in schedule.fires(after, END, count)]


def test_every_peer_table_names_its_source() -> None:
    assert len(TABLES) >= 3
    for table in TABLES.values():
        assert table["source"]["repo"].count("/") == 1 and table["source"]["path"]


@pytest.mark.parametrize(("source", "row"), _rows("cases"))
def test_peer_case_fires_agree(source: dict[str, str], row: dict[str, Any]) -> None:
    assert _first_fires(row, len(row["expected"])) == row["expected"], source


@pytest.mark.parametrize(("source", "row"), _rows("not_first"))
def test_peer_case_does_not_fire_then(source: dict[str, str], row: dict[str, Any]) -> None:
    assert _first_fires(row, 1) != [row["not"]], source


@pytest.mark.parametrize(("source", "row"), _rows("rejected"))
def test_peer_rejection_agrees(source: dict[str, str], row: dict[str, Any]) -> None:
    with pytest.raises(ScheduleError) as caught:
        validate_schedule(row["schedule"], "UTC", now=NOW)
    assert caught.value.field == "schedule", source


@pytest.mark.parametrize(("source", "schedule"), _product_rows())
def test_peer_bad_values_are_rejected(source: dict[str, str], schedule: str) -> None:
    with pytest.raises(ScheduleError) as caught:
        validate_schedule(schedule, "UTC", now=NOW)
    assert caught.value.field == "schedule", source
