"""Local mode's data dir is its user's alone: the directory 0700, every file in it 0600 (the database holds job
specs with their secret header values, the logs hold errors; SQLite's ``-wal``/``-shm`` files included)."""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from jobsched.local.logs import PrivateRotatingFileHandler
from jobsched.local.paths import make_private_dir
from jobsched.local.tokens import prepare_tokens
from jobsched.sqlite.database import create_private
from tests.support.local import serving


@pytest.fixture
def loose_umask() -> Iterator[None]:
    """The common default umask (files 0644, folders 0755 unless created otherwise)."""
    previous = os.umask(0o022)
    yield
    os.umask(previous)


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_the_data_dir_is_0700_and_its_files_0600(loose_umask: None, quiet_logs: None, tmp_path: Path) -> None:
    # Given local mode started on a new data dir, with a job holding a secret header stored and a log written
    data_dir = tmp_path / "data"
    lines: list[str] = []
    with serving(data_dir, lines, redirect_stdout=True) as (_, client):
        created = client.post(
            "/jobs",
            json={
                "name": "secret-hook",
                "schedule": "every 1 hour",
                "target": {
                    "type": "http",
                    "url": "https://example.com/h",
                    "headers": {"Authorization": "Bearer s"},
                },
            },
        )
        assert created.status_code == 201, created.text
        running = {path.name: _mode(path) for path in data_dir.iterdir() if path.is_file()}
    # (and stopped: the final snapshot written, the WAL folded back)
    files = {**running, **{path.name: _mode(path) for path in data_dir.iterdir() if path.is_file()}}
    # Then the folder is closed to other users, and every file in it, the SQLite WAL and shared memory too
    assert _mode(data_dir) == 0o700
    for name in ("jobsched.sqlite3", "jobsched.sqlite3-wal", "jobsched.sqlite3-shm", "run-queue.sqlite3"):
        assert name in files
    for name in ("local.log", "metrics.log", "dev-token", "tokens.json", "local.lock", "state.json"):
        assert name in files
    assert {name: mode for name, mode in files.items() if mode != 0o600} == {}


def test_an_existing_data_dir_is_closed_at_start(loose_umask: None, tmp_path: Path) -> None:
    # Given a data dir an older version left open, with one of its files and a file of the user's own
    data_dir = tmp_path / "data"
    data_dir.mkdir(mode=0o755)
    (data_dir / "jobsched.sqlite3-wal").write_text("")
    (data_dir / "local.log.1").write_text("")
    (data_dir / "notes.txt").write_text("")
    os.chmod(data_dir / "jobsched.sqlite3-wal", 0o644)
    os.chmod(data_dir / "notes.txt", 0o644)
    make_private_dir(data_dir)
    assert _mode(data_dir) == 0o700
    assert _mode(data_dir / "jobsched.sqlite3-wal") == 0o600
    assert _mode(data_dir / "local.log.1") == 0o600
    assert _mode(data_dir / "notes.txt") == 0o644  # not local mode's: left as it was


def test_rotated_logs_stay_private(loose_umask: None, tmp_path: Path) -> None:
    handler = PrivateRotatingFileHandler(tmp_path / "local.log", maxBytes=10, backupCount=1, encoding="utf-8")
    record = logging.LogRecord("t", logging.INFO, __file__, 1, "x" * 20, None, None)
    handler.emit(record)
    handler.emit(record)
    handler.close()
    assert _mode(tmp_path / "local.log") == 0o600
    assert _mode(tmp_path / "local.log.1") == 0o600


def test_a_leftover_temp_file_does_not_open_the_tokens(loose_umask: None, tmp_path: Path) -> None:
    # Given the temp files of the dev token and tokens file left 0644 by an interrupted write
    for name in (".dev-token.tmp", ".tokens.json.tmp"):
        (tmp_path / name).write_text("")
        os.chmod(tmp_path / name, 0o644)
    # When local mode writes them
    prepare_tokens(tmp_path, None)
    # Then both are its user's alone
    assert _mode(tmp_path / "dev-token") == 0o600
    assert _mode(tmp_path / "tokens.json") == 0o600


def test_a_symlink_in_place_of_a_log_or_database_is_not_followed(loose_umask: None, tmp_path: Path) -> None:
    # Given the log's and the database's names in the data dir planted as symlinks to another file
    elsewhere = tmp_path / "notes.txt"
    elsewhere.write_text("mine\n")
    os.chmod(elsewhere, 0o644)
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    for name in ("local.log", "jobsched.sqlite3"):
        (data_dir / name).symlink_to(elsewhere)
    # When local mode opens them, Then it refuses, and the other file keeps its content and mode
    with pytest.raises(OSError):
        PrivateRotatingFileHandler(data_dir / "local.log", maxBytes=10, backupCount=1, encoding="utf-8")
    with pytest.raises(OSError):
        create_private(data_dir / "jobsched.sqlite3")
    assert elsewhere.read_text() == "mine\n" and _mode(elsewhere) == 0o644
