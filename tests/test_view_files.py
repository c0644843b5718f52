"""Views as files: restored byte-exact, integers beyond 64 bits exact, a session nested past orjson's
write limit still gets a view, a directory named like a session is a one-line failure."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.support import VENV_BIN, Sidecar, big_session, deep_list, make_state_db, tool_session, write_json
from timmy_compactor.config import load_config
from timmy_compactor.sessions.names import session_id_of, view_path_for


def _cli(*args: str, config: Path) -> subprocess.CompletedProcess[str]:
    cmd = [str(VENV_BIN / "timmy-compactor"), *args, "--config", str(config)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)


def test_restore_is_byte_exact(tmp_path: Path) -> None:
    car = Sidecar(tmp_path, "sqlite", window=8_000)
    raw = car.sessions / "session_r.json"
    raw.write_bytes(json.dumps(big_session("r"), indent=2).encode())  # no trailing newline
    assert _cli("compact", str(raw), "--force", config=car.config_path).returncode == 0
    out = tmp_path / "restored.json"
    done = _cli("restore", str(view_path_for(raw)), "--out", str(out), config=car.config_path)
    assert done.returncode == 0, done.stderr
    assert out.read_bytes() == raw.read_bytes()


def test_integers_beyond_64_bits_stay_exact_in_the_view(tmp_path: Path) -> None:
    from timmy_compactor.sidecar import work
    from timmy_compactor.sidecar.records import Records

    car = Sidecar(tmp_path, "sqlite", window=8_000)
    config = load_config(car.config_path)
    session = big_session("big")
    session["messages"][0]["content"] = [{"type": "text", "text": "id below"}, {"n": 2**80 + 1}]
    raw = write_json(car.sessions / "session_big.json", session)
    assert work.process_path(raw, config, Records(config.state_dir)).action == "written"
    view = json.loads(view_path_for(raw).read_text())
    assert view["messages"][0] == session["messages"][0]
    assert str(2**80 + 1) in view_path_for(raw).read_text()


def test_a_session_nested_past_orjsons_write_limit_gets_a_view(tmp_path: Path) -> None:
    from timmy_compactor.sidecar import work
    from timmy_compactor.sidecar.records import Records

    car = Sidecar(tmp_path, "sqlite", window=8_000)
    config = load_config(car.config_path)
    session = big_session("deep")
    session["messages"][2]["content"] = deep_list(600)
    raw = write_json(car.sessions / "session_deep.json", session)
    result = work.process_path(raw, config, Records(config.state_dir))
    assert result.action == "written", result.reason


def test_a_directory_named_like_a_session_and_an_unwritable_view_are_one_line_failures_recorded_once(
    tmp_path: Path,
) -> None:
    from structlog.testing import capture_logs

    from timmy_compactor.sidecar import sweep, work
    from timmy_compactor.sidecar.records import Records

    car = Sidecar(tmp_path, "sqlite", window=8_000)
    config = load_config(car.config_path)
    records = Records(config.state_dir)
    (car.sessions / "session_x.json").mkdir()
    assert work.process_path(car.sessions / "session_x.json", config, records).action == "refused"
    (car.sessions / "session_x.json").rmdir()
    raw = write_json(car.sessions / "session_ro.json", big_session("ro"))
    view_path_for(raw).mkdir()  # the view cannot be written (as a read-only dir or a full disk would refuse it)
    with capture_logs() as logs:
        result = work.process_path(raw, config, records)
        assert result.action == "write_failed" and "\n" not in (result.reason or "")
        # the machine's fault, not the session's: every sweep tries again, and the view comes once it can
        assert sweep.sweep_sources(config, records).stale == [session_id_of(raw)]
        assert work.process_path(raw, config, records).action == "write_failed"
    errors = [e for e in logs if e["event"] == "view_not_written" and e["log_level"] == "error"]
    assert len(errors) == 1  # the retry that fails the same way is no second error line
    view_path_for(raw).rmdir()  # disk space freed
    assert work.process_path(raw, config, records).action == "written"
    assert sweep.sweep_sources(config, records).stale == []


def test_restore_of_a_state_db_view_names_what_is_missing(tmp_path: Path) -> None:
    """A view made from state.db is restored from state.db, through its session source: once the
    session is deleted in Hermes, or the database is gone, restore is a one-line error naming the
    view (exit 2), and never falls back to a (frozen) snapshot of the same name."""
    import sqlite3

    from timmy_compactor.cli import main
    from timmy_compactor.sidecar import work
    from timmy_compactor.sidecar.records import Records

    sessions, home = tmp_path / "sessions", tmp_path / "hermes"
    sessions.mkdir()
    home.mkdir()
    make_state_db(home / "state.db", "s1", tool_session(12))
    config_path = tmp_path / "compaction.yaml"
    config_path.write_text(
        f"sessions:\n  dir: {sessions}\n  hermes_home: {home}\nmodel:\n  context_window: 8000\n"
        f"huey:\n  state_dir: {tmp_path / 'state'}\n"
    )
    config = load_config(config_path)
    assert work.process("s1", config, Records(config.state_dir)).action == "written"
    view = sessions / "compacted_session_s1.json"
    write_json(sessions / "session_s1.json", big_session("s1"))  # a snapshot of the same name: not its source
    assert main(["restore", str(view), "--config", str(config_path), "--out", str(tmp_path / "r.json")]) == 0
    db = sqlite3.connect(home / "state.db")
    db.execute("DELETE FROM messages WHERE session_id = 's1'")
    db.commit()
    db.close()
    done = _cli("restore", str(view), config=config_path)
    assert done.returncode == 2, done.stderr
    assert "compacted_session_s1.json" in done.stderr and "no longer in state.db" in done.stderr
    (home / "state.db").unlink()
    done = _cli("restore", str(view), config=config_path)
    assert done.returncode == 2 and "there is no" in done.stderr and "state.db" in done.stderr, done.stderr
