"""The sidecar's own state (its folder, sidecar.db, locks, the queue's file): private, and a state it
cannot read or write is one line naming the file, never lost work or a traceback; failure reasons
carry no message content; a dead writer is dead even before it is reaped."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support import Sidecar, big_session, tool_session, wait_for, write_json
from timmy_compactor.config import load_config
from timmy_compactor.sessions.names import view_path, view_path_for


def test_state_dir_and_files_are_private(tmp_path: Path) -> None:
    from timmy_compactor.sidecar import work
    from timmy_compactor.sidecar.queue import make_huey
    from timmy_compactor.sidecar.records import Records

    old = os.umask(0o022)
    try:
        car = Sidecar(tmp_path, "sqlite", window=8_000)
        config = load_config(car.config_path)
        records = Records(config.state_dir)
        make_huey(config)
        raw = write_json(car.sessions / "session_p.json", big_session("p"))
        assert work.process_path(raw, config, records).action == "written"
    finally:
        os.umask(old)
    for path in [config.state_dir, *config.state_dir.rglob("*")]:
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode & 0o077 == 0, f"{path} is {oct(mode)}"


def test_failure_reasons_carry_no_message_content(tmp_path: Path) -> None:
    from timmy_compactor.sidecar import work
    from timmy_compactor.sidecar.records import Records

    car = Sidecar(tmp_path, "sqlite", window=8_000)
    doc = json.loads(car.config_path.read_text())
    doc["compaction"] = {"redact_credentials": True}
    car.config_path.write_text(json.dumps(doc))
    config = load_config(car.config_path)
    records = Records(config.state_dir)
    session = big_session("secret")
    secret = "hunter2SECRETpw"
    session["messages"][4]["content"] += f"\ntoken=https://alice:{secret}@db.example.org/x\nError: boom {secret}"
    raw = write_json(car.sessions / "session_secret.json", session)
    result = work.process_path(raw, config, records)
    assert secret not in (result.reason or "")
    for path in config.state_dir.rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path


def _with_config(car: Sidecar, **huey: Any) -> None:
    config = json.loads(car.config_path.read_text())
    config["huey"] |= huey
    car.config_path.write_text(json.dumps(config))


@pytest.mark.parametrize(
    ("broken", "make", "argv"),
    [
        ("sidecar.db", "dir", ["sweep", "--now"]),  # sqlite: unable to open database file
        ("huey.db", "dir", ["sweep"]),  # the queue's SQLite db
        ("huey.db", "dir", ["enqueue", "session_a.json"]),
        ("locks", "file", ["sweep", "--now"]),  # the per-session lock files
        ("sidecar.lock", "dir", ["watch", "--check"]),  # the single-sidecar lock
    ],
)
def test_a_state_file_that_cannot_be_written_is_one_line_naming_it(
    tmp_path: Path, broken: str, make: str, argv: list[str]
) -> None:
    """Not chmod (tests may run as root): a directory where a file belongs, a file where a directory
    belongs, fail for root too."""
    car = Sidecar(tmp_path, "sqlite", window=8_000)
    raw = write_json(car.sessions / "session_a.json", big_session("a"))
    before = raw.read_bytes()
    car.state.mkdir(mode=0o700)
    target = car.state / broken
    target.mkdir() if make == "dir" else target.write_text("")
    argv = [str(raw) if a == "session_a.json" else a for a in argv]
    proc = car.cli(*argv)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert str(target) in lines[0] and "cannot record the sidecar's state" in lines[0], lines[0]
    assert "writable directory" in lines[0] or "free disk space" in lines[0]
    assert raw.read_bytes() == before


def test_status_with_a_sidecar_db_it_cannot_open_still_reports_the_rest(tmp_path: Path) -> None:
    car = Sidecar(tmp_path, "sqlite", window=8_000)
    write_json(car.sessions / "session_a.json", big_session("a"))
    car.state.mkdir(mode=0o700)
    (car.state / "sidecar.db").mkdir()  # unreadable for root too
    proc = car.cli("status")
    assert proc.returncode == 0 and "Traceback" not in proc.stdout + proc.stderr, proc.stderr
    assert "1 session(s), 1 above threshold" in proc.stdout
    assert f"sidecar state unreadable: {car.state / 'sidecar.db'}" in proc.stdout, proc.stdout


def test_a_state_dir_under_a_regular_file_stops_the_consumer_in_one_line(tmp_path: Path) -> None:
    car = Sidecar(tmp_path, "sqlite", window=8_000)
    (tmp_path / "blocker").write_text("")  # ENOTDIR, for root too
    _with_config(car, state_dir=str(tmp_path / "blocker" / "state"))
    proc = car.start("consumer")
    assert proc.wait(timeout=60) == 2
    out = car.logs["consumer"].read_text()
    assert "Traceback" not in out, out
    assert [line for line in out.splitlines() if line.strip()] == [
        line for line in out.splitlines() if "cannot record the sidecar's state" in line
    ]
    assert str(tmp_path / "blocker") in out


def test_a_consumer_that_cannot_take_a_session_lock_says_so_once_and_keeps_the_raw_session(tmp_path: Path) -> None:
    car = Sidecar(tmp_path, "sqlite", window=8_000)
    _with_config(car, sweep_every_minutes=1440)  # no periodic sweep during the test
    raw = write_json(car.sessions / "session_a.json", big_session("a"))
    before = raw.read_bytes()
    car.state.mkdir(mode=0o700)
    (car.state / "locks").write_text("")  # the lock files cannot be made
    car.start("consumer")
    log = car.logs["consumer"]
    try:
        assert wait_for(lambda: "state_not_writable" in log.read_text(), timeout=60), car.log_text()
        time.sleep(2)  # nothing more comes
    finally:
        car.stop_all()
    out = log.read_text()
    assert "Traceback" not in out, out
    warnings = [json.loads(line) for line in out.splitlines() if "state_not_writable" in line]
    assert len(warnings) == 1, out
    assert warnings[0]["level"] == "warning" and warnings[0]["path"] == str(car.state / "locks")
    assert "writable directory" in warnings[0]["hint"]
    assert raw.read_bytes() == before and not view_path_for(raw).exists()


def test_a_view_that_cannot_be_written_is_one_line_for_snapshots_and_state_db_sessions(tmp_path: Path) -> None:
    """The view itself (not the sidecar's state): a directory where the view belongs fails for root too."""
    from structlog.testing import capture_logs

    from tests.support import make_state_db
    from timmy_compactor.sidecar import sweep, work
    from timmy_compactor.sidecar.records import Records

    car = Sidecar(tmp_path, "sqlite", window=30_000)
    raw = write_json(car.sessions / "session_a.json", big_session("a"))
    before = raw.read_bytes()
    view_path_for(raw).mkdir()
    proc = car.cli("sweep", "--now")
    assert proc.returncode == 0 and "Traceback" not in proc.stdout + proc.stderr, proc.stderr
    errors = [json.loads(line) for line in proc.stderr.splitlines() if '"view_not_written"' in line]
    assert len(errors) == 1 and str(view_path_for(raw)) in errors[0]["error"], proc.stderr
    assert "failed 1" in proc.stdout and raw.read_bytes() == before

    config = load_config(car.config_path)
    make_state_db(config.hermes_home / "state.db", "s1", tool_session(60))
    db_view = view_path(config.sessions_dir, "s1")
    db_view.mkdir()
    with capture_logs() as logs:
        result = work.process("s1", config, Records(config.state_dir))
    assert result.action == "write_failed" and str(db_view) in (result.reason or "")
    assert [e["event"] for e in logs if e["log_level"] in ("warning", "error")] == ["view_not_written"]
    records = Records(config.state_dir)
    assert "s1" in sweep.sweep_sources(config, records).stale  # retried by the next sweep
    db_view.rmdir()
    assert work.process("s1", config, records).action == "written"
    assert "s1" not in sweep.sweep_sources(config, records).stale


def test_a_killed_process_its_parent_has_not_reaped_yet_counts_as_dead() -> None:
    """A zombie (exited, not yet waited for) writes nothing any more: its temp files and leases are
    a dead process's, not a live one's."""

    from timmy_compactor.atomic import pid_is_dead

    child = subprocess.Popen(["sleep", "30"])
    try:
        assert not pid_is_dead(child.pid)
        child.kill()
        assert wait_for(lambda: pid_is_dead(child.pid), timeout=10)  # before any wait(): a zombie
    finally:
        child.kill()
        child.wait()
    assert pid_is_dead(child.pid)
