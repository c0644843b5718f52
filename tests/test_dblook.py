"""sidecar/dblook.py: state.db readable or unavailable, and why; unavailable keeps every view."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support import REPO, VENV_BIN, Sidecar, append_row, make_state_db, three_db_sessions, tool_session, wait_for
from tests.support_homes import events, named, sidecar_config
from tests.support_homes import write_config_of as write_config
from timmy_compactor.cli import main
from timmy_compactor.config import load_config
from timmy_compactor.sessions.names import view_path
from timmy_compactor.sidecar import sweep, work
from timmy_compactor.sidecar.records import Records


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


# ---------------------------------------------------------------- unavailable is not deleted


def break_state_db(path: Path, cause: str) -> Callable[[], None]:
    """Make state.db unreadable the way `cause` does it; returns what undoes it."""
    if cause == "schema":  # what a Hermes upgrade does
        db = sqlite3.connect(path)
        db.execute("UPDATE schema_version SET version = 23")
        db.commit()
        db.close()

        def undo() -> None:
            fix = sqlite3.connect(path)
            fix.execute("UPDATE schema_version SET version = 22")
            fix.commit()
            fix.close()

        return undo
    if cause == "locked":  # a writer holding an exclusive lock (rollback journal: readers must wait)
        holder = sqlite3.connect(path, isolation_level=None)
        holder.execute("BEGIN EXCLUSIVE")

        def release() -> None:
            holder.execute("ROLLBACK")
            holder.close()

        return release
    if cause == "permission":
        mode = path.stat().st_mode
        os.chmod(path, 0)
        return lambda: os.chmod(path, mode)
    if cause == "corrupt":
        good = path.read_bytes()
        path.write_bytes(b"not a database at all" * 100)
        return lambda: path.write_bytes(good)
    raise AssertionError(cause)


class NobodySidecar(Sidecar):
    """A sidecar whose commands run as the user nobody (`setpriv`), for a test run as root."""

    def cli(self, *argv: str) -> subprocess.CompletedProcess[str]:
        command = [str(VENV_BIN / "timmy-compactor"), *argv, "--config", str(self.config_path)]
        nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
        env = {**self.env, "HOME": str(self.root)}
        return subprocess.run(
            nobody + command, env=env, cwd=REPO, capture_output=True, text=True, timeout=120, check=False
        )


def nobody_sidecar(root: Path) -> NobodySidecar:
    """A sidecar in a folder nobody may enter, its sessions nobody's (state.db, made next, is root's)."""
    if shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: a permission error cannot be made")
    probe = subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", str(VENV_BIN / "timmy-compactor"), "--version"],
        cwd="/",
        capture_output=True,
        timeout=60,
        check=False,
    )
    if probe.returncode != 0:  # a checkout in a 0700 folder (`mktemp -d`): nobody cannot run its venv
        pytest.skip("the user nobody cannot run this checkout's venv: a permission error cannot be made")
    os.chmod(root, 0o755)
    car = NobodySidecar(root / "car", "sqlite", window=8_000)
    for folder in (car.root, car.root / "hermes", car.sessions):
        os.chown(folder, 65534, 65534)
    return car


def views(car: Sidecar) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(car.sessions.glob("compacted_*"))}


def full_log(car: Sidecar) -> str:
    return "".join(p.read_text(errors="replace") for p in car.logs.values())


@pytest.mark.parametrize(
    "cause", ["schema", pytest.param("locked", marks=pytest.mark.slow), "corrupt", "permission"]
)  # locked: each of the 4 commands waits out the 5 s busy timeout once
def test_an_unreadable_state_db_keeps_every_view_says_why_once_and_recovers(tmp_path: Path, cause: str) -> None:
    if cause == "permission" and os.geteuid() == 0:  # root reads any file: the sidecar runs as nobody
        nobody_home = Path(tempfile.mkdtemp(prefix="timmy-nobody-"))
        try:
            unreadable_state_db_case(nobody_sidecar(nobody_home), cause)
        finally:
            shutil.rmtree(nobody_home, ignore_errors=True)
    else:
        unreadable_state_db_case(Sidecar(tmp_path, "sqlite", window=8_000), cause)


def unreadable_state_db_case(car: Sidecar, cause: str) -> None:
    path = three_db_sessions(car)
    os.chmod(path, 0o644)
    first = car.cli("sweep", "--now", "--json")
    assert json.loads(first.stdout) == {"sessions": 3, "written": 3}, first.stderr
    before = views(car)
    assert len(before) == 3

    undo = break_state_db(path, cause)
    try:
        runs = [car.cli("sweep", "--now"), car.cli("sweep", "--now")]
        status = car.cli("status", "--json")
    finally:
        undo()
    assert [r.returncode for r in runs] == [0, 0], runs[0].stderr
    assert views(car) == before, "an unreadable state.db must not cost a view"
    assert named(runs, "view_removed") == []
    warnings = named(runs, "state_db_unavailable")
    assert len(warnings) == 1, [e["event"] for r in runs for e in events(r.stderr)]  # one line per outage
    assert warnings[0]["cause"] == cause
    assert "views are kept" in warnings[0]["hint"]
    assert "Traceback" not in runs[0].stderr + runs[1].stderr
    assert f"state.db unavailable ({cause})" in runs[0].stdout
    source = json.loads(status.stdout)["sources"]["state_db"]
    assert source["usable"] is False and source["unavailable"]["cause"] == cause, status.stderr

    append_row(path, "s1", "and one more thing")  # Hermes goes on once the database is readable again
    back = car.cli("sweep", "--now", "--json")
    assert json.loads(back.stdout) == {"sessions": 1, "written": 1}, back.stderr
    assert len(named([back], "state_db_available_again")) == 1
    after = views(car)
    assert after["compacted_session_s1.json"] != before["compacted_session_s1.json"]
    assert {k: v for k, v in after.items() if "s1" not in k} == {k: v for k, v in before.items() if "s1" not in k}


def test_a_snapshot_never_replaces_or_removes_a_state_db_view_while_the_database_is_unreadable(
    tmp_path: Path,
) -> None:
    car = Sidecar(tmp_path, "sqlite", window=8_000)
    path = three_db_sessions(car)
    config = load_config(car.config_path)
    records = Records(config.state_dir)
    assert work.process("s1", config, records).action == "written"
    view = view_path(config.sessions_dir, "s1")
    made = view.read_bytes()
    snapshot = car.sessions / "session_s1.json"  # a frozen snapshot of the same session, fewer messages
    snapshot.write_text(json.dumps({"session_id": "s1", "messages": tool_session(30)}))
    undo = break_state_db(path, "schema")
    try:
        result = work.process_path(snapshot, config, records)
        assert result.action == "deferred" and "state.db unavailable (schema)" in (result.reason or "")
        assert view.read_bytes() == made
        snapshot.unlink()
        assert work.process_path(snapshot, config, records).action == "deferred"
        assert view.read_bytes() == made, "a snapshot gone while state.db is unreadable says nothing of its view"
        assert sweep.sweep_sources(config, records).removed == 0
        assert work.process("s1", config, records).action == "deferred"
    finally:
        undo()
    assert view.read_bytes() == made
    assert sweep.sweep_sources(config, records).removed == 0  # readable again: s1 is there, its view stays


def test_the_running_sidecar_keeps_views_through_a_hermes_upgrade(tmp_path: Path) -> None:
    """The issue's case: 3 of 3 views gone 0.1 s after a schema change, with the sidecar running."""
    car = Sidecar(tmp_path, "sqlite", window=8_000)
    path = three_db_sessions(car)
    try:
        car.start("consumer")
        car.start("watcher")
        assert car.wait_watching(), car.log_text()
        assert wait_for(lambda: len(views(car)) == 3, timeout=60), car.log_text()
        before = views(car)
        undo = break_state_db(path, "schema")
        assert wait_for(lambda: '"state_db_unavailable"' in full_log(car), timeout=60), car.log_text()
        append_row(path, "s2", "written while the schema is unknown")  # another commit, another sweep
        sweeps = Records(car.state).noted("last_sweep")
        assert wait_for(lambda: Records(car.state).noted("last_sweep") != sweeps, timeout=60), car.log_text()
        assert views(car) == before
        assert '"view_removed"' not in full_log(car)
        undo()
        append_row(path, "s2", "after the upgrade")
        assert wait_for(lambda: views(car)["compacted_session_s2.json"] != before["compacted_session_s2.json"], 60)
        assert wait_for(lambda: '"state_db_available_again"' in full_log(car), timeout=30), car.log_text()
        assert full_log(car).count('"state_db_unavailable"') == 1  # one line for the outage, all processes
    finally:
        car.stop_all()
