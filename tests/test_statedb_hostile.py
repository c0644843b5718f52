"""sessions/statedb.py against a hostile or changed state.db (issue 32, item 3): a row that cannot be read
costs its own session (skipped, with its reason), a schema the reader does not know is "unavailable:
schema changed" in one line; views kept, snapshots still served and exported, no traceback anywhere."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support import Sidecar, add_db_session, big_session, make_state_db, tool_session, write_json
from tests.support_homes import named
from timmy_compactor.cli import main
from timmy_compactor.sessions.names import file_id
from timmy_compactor.sessions.source import StateDBError, UnusableSessionError
from timmy_compactor.sessions.statedb import StateDB
from timmy_compactor.sidecar.running import sidecar_lock

BAD_ID = b"a\xffb"  # not UTF-8: what a damaged row (or another writer) may leave in a TEXT column
MARK = "ROW-TEXT-NEVER-LOGGED"


def _sql(path: Path, *statements: tuple[str, tuple[object, ...]]) -> None:
    db = sqlite3.connect(path)
    for sql, args in statements:
        db.execute(sql, args)
    db.commit()
    db.close()


def hostile_rows(path: Path) -> dict[str, str]:
    """Beside the good session: one session per row that cannot be read; → each one's shown id and reason."""
    _sql(  # an id that is not UTF-8 (cast: stored as TEXT, as a damaged row is)
        path,
        ("INSERT INTO sessions VALUES (CAST(? AS TEXT), 'm', 's', 1.7e9, NULL, 'cli')", (BAD_ID,)),
        ("INSERT INTO messages (session_id, role, content) VALUES (CAST(? AS TEXT), 'user', ?)", (BAD_ID, MARK)),
    )
    for sid in ("bad_text", "null_role", "number_content"):
        add_db_session(path, sid, tool_session(30))
    _sql(
        path,
        ("INSERT INTO messages (session_id, role, content) VALUES ('bad_text', 'user', CAST(? AS TEXT))",
         (MARK.encode() + b"\xff\xfe",)),
        ("INSERT INTO messages (session_id, role, content) VALUES ('null_role', NULL, ?)", (MARK,)),
        ("INSERT INTO messages (session_id, role, content) VALUES ('number_content', 'user', 42.5)", ()),
        ("INSERT INTO messages (session_id, role, content) VALUES (NULL, 'user', ?)", (MARK,)),  # no session at all
    )  # fmt: skip
    shown = file_id(BAD_ID.decode("utf-8", "surrogateescape"))
    return {shown: "not valid UTF-8", "bad_text": "content is not valid UTF-8", "null_role": "has no role"}


def test_a_row_that_cannot_be_read_costs_its_own_session_only(tmp_path: Path) -> None:
    car = Sidecar(tmp_path, "sqlite", window=8_000)
    path = make_state_db(car.root / "hermes" / "state.db", "good", tool_session(40))
    bad = hostile_rows(path)
    write_json(car.sessions / "session_snap.json", big_session("snap"))

    sweep = car.cli("sweep", "--now", "--json")
    assert sweep.returncode == 0 and "Traceback" not in sweep.stderr, sweep.stderr
    assert json.loads(sweep.stdout) == {"sessions": 6, "written": 3, "bad_input": 3}, sweep.stdout
    skipped = named([sweep], "session_skipped")
    for shown, why in bad.items():
        assert [e for e in skipped if e["session"] == shown and why in e["reason"]], (shown, skipped)
    for key in ("good", "number_content", "snap"):  # a number where text belongs is its text
        assert (car.sessions / f"compacted_session_{key}.json").is_file(), key
    assert "state_db_unavailable" not in sweep.stderr and MARK not in sweep.stderr + sweep.stdout

    status = car.cli("status", "--json")
    assert status.returncode == 0 and "Traceback" not in status.stderr, status.stderr
    assert json.loads(status.stdout)["sources"]["state_db"]["unavailable"] is None
    export = car.cli("export", "--out", str(tmp_path / "out"), "--json")
    assert "Traceback" not in export.stderr and MARK not in export.stderr, export.stderr
    summary = json.loads(export.stdout)
    assert summary["exported"] == 3 and len(summary["failed"]) == 3, summary  # good, number_content, snap
    show = car.cli("show", "bad_text", "--ref", "0")
    assert show.returncode == 2 and "not valid UTF-8" in show.stderr and "Traceback" not in show.stderr, show.stderr
    assert len(show.stderr.strip().splitlines()) == 1
    assert car.cli("show", "good", "--ref", "0").returncode == 0


def test_the_reader_skips_a_row_it_cannot_decode_and_keeps_the_rest(tmp_path: Path) -> None:
    path = make_state_db(tmp_path / "state.db", "good", tool_session(4))
    hostile_rows(path)
    db = StateDB(path)
    db.check_schema()
    marks = db.high_water_marks()
    assert {"good", "bad_text", "null_role", "number_content"} <= set(marks) and len(marks) == 5
    assert db.live("good").messages and db.live("number_content").messages[-1]["content"] == "42.5"
    for sid, why in (("bad_text", "content is not valid UTF-8"), ("null_role", "has no role")):
        with pytest.raises(UnusableSessionError, match=why):
            db.live(sid)
    undecodable = next(sid for sid in marks if sid.startswith("a") and len(sid) == 3)
    assert db.high_water_mark(undecodable) is None  # no query binds it, none fails on it
    with pytest.raises(UnusableSessionError, match="not valid UTF-8"):
        db.full_history(undecodable)


def _version(text: str) -> Callable[[Path], None]:
    return lambda path: _sql(path, ("UPDATE schema_version SET version = ?", (text,)))


def _rename(table: str, column: str) -> Callable[[Path], None]:
    return lambda path: _sql(path, (f"ALTER TABLE {table} RENAME COLUMN {column} TO renamed", ()))


CHANGES = {
    "text_version": (_version("abc"), "schema_version is not a whole number"),
    "real_version": (_version("22.5"), "schema_version is not a whole number"),
    "renamed_content": (_rename("messages", "content"), "table messages has no column content"),
    "renamed_session_id": (_rename("messages", "session_id"), "table messages has no column session_id"),
    "renamed_version": (_rename("schema_version", "version"), "no such column: version"),
    "no_sessions_table": (lambda p: _sql(p, ("DROP TABLE sessions", ())), "no table sessions"),
}


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_a_changed_schema_is_unavailable_in_one_line_views_kept_snapshots_served(
    tmp_path: Path, change: str, capsys: pytest.CaptureFixture[str]
) -> None:
    breaks, why = CHANGES[change]
    car = Sidecar(tmp_path, "sqlite", window=8_000)
    path = make_state_db(car.root / "hermes" / "state.db", "good", tool_session(40))
    write_json(car.sessions / "session_snap.json", big_session("snap"))
    assert json.loads(car.cli("sweep", "--now", "--json").stdout)["written"] == 2
    view = car.sessions / "compacted_session_good.json"
    before = view.read_bytes()
    breaks(path)
    with pytest.raises(StateDBError, match="unavailable: schema changed") as caught:
        StateDB(path).check_schema()
    assert why in str(caught.value) and caught.value.cause == "schema" and "\n" not in str(caught.value)

    write_json(car.sessions / "session_snap.json", big_session("snap") | {"model": "changed"})
    runs = [
        car.cli(*argv)
        for argv in (("sweep", "--now"), ("status",), ("status", "--json"), ("show", "snap", "--ref", "0"))
    ]
    for run in runs:
        assert run.returncode == 0 and "Traceback" not in run.stderr, (run.args, run.stderr)
    assert view.read_bytes() == before  # kept, never replaced by the snapshot nor removed
    assert "schema changed" in runs[1].stdout, runs[1].stdout
    unavailable = json.loads(runs[2].stdout)["sources"]["state_db"]["unavailable"]
    assert unavailable["cause"] == "schema" and "schema changed" in unavailable["error"], unavailable
    assert (
        json.loads((car.sessions / "compacted_session_snap.json").read_text())["timmy_compaction"]["source"] == "file"
    )

    show = car.cli("show", "good", "--ref", "0")
    assert show.returncode == 2 and "Traceback" not in show.stderr, show.stderr
    assert len(show.stderr.strip().splitlines()) == 1 and "schema changed" in show.stderr, show.stderr
    export = car.cli("export", "--out", str(tmp_path / "out"), "--json")
    assert export.returncode == 0 and "Traceback" not in export.stderr, export.stderr
    summary = json.loads(export.stdout)
    assert summary["exported"] == 1 and "schema changed" in summary["refused"][0]["reason"], summary

    capsys.readouterr()
    with sidecar_lock(car.state, car.sessions):  # a running sidecar: the documented 5, one line
        code = main(["status", "--check", "--config", str(car.config_path)])
    out = capsys.readouterr().out
    assert code == 5 and out.startswith("unhealthy:") and "Traceback" not in out, out
