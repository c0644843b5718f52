"""sidecar/dblook.py: state.db readable or unavailable, and why; unavailable keeps every view."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tests.support import make_state_db, tool_session
from tests.support_homes import sidecar_config
from tests.support_homes import write_config_of as write_config
from timmy_compactor.cli import main


def test_status_on_a_damaged_state_db_says_unavailable(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sessions, home = tmp_path / "hermes" / "sessions", tmp_path / "hermes"
    sessions.mkdir(parents=True)
    make_state_db(home / "state.db", "s1", tool_session(2))
    config = sidecar_config(tmp_path, sessions, home)
    db = sqlite3.connect(home / "state.db")
    db.execute("DROP TABLE messages")  # the schema version is fine, a table is gone
    db.commit()
    db.close()
    # issue 21: an unreadable state.db is unavailable, not an error: status reports it and the rest
    assert main(["status", "--config", str(write_config(tmp_path, config))]) == 0
    out, err = capsys.readouterr()
    assert "state.db UNAVAILABLE (schema:" in out and "views kept" in out, out
    assert "Traceback" not in err
