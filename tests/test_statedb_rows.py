"""sessions/statedb.py: state.db read row by row; a bad row costs its own session, a brand-new db is no error."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from tests.support import Sidecar, add_db_session, make_state_db, tool_session, user
from tests.support_homes import config_for, named
from timmy_compactor.sessions.names import file_id
from timmy_compactor.sessions.statedb import StateDB

MARK = "CONTENT-THAT-MUST-NEVER-BE-LOGGED"


def bad_rows_db(car: Sidecar) -> tuple[Path, dict[str, str]]:
    """state.db with one good session and one session per kind of unusable row; → the bad ids and
    what each reason must say."""
    path = car.root / "hermes" / "state.db"
    make_state_db(path, "good", tool_session(40))
    base = tool_session(30)
    deep_args = json.dumps([{"id": "c", "type": "function", "function": {"name": "t", "arguments": MARK}}])
    bad = {
        "deep_content": ([*base, {"role": "user", "content": "[" * 5_000 + json.dumps(MARK) + "]" * 5_000}], "nested"),
        "deep_calls": (
            [*base, {"role": "assistant", "content": "", "tool_calls": "[" * 5_000 + deep_args + "]" * 5_000}],
            "nested",
        ),
        "blob": ([*base, {"role": "user", "content": MARK.encode() + b"\x00\xff"}], "binary"),
        "blob_calls": ([*base, {"role": "assistant", "content": "", "tool_calls": MARK.encode()}], "binary"),
        "i" * 1_200: (base, "over 1,000"),
    }
    for session_id, (messages, _) in bad.items():
        if session_id.startswith("deep_content"):
            db = sqlite3.connect(path)  # content stored raw: "\x00json:" + JSON text, as Hermes does
            db.execute("INSERT INTO sessions VALUES (?, 'm', 's', 1.7e9, NULL, 'cli')", (session_id,))
            for m in messages:
                content = m["content"] if m is not messages[-1] else "\x00json:" + m["content"]
                db.execute(
                    "INSERT INTO messages (session_id, role, content, tool_calls) VALUES (?, ?, ?, ?)",
                    (
                        session_id,
                        m["role"],
                        content if isinstance(content, str) else json.dumps(content),
                        json.dumps(m["tool_calls"]) if m.get("tool_calls") else None,
                    ),
                )
            db.commit()
            db.close()
        else:
            add_db_session(path, session_id, messages)
    return path, {k: why for k, (_, why) in bad.items()}


def test_unusable_rows_cost_their_session_only_with_one_line_each_and_no_content(tmp_path: Path) -> None:
    car = Sidecar(tmp_path, "sqlite", window=8_000)
    path, bad = bad_rows_db(car)
    first = car.cli("sweep", "--now", "--json")
    assert first.returncode == 0 and "Traceback" not in first.stderr, first.stderr
    assert json.loads(first.stdout) == {"sessions": 1 + len(bad), "written": 1, "bad_input": len(bad)}
    skipped = named([first], "session_skipped")
    assert len(skipped) == len(bad)
    for session_id, why in bad.items():
        shown = file_id(session_id) if len(session_id) <= 1_000 else "<session id of 1,200 characters"
        assert [e for e in skipped if e["session"].startswith(shown) and why in e["reason"]], (shown, skipped)
    assert MARK not in first.stderr + first.stdout, "a log line quoted a row's content"
    assert "RecursionError" not in first.stderr
    assert (car.sessions / "compacted_session_good.json").exists()

    again = car.cli("sweep", "--now", "--json")  # skipped until they change: not retried, not logged again
    assert json.loads(again.stdout) == {"sessions": 0}, again.stderr
    assert named([again], "session_skipped") == []

    status = car.cli("status", "--json")
    assert status.returncode == 0 and "Traceback" not in status.stderr, status.stderr
    data = json.loads(status.stdout)
    assert data["sources"]["state_db"]["unusable_sessions"] == len(bad)
    assert data["views"]["unreadable"] == len(bad) and data["views"]["fresh"] == 1
    assert MARK not in status.stdout
    text = car.cli("status")
    assert f"{len(bad)} unusable (skipped)" in text.stdout and MARK not in text.stdout, text.stderr

    export = car.cli("export", "--out", str(tmp_path / "out"), "--json")
    assert "Traceback" not in export.stderr and MARK not in export.stderr, export.stderr
    summary = json.loads(export.stdout)
    assert summary["exported"] == 1 and len(summary["failed"]) == len(bad), summary
    show = car.cli("show", "blob", "--ref", "0")
    assert show.returncode == 2 and "binary data" in show.stderr and "Traceback" not in show.stderr, show.stderr

    db = sqlite3.connect(path)  # fixed in Hermes (the row rewritten): compacted on the next sweep
    db.execute("UPDATE messages SET content = 'fixed' WHERE session_id = 'blob' AND typeof(content) = 'blob'")
    db.execute("INSERT INTO messages (session_id, role, content) VALUES ('blob', 'user', 'and now?')")
    db.commit()
    db.close()
    fixed = car.cli("sweep", "--now", "--json")
    assert json.loads(fixed.stdout) == {"sessions": 1, "written": 1}, fixed.stderr


def test_json_depth_is_measured_without_recursion() -> None:
    from timmy_compactor.sessions.statedb import MAX_JSON_DEPTH, json_depth

    assert json_depth("[" * 200_000 + "]" * 200_000) == 200_000
    assert json_depth('{"a": "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["}') == 1
    assert json_depth(json.dumps({"k": ['\\"[' * 500]})) == 2
    assert json_depth("[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH) == MAX_JSON_DEPTH


def test_a_brand_new_state_db_is_no_reason_to_upgrade(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import sqlite3

    from timmy_compactor.export.sources import sessions_to_export
    from timmy_compactor.sessions.statedb import StateDBNotReadyError
    from timmy_compactor.sidecar import dblook

    config = config_for(home, tmp_path)
    for setup in ("", "CREATE TABLE schema_version (version INTEGER);"):
        (home / "state.db").unlink(missing_ok=True)
        db = sqlite3.connect(home / "state.db")  # just created by Hermes: no schema, or no version row yet
        db.executescript(setup)
        db.close()
        with pytest.raises(StateDBNotReadyError):
            StateDB(home / "state.db").check_schema()
        assert dblook.look_at_state_db(config, marks=False).db is None
        assert sessions_to_export(tmp_path / "no-sessions", home)[1:] == ([], [])
    assert "upgrade" not in capsys.readouterr().out
    make_state_db(tmp_path / "old.db", "s1", [user("hi")], schema=7)
    with pytest.raises(Exception, match="upgrade timmy-compactor"):
        StateDB(tmp_path / "old.db").check_schema()
