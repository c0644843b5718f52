"""sidecar/status.py: `status`, what it says of the sidecar, the sources and the views, and `status --check`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support import (
    Sidecar,
    assistant,
    call,
    free_port,
    make_state_db,
    pending_session,
    stop_consumer_script,
    tool,
    tool_session,
    user,
    write_session,
)
from tests.support_homes import config_for, db_status, start_sidecar_sh
from tests.support_homes import write_default_config as write_config
from timmy_compactor.cli import main
from timmy_compactor.compactor import compact_to_view
from timmy_compactor.config import load_config
from timmy_compactor.sessions.files import META_KEY
from timmy_compactor.sessions.names import snapshot_path
from timmy_compactor.sessions.statedb import StateDB, db_session
from timmy_compactor.sidecar.records import Records
from timmy_compactor.sidecar.running import sidecar_lock
from timmy_compactor.sidecar.status import view_orphans


def test_status_survives_a_snapshot_nested_too_deep_to_compare(tmp_path: Path) -> None:
    car = Sidecar(tmp_path, "sqlite", window=8_000)
    make_state_db(car.root / "hermes" / "state.db", "s1", tool_session(4))
    deep = "[" * 1_000 + "]" * 1_000  # orjson reads it (up to 1,024 levels); json.dumps cannot write it
    messages = tool_session(4)  # as many messages as the rows: the contents are compared
    messages[0]["content"] = "DEEP"
    (car.sessions / "session_s1.json").write_text(json.dumps({"messages": messages}).replace('"DEEP"', deep))
    status = car.cli("status", "--json")
    assert status.returncode == 0 and "Traceback" not in status.stderr, status.stderr
    assert json.loads(status.stdout)["sources"]["state_db"]["snapshots_of_these"]["absent"] == 1


# ---------------------------------------------------------------- a current snapshot; a call awaiting its result


def test_a_current_snapshot_is_current_despite_bookkeeping_keys(home: Path, tmp_path: Path) -> None:
    messages = [user("list /srv"), assistant("", call("c1", "terminal", command="ls /srv")), tool("c1", "a b")]
    messages.append(assistant("two entries"))
    make_state_db(home / "state.db", "s1", messages)
    import sqlite3

    db = sqlite3.connect(home / "state.db")
    db.execute("UPDATE messages SET timestamp = 1.7e9 + id")  # database rows carry timestamps
    db.commit()
    db.close()
    snapshot = [
        m
        | {"_db_persisted": True}
        | ({"name": "terminal"} if m["role"] == "tool" else {})
        | (
            {"tool_calls": [c | {"call_id": c["id"], "response_item_id": "r1"} for c in m["tool_calls"]]}
            if m.get("tool_calls")
            else {}
        )
        for m in messages
    ]
    config = config_for(home, tmp_path)
    path = snapshot_path(config.sessions_dir, "s1")
    document = {"session_id": "s1", "model": "test-model", "system_prompt": "You are terse.", "tools": []}
    write_session(path, document | {"messages": snapshot})
    _, state = db_status(config, "s1")
    assert state == "current"
    write_session(path, document | {"messages": snapshot[:-1]})  # a message behind: frozen
    assert db_status(config, "s1")[1] == "frozen"
    changed = [*snapshot[:-1], snapshot[-1] | {"content": "three entries"}]
    write_session(path, document | {"messages": changed})
    assert db_status(config, "s1")[1] == "frozen"


def test_status_does_not_count_a_call_awaiting_its_result(home: Path, tmp_path: Path) -> None:
    make_state_db(home / "state.db", "s1", pending_session())
    config = config_for(home, tmp_path, window=4_096)
    db = StateDB(home / "state.db")
    outcome = compact_to_view(db_session(db, "s1", snapshot_path(config.sessions_dir, "s1")), config)
    assert outcome.action == "written", outcome.reason
    view = json.loads(outcome.view_path.read_text())  # type: ignore[union-attr]
    assert view["messages"][-1]["tool_calls"][0]["id"] == "cz"
    status, _ = db_status(config, "s1")
    assert status.view == "fresh" and status.orphans == 0
    broken = tmp_path / "compacted_session_x.json"
    broken.write_text(json.dumps({"messages": [user("a"), tool("c9", "lost"), user("b")], META_KEY: {}}))
    assert view_orphans(broken) == 1


# ---------------------------------------------------------------- status --check


def check(car: Sidecar, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(["status", "--check", "--config", str(car.config_path)])
    return code, capsys.readouterr().out


def test_status_check_is_0_when_healthy_and_3_when_no_sidecar_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    car = Sidecar(tmp_path, "sqlite")
    code, out = check(car, capsys)
    assert code == 3 and out.startswith("unhealthy: no sidecar runs on this home"), out
    assert not car.state.exists()  # checking creates nothing
    with sidecar_lock(car.state, car.sessions):  # what the running watcher holds
        code, out = check(car, capsys)
    assert code == 0 and out.startswith("healthy: sidecar running, queue depth 0"), out
    assert len(out.splitlines()) == 1


def test_status_check_is_4_when_the_queue_is_unreachable(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    car = Sidecar(tmp_path, "redis", f"redis://:s3cret@127.0.0.1:{free_port()}/0")
    with sidecar_lock(car.state, car.sessions):
        code, out = check(car, capsys)
    assert code == 4, out
    assert out.startswith("unhealthy: queue (redis) unreachable: redis://:***@127.0.0.1:"), out
    assert "s3cret" not in out and "Traceback" not in out


def test_status_check_is_5_when_sessions_fail(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    car = Sidecar(tmp_path, "sqlite")
    records = Records(load_config(car.config_path).state_dir)
    raw = str(car.sessions / "session_x.json")
    records.put("file", "x", mark=[1, 2], name=raw, sha256="0" * 64, action="write_failed", reason="disk full")
    with sidecar_lock(car.state, car.sessions):
        code, out = check(car, capsys)
        assert code == 5 and out == "unhealthy: 1 session(s) failed (see `timmy-compactor status`)\n", out
        records.put("file", "x", mark=[1, 3], name=raw, sha256="1" * 64, action="written")  # it works again
        assert check(car, capsys)[0] == 0
    code, out = check(car, capsys)  # several problems: the first one's code, a line for each
    assert code == 3 and len(out.splitlines()) == 1


# ---------------------------------------------------------------- the running sidecar, and a second one refused


def test_status_shows_the_running_sidecar_and_a_second_one_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.support import wait_for
    from timmy_compactor.sidecar.running import running

    config, sessions = write_config(tmp_path, workers=3, debounce_ms=50)
    state = tmp_path / "state"
    assert main(["status", "--json", "--config", str(config)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["sidecar"] == {"running": None, "queue_depth": 0, "queue_error": None, "last_sweep": None}
    assert not state.exists()  # checking creates nothing

    first, first_log = start_sidecar_sh(tmp_path, config, "first")
    try:
        assert wait_for(lambda: running(state) is not None and (state / "sidecar.db").exists(), timeout=60), (
            first_log.read_text()
        )
        info = running(state)
        assert info is not None and info["sessions_dir"] == str(sessions)
        # huey.workers is honoured by huey_consumer.sh
        assert wait_for(lambda: "3 x process" in first_log.read_text() or "with 3 process" in first_log.read_text())
        (sessions / "session_bad.json").write_text("{ not json")
        import os
        import time

        os.utime(sessions / "session_bad.json", (time.time() - 60, time.time() - 60))
        assert main(["enqueue", str(sessions / "session_bad.json"), "--config", str(config)]) == 0
        assert wait_for(lambda: "session_unreadable" in first_log.read_text(), timeout=20), first_log.read_text()
        capsys.readouterr()

        def status() -> dict[str, Any]:
            assert main(["status", "--json", "--config", str(config)]) == 0
            return dict(json.loads(capsys.readouterr().out))

        # a half-written file is retried a few times before it counts as bad (each retry passes through
        # the queue again): wait until it is recorded as bad and the queue has drained, in one reading
        seen: dict[str, Any] = {}

        def settled() -> bool:
            seen.clear()
            seen.update(status())
            bad = any(e["session"] == "session_bad.json" for e in seen["last_errors"])
            return bad and seen["sidecar"]["queue_depth"] == 0

        assert wait_for(settled, timeout=60), seen
        data = seen
        car = data["sidecar"]
        assert car["running"]["pid"] == info["pid"]
        assert car["queue_depth"] == 0 and car["queue_error"] is None
        assert car["last_sweep"] is not None and car["last_sweep"]["at"] > 0
        errors = {e["session"]: e for e in data["last_errors"]}
        assert errors["session_bad.json"]["action"] == "bad_input"
        assert "not json" not in json.dumps(errors)  # the reason, never the content
        assert main(["status", "--config", str(config)]) == 0
        assert f"sidecar: running, PID {info['pid']}" in capsys.readouterr().out

        second, second_log = start_sidecar_sh(tmp_path, config, "second")
        assert second.wait(timeout=60) != 0
        text = second_log.read_text()
        assert f"a sidecar already runs for {state} (PID {info['pid']}" in text
        assert "Traceback" not in text and "huey" not in text.lower().replace("huey.workers", "")
        assert first.poll() is None
    finally:
        assert stop_consumer_script(first) == 0, first_log.read_text()[-3000:]
    assert running(state) is None


def test_a_starts_check_is_never_seen_as_a_running_sidecar(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`huey_consumer.sh` runs `watch --check` before it starts anything: a `status` during that check
    must not report a sidecar (the check held the lock, so a start looked running, then stopped, then
    running again). The check still refuses while a sidecar holds the lock."""
    from timmy_compactor.sidecar import cli as sidecar_cli
    from timmy_compactor.sidecar.running import running

    car = Sidecar(tmp_path, "sqlite")
    seen_during_check: list[object] = []
    monkeypatch.setattr(sidecar_cli, "check_backend", lambda config: seen_during_check.append(running(car.state)))
    assert main(["watch", "--check", "--config", str(car.config_path)]) == 0
    assert seen_during_check == [None]
    with sidecar_lock(car.state, car.sessions):
        assert main(["watch", "--check", "--config", str(car.config_path)]) == 2
    assert seen_during_check == [None]


def test_status_says_which_trigger_applies_and_why(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 29: the views' trigger is our config's; inside Hermes, Hermes' own for the window unless
    the file sets compaction.trigger_threshold (`status` and `--json` say which and why)."""
    path, _ = write_config(tmp_path)  # a 20,000-token window: Hermes triggers at 0.85 of it
    assert main(["--config", str(path), "status"]) == 0
    out = capsys.readouterr().out
    line = next(line for line in out.splitlines() if line.strip().startswith("trigger:"))
    assert f"views at 0.60 (compaction.trigger_threshold 0.6 ({path}))" in line
    assert "inside Hermes 0.85 (Hermes' threshold: " in line and "0.85 of 20,000 tokens)" in line
    data = json.loads(path.read_text())
    data["hermes"] = {"trigger_threshold": 0.7}
    (hermes := tmp_path / "hermes").mkdir(exist_ok=True)
    (hermes / "config.yaml").write_text("compression:\n  threshold: 0.8\n")
    path.write_text(json.dumps(data))
    assert main(["--config", str(path), "status", "--json"]) == 0
    triggers = json.loads(capsys.readouterr().out)["triggers"]
    assert triggers["views"]["ratio"] == 0.6 and triggers["inside_hermes"]["ratio"] == 0.7
    assert str(path) in triggers["inside_hermes"]["reason"]
    data.pop("hermes")
    data["model"] = {"context_window": 200_000}
    path.write_text(json.dumps(data))
    assert main(["--config", str(path), "status", "--json"]) == 0
    engine = json.loads(capsys.readouterr().out)["triggers"]["inside_hermes"]
    assert engine["ratio"] == 0.8 and "compression.threshold 0.8" in engine["reason"]  # Hermes' own setting


# ---------------------------------------------------------------- a summary by default, the list with --all


def test_status_summarises_the_sessions_above_the_trigger_and_lists_them_with_all(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 33 item 5: with many sessions above the trigger, `status` is a summary and names a few
    (a state.db session as state.db#<id>, never an invented session_<id>.json); `--all` lists them all."""
    car = Sidecar(tmp_path, "sqlite", window=4_000)
    for k in range(30):
        write_session(car.sessions / f"session_f{k:02}.json", {"session_id": f"f{k:02}", "messages": tool_session(8)})
    make_state_db(car.root / "hermes" / "state.db", "dbonly", tool_session(12))

    def status(*flags: str) -> list[str]:
        assert main(["status", *flags, "--config", str(car.config_path)]) == 0
        return capsys.readouterr().out.splitlines()

    lines = status()
    assert len(lines) <= 15, lines
    assert "  above threshold: 31 session(s), the largest state.db#dbonly at " in "\n".join(lines), lines
    named = [line for line in lines if line.startswith("  missing ")]
    assert len(named) == 5 and named[0] == "  missing    state.db#dbonly", lines
    assert lines[-1].startswith("  (26 more; `timmy-compactor status --all` lists"), lines
    every = status("--all")
    listed = [line for line in every if "% of the window  " in line]
    assert len(listed) == 31 and any(line.endswith("  state.db#dbonly: view missing") for line in listed), every
    assert not any("session_dbonly" in line for line in every + lines)


def test_status_says_when_the_sessions_folder_is_missing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    car = Sidecar(tmp_path, "sqlite")
    car.sessions.rmdir()
    assert main(["status", "--config", str(car.config_path)]) == 0
    out = capsys.readouterr().out
    assert f"{car.sessions}: 0 session(s)" in out
    assert "the sessions folder does not exist: Hermes creates it on its first run (or set sessions.dir)" in out
    assert main(["status", "--json", "--config", str(car.config_path)]) == 0
    assert json.loads(capsys.readouterr().out)["sessions_dir_exists"] is False
    assert not car.sessions.exists()  # status creates nothing
