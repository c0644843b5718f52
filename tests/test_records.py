"""sidecar/records.py (sidecar.db): what a state.db session's record holds; older sidecar.db files migrated."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from tests.support import make_state_db, tool_session
from tests.support_homes import sidecar_config
from timmy_compactor.sidecar import sweep, work
from timmy_compactor.sidecar.records import Records


def test_db_records_hold_a_high_water_mark_and_a_message_count(tmp_path: Path) -> None:
    sessions, home = tmp_path / "hermes" / "sessions", tmp_path / "hermes"
    sessions.mkdir(parents=True)
    messages = tool_session(12)
    make_state_db(home / "state.db", "s1", messages)
    config = sidecar_config(tmp_path, sessions, home)
    records = Records(config.state_dir)
    work.process_db_session("s1", config, records)
    record = records.get("db:s1")
    assert record is not None
    assert (record.high_water_mark, record.messages) == (len(messages), len(messages))
    assert (record.mtime_ns, record.size) == (None, None)
    assert sweep.stale_db_sessions(config, records) == []


def test_an_old_sidecar_db_is_migrated_value_by_value(tmp_path: Path) -> None:
    db = sqlite3.connect(tmp_path / "sidecar.db")
    db.execute(
        "CREATE TABLE sessions (path TEXT PRIMARY KEY, mtime_ns INTEGER NOT NULL, size INTEGER NOT NULL, "
        "sha256 TEXT, action TEXT NOT NULL, reason TEXT, tokens_before INTEGER, tokens_after INTEGER, at REAL NOT NULL)"
    )
    db.execute("INSERT INTO sessions VALUES ('/s/session_a.json', 111, 222, 'h1', 'written', NULL, 9, 3, 1.0)")
    db.execute("INSERT INTO sessions VALUES ('db:b', 77, 12, 'h2', 'written', NULL, 9, 3, 2.0)")
    db.commit()
    db.close()
    records = Records(tmp_path)
    a, b = records.get("/s/session_a.json"), records.get("db:b")
    assert a is not None and (a.mtime_ns, a.size, a.high_water_mark, a.messages) == (111, 222, None, None)
    assert b is not None and (b.mtime_ns, b.size, b.high_water_mark, b.messages) == (None, None, 77, 12)
    assert Records(tmp_path).all().keys() == {"/s/session_a.json", "db:b"}  # idempotent


def test_a_sidecar_db_without_hermes_tool_tokens_gets_the_column(tmp_path: Path) -> None:
    """A `records` table from before `hermes_tool_tokens`: the column is added, the rows kept (NULL:
    each state.db session is checked once more against Hermes' current tool schemas)."""
    db = sqlite3.connect(tmp_path / "sidecar.db")
    db.execute(
        "CREATE TABLE records (path TEXT PRIMARY KEY, mtime_ns INTEGER, size INTEGER, high_water_mark INTEGER, "
        "messages INTEGER, sha256 TEXT, action TEXT NOT NULL, reason TEXT, tokens_before INTEGER, "
        "tokens_after INTEGER, at REAL NOT NULL)"
    )
    db.execute("INSERT INTO records VALUES ('db:b', NULL, NULL, 77, 12, 'h2', 'written', NULL, 9, 3, 2.0)")
    db.commit()
    db.close()
    records = Records(tmp_path)
    b = records.get("db:b")
    assert b is not None and (b.high_water_mark, b.messages, b.hermes_tool_tokens) == (77, 12, None)
    records.put("db:b", high_water_mark=78, sha256="h3", action="written", hermes_tool_tokens=11_500)
    b = Records(tmp_path).get("db:b")
    assert b is not None and (b.high_water_mark, b.hermes_tool_tokens) == (78, 11_500)
