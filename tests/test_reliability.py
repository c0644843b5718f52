"""Issue 15, items 2-8 and the minor list: hostile input, supervision, deleted and symlinked sessions,
state.db self-triggering, private state, the export's resilience. Real files, real watchdog events,
real processes."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import stat
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support import REPO, VENV_BIN, Sidecar, dead_writers_temp, tool_session, wait_for
from timmy_compactor.atomic import temp_tag
from timmy_compactor.config import load_config
from timmy_compactor.core.pipeline import compact
from timmy_compactor.core.types import Settings
from timmy_compactor.sessions.names import view_path_for
from timmy_compactor.sessions.statedb import StateDB


def deep_list(depth: int) -> list[Any]:
    root: list[Any] = []
    node = root
    for _ in range(depth - 1):
        child: list[Any] = []
        node.append(child)
        node = child
    return root


def write_json(path: Path, document: Any) -> Path:
    path.write_text(json.dumps(document, indent=2), encoding="utf-8")
    os.chmod(path, 0o600)
    return path


# ---------------------------------------------------------------- 2. hostile tool output


@pytest.mark.parametrize("depth", [300, 1000])
def test_a_message_too_deep_to_analyse_is_kept_verbatim_and_the_rest_compacted(depth: int) -> None:
    messages = tool_session(12)
    bad = [i for i, m in enumerate(messages) if m["role"] == "tool"][1]
    messages[bad]["content"] = [{"type": "text", "text": "fetched"}, {"type": "data", "value": deep_list(depth)}]
    result = compact(messages, Settings(context_window=4000), force=True)
    assert result.report.verified, result.report.failure
    assert result.report.rules["unanalysable"] == 1
    # the raw message itself, verbatim; or, folded, named by the index as a result nobody could read
    index = json.dumps(result.messages)
    assert any(m is messages[bad] for m in result.messages) or "unanalysable: nested deeper than" in index
    assert f"(#{bad})" in index or any(m is messages[bad] for m in result.messages)
    assert result.report.tokens_after < result.report.tokens_before / 2


@pytest.mark.parametrize(
    "text", ["<returncode>" + "9" * 5000 + "</returncode>", "[" * 1500 + "]" * 1500, '{"a":' * 1500 + "}" * 1500]
)
def test_hostile_plain_text_does_not_sink_the_session(text: str) -> None:
    messages = tool_session(12)
    messages[2]["content"] = text
    result = compact(messages, Settings(context_window=4000), force=True)
    assert result.report.verified, result.report.failure
    assert result.report.tokens_after < result.report.tokens_before


# ---------------------------------------------------------------- 3. huey_consumer.sh supervises


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry.name))
    return found


def _child_commands(pid: int) -> dict[int, bytes]:
    """Command lines of pid's children; a short-lived child (a subshell) may vanish while we look."""
    commands = {}
    for child in _children(pid):
        try:
            commands[child] = Path(f"/proc/{child}/cmdline").read_bytes()
        except OSError:
            continue
    return commands


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.parametrize("victim", ["huey_consumer", "timmy-compactor"])
def test_huey_consumer_sh_stops_everything_when_a_child_dies(tmp_path: Path, victim: str) -> None:
    car = Sidecar(tmp_path, "sqlite")
    env = {**car.env, "TIMMY_VENV": str(VENV_BIN.parent), "TIMMY_STOP_SECONDS": "5"}
    script = subprocess.Popen(
        [str(REPO / "huey_consumer.sh")],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:

        def both_running() -> bool:
            names = _child_commands(script.pid)
            return len(names) == 2 and all(b"bin/" in c for c in names.values())

        assert wait_for(both_running, timeout=30)
        kids = _child_commands(script.pid)
        target = next(p for p, cmd in kids.items() if victim.encode() in cmd)
        assert wait_for(lambda: len(_children(target)) >= (2 if victim == "huey_consumer" else 0), timeout=30)
        os.kill(target, signal.SIGKILL)
        code = script.wait(timeout=30)
        err = script.stderr.read().decode() if script.stderr else ""
        assert code != 0
        assert "exited" in err and "stopping" in err
        for pgid in kids:  # each child led its own group: nothing of either is left
            assert wait_for(lambda pgid=pgid: not _group_alive(pgid), timeout=30), f"group {pgid} survived"
    finally:
        if script.poll() is None:
            os.killpg(script.pid, signal.SIGKILL)
            script.wait()
        for pid in _children(script.pid):
            os.kill(pid, signal.SIGKILL)


# ---------------------------------------------------------------- 4./5. deleted sessions, symlinked dir


def _big_session(session_id: str) -> dict[str, Any]:
    return {"session_id": session_id, "model": "m", "messages": tool_session(40)}


def test_a_deleted_sessions_view_is_removed_while_the_sidecar_runs(tmp_path: Path) -> None:
    car = Sidecar(tmp_path, "sqlite", window=8_000)
    car.start("consumer")
    car.start("watcher")
    try:
        assert car.wait_watching(), car.log_text()
        raw = write_json(car.sessions / "session_gone.json", _big_session("gone"))
        assert wait_for(view_path_for(raw).exists, timeout=30), car.log_text()
        raw.unlink()
        assert wait_for(lambda: not view_path_for(raw).exists(), timeout=30), car.log_text()
    finally:
        car.stop_all()


def test_the_sweep_removes_views_whose_raw_session_is_gone(tmp_path: Path) -> None:
    from timmy_compactor.sidecar import work
    from timmy_compactor.sidecar.records import Records

    car = Sidecar(tmp_path, "sqlite", window=8_000)
    config = load_config(car.config_path)
    records = Records(config.state_dir)
    kept = write_json(car.sessions / "session_kept.json", _big_session("kept"))
    gone = write_json(car.sessions / "session_gone.json", _big_session("gone"))
    for raw in (kept, gone):
        assert work.process_session(raw, config, records).action == "written"
    gone.unlink()
    assert work.remove_orphan_views(config, records) == 1
    assert view_path_for(kept).exists() and not view_path_for(gone).exists()


@pytest.mark.parametrize("now", [True, False])
def test_the_cli_sweep_removes_views_whose_raw_session_is_gone_and_says_how_many(
    tmp_path: Path, now: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    """`timmy-compactor sweep` (with or without --now) removes orphan views as the periodic sweep does."""
    from timmy_compactor.cli import main
    from timmy_compactor.sidecar import work
    from timmy_compactor.sidecar.records import Records

    car = Sidecar(tmp_path, "sqlite", window=8_000)
    config = load_config(car.config_path)
    records = Records(config.state_dir)
    kept = write_json(car.sessions / "session_kept.json", _big_session("kept"))
    gone = [write_json(car.sessions / f"session_gone{i}.json", _big_session(f"gone{i}")) for i in range(2)]
    for raw in (kept, *gone):
        assert work.process_session(raw, config, records).action == "written"
    for raw in gone:
        raw.unlink()
    capsys.readouterr()  # what the set-up logged
    flags = ["--now"] if now else []
    assert main(["sweep", *flags, "--json", "--config", str(car.config_path)]) == 0
    assert json.loads(capsys.readouterr().out) == {"sessions": 0, "orphan_views_removed": 2}
    assert view_path_for(kept).exists()
    assert not any(view_path_for(raw).exists() for raw in gone)
    assert all(records.get(str(raw)) is None for raw in gone)
    for raw in gone:  # once more, in words
        write_json(view_path_for(raw), {"messages": []})
    assert main(["sweep", *flags, "--config", str(car.config_path)]) == 0
    line = capsys.readouterr().out.strip()
    assert line.endswith("orphan view(s) removed 2"), line
    assert not any(view_path_for(raw).exists() for raw in gone)


def test_the_cli_sweep_covers_state_db_sessions(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Hermes ships with JSON snapshots off: `sweep --now` must compact sessions that live in state.db only."""
    from tests.support import make_state_db
    from timmy_compactor.cli import main
    from timmy_compactor.sidecar import work

    car = Sidecar(tmp_path, "sqlite", window=8_000)
    config = load_config(car.config_path)
    make_state_db(config.hermes_home / "state.db", "dbonly", tool_session(40))
    argv = ["sweep", "--now", "--json", "--config", str(car.config_path)]
    assert main(argv) == 0
    assert json.loads(capsys.readouterr().out) == {"sessions": 1, "written": 1}
    assert work.db_view_path(config, "dbonly").exists()
    assert main(argv) == 0
    assert json.loads(capsys.readouterr().out) == {"sessions": 0}  # nothing changed since
    assert main([*argv, "--all"]) == 0
    assert json.loads(capsys.readouterr().out) == {"sessions": 1, "unchanged": 1}


def _watch_in_thread(sessions: Path, hermes_home: Path | None, submit: Any) -> threading.Event:
    from timmy_compactor.sidecar.watcher import watch

    stop, ready = threading.Event(), threading.Event()
    thread = threading.Thread(
        target=watch,
        args=(sessions, submit),
        kwargs={"stop": stop, "debounce_ms": 50, "hermes_home": hermes_home, "ready": ready},
    )
    thread.start()
    stop.thread = thread  # type: ignore[attr-defined]
    assert ready.wait(30), "the watcher never started watching"
    return stop


def _stop(stop: threading.Event) -> None:
    stop.set()
    stop.thread.join(timeout=10)  # type: ignore[attr-defined]


def test_a_symlinked_sessions_dir_gets_watcher_events(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    link = tmp_path / "hermes" / "sessions"
    link.parent.mkdir()
    link.symlink_to(elsewhere)
    seen: list[str] = []
    stop = _watch_in_thread(link, None, seen.append)
    try:
        write_json(link / "session_a.json", _big_session("a"))
        assert wait_for(lambda: any(p.endswith("session_a.json") for p in seen), timeout=30)
    finally:
        _stop(stop)


# ---------------------------------------------------------------- 6. state.db: no self-triggering


def test_the_sidecars_own_state_db_reads_do_not_trigger_it(tmp_path: Path) -> None:
    home = tmp_path / "hermes"
    (home / "sessions").mkdir(parents=True)
    db = sqlite3.connect(home / "state.db")
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("CREATE TABLE t (x)")
    db.execute("INSERT INTO t VALUES (1)")
    db.commit()
    db.close()
    reader = StateDB(home / "state.db")
    submitted: list[str] = []

    def submit(path: str) -> None:  # what a sweep does: read state.db, read-only
        submitted.append(path)
        with reader.connect() as conn:
            conn.execute("SELECT * FROM t").fetchall()

    stop = _watch_in_thread(home / "sessions", home, submit)
    try:
        with reader.connect() as conn:  # the startup sweep's read
            conn.execute("SELECT * FROM t").fetchall()
        time.sleep(3)
        assert submitted == []  # idle: no sweep loop
        writer = sqlite3.connect(home / "state.db")
        writer.execute("INSERT INTO t VALUES (2)")
        writer.commit()
        assert wait_for(lambda: len(submitted) >= 1, timeout=30)  # a real write still triggers
        writer.close()
        time.sleep(1.5)
        count = len(submitted)
        time.sleep(2)
        assert len(submitted) == count, "the reads triggered more sweeps"
    finally:
        _stop(stop)


# ---------------------------------------------------------------- 7. private state, no content in reasons


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
        raw = write_json(car.sessions / "session_p.json", _big_session("p"))
        assert work.process_session(raw, config, records).action == "written"
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
    session = _big_session("secret")
    secret = "hunter2SECRETpw"
    session["messages"][4]["content"] += f"\ntoken=https://alice:{secret}@db.example.org/x\nError: boom {secret}"
    raw = write_json(car.sessions / "session_secret.json", session)
    result = work.process_session(raw, config, records)
    assert secret not in (result.reason or "")
    for path in config.state_dir.rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path


# ---------------------------------------------------------------- 8. export survives one bad session


def test_one_deeply_nested_session_does_not_abort_the_export(tmp_path: Path) -> None:
    from timmy_compactor.export.run import export_sessions

    sessions = tmp_path / "sessions"
    sessions.mkdir()
    for k in range(3):
        write_json(sessions / f"session_ok{k}.json", {"session_id": f"ok{k}", "messages": tool_session(3)})
    bad = tool_session(3)
    bad[2]["content"] = deep_list(300)
    write_json(sessions / "session_bad.json", {"session_id": "bad", "messages": bad})
    summary = export_sessions(sessions, tmp_path / "out", redact=True, progress=False)
    assert summary.exported == 3
    assert [Path(p.file).name for p in summary.failed] == ["session_bad.json"]
    lines = (tmp_path / "out" / "conversations.jsonl").read_text().splitlines()
    assert len(lines) == 3


def test_a_full_export_keeps_the_records_of_a_half_written_session(tmp_path: Path) -> None:
    from timmy_compactor.export.run import export_sessions

    sessions = tmp_path / "sessions"
    sessions.mkdir()
    for k in range(2):
        write_json(sessions / f"session_s{k}.json", {"session_id": f"s{k}", "messages": tool_session(3)})
    out = tmp_path / "out"
    export_sessions(sessions, out, redact=True, progress=False)
    (sessions / "session_s1.json").write_text('{"session_id": "s1", "messages": [')  # half-written
    summary = export_sessions(sessions, out, redact=True, progress=False, full=True)
    assert "kept" in summary.failed[0].reason
    assert len((out / "conversations.jsonl").read_text().splitlines()) == 2
    manifest = json.loads((out / "manifest.json").read_text())
    assert len(manifest["sessions"]) == 2


# ---------------------------------------------------------------- minor


def _cli(*args: str, config: Path) -> subprocess.CompletedProcess[str]:
    cmd = [str(VENV_BIN / "timmy-compactor"), *args, "--config", str(config)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)


def test_restore_is_byte_exact(tmp_path: Path) -> None:
    car = Sidecar(tmp_path, "sqlite", window=8_000)
    raw = car.sessions / "session_r.json"
    raw.write_bytes(json.dumps(_big_session("r"), indent=2).encode())  # no trailing newline
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
    session = _big_session("big")
    session["messages"][0]["content"] = [{"type": "text", "text": "id below"}, {"n": 2**80 + 1}]
    raw = write_json(car.sessions / "session_big.json", session)
    assert work.process_session(raw, config, Records(config.state_dir)).action == "written"
    view = json.loads(view_path_for(raw).read_text())
    assert view["messages"][0] == session["messages"][0]
    assert str(2**80 + 1) in view_path_for(raw).read_text()


def test_a_session_nested_past_orjsons_write_limit_gets_a_view(tmp_path: Path) -> None:
    from timmy_compactor.sidecar import work
    from timmy_compactor.sidecar.records import Records

    car = Sidecar(tmp_path, "sqlite", window=8_000)
    config = load_config(car.config_path)
    session = _big_session("deep")
    session["messages"][2]["content"] = deep_list(600)
    raw = write_json(car.sessions / "session_deep.json", session)
    result = work.process_session(raw, config, Records(config.state_dir))
    assert result.action == "written", result.reason


def test_a_directory_named_like_a_session_and_an_unwritable_view_are_one_line_failures_recorded_once(
    tmp_path: Path,
) -> None:
    from structlog.testing import capture_logs

    from timmy_compactor.sidecar import work
    from timmy_compactor.sidecar.records import Records

    car = Sidecar(tmp_path, "sqlite", window=8_000)
    config = load_config(car.config_path)
    records = Records(config.state_dir)
    (car.sessions / "session_x.json").mkdir()
    assert work.process_session(car.sessions / "session_x.json", config, records).action == "refused"
    (car.sessions / "session_x.json").rmdir()
    raw = write_json(car.sessions / "session_ro.json", _big_session("ro"))
    view_path_for(raw).mkdir()  # the view cannot be written (as a read-only dir or a full disk would refuse it)
    with capture_logs() as logs:
        result = work.process_session(raw, config, records)
        assert result.action == "write_failed" and "\n" not in (result.reason or "")
        # the machine's fault, not the session's: every sweep tries again, and the view comes once it can
        assert work.stale_sessions(config, records) == [raw]
        assert work.process_session(raw, config, records).action == "write_failed"
    errors = [e for e in logs if e["event"] == "view_not_written" and e["log_level"] == "error"]
    assert len(errors) == 1  # the retry that fails the same way is no second error line
    view_path_for(raw).rmdir()  # disk space freed
    assert work.process_session(raw, config, records).action == "written"
    assert work.stale_sessions(config, records) == []


def test_one_startup_sweep_and_stale_temp_files_cleaned(tmp_path: Path) -> None:
    from timmy_compactor.sidecar import work

    car = Sidecar(tmp_path, "sqlite", window=8_000)
    config = load_config(car.config_path)
    leftover = dead_writers_temp(car.sessions / "compacted_session_a.json")  # a killed writer of this host
    leftover.write_bytes(b"x" * 1000)
    # issue 21.7: another machine's writer (one sessions folder, several hosts) may be mid-write
    elsewhere = car.sessions / ".compacted_session_b.json.other-host-4242-k3j5h2_a.tmp"
    elsewhere.write_bytes(b"x" * 1000)
    live = car.sessions / f".compacted_session_c.json.{temp_tag()}q1w2e3r4.tmp"  # this very process's
    live.write_bytes(b"x")
    ancient = car.sessions / ".compacted_session_d.json.abc123.tmp"  # untagged, a day old: whoever wrote it died
    ancient.write_bytes(b"x")
    os.utime(ancient, (time.time() - 86_400, time.time() - 86_400))
    assert work.startup_sweep_due(config)
    assert not leftover.exists() and not ancient.exists()
    assert elsewhere.exists() and live.exists()
    assert not work.startup_sweep_due(config)  # the second worker's, the watcher's


# ---------------------------------------------------------------- a state the sidecar cannot write


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
    raw = write_json(car.sessions / "session_a.json", _big_session("a"))
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
    write_json(car.sessions / "session_a.json", _big_session("a"))
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
    raw = write_json(car.sessions / "session_a.json", _big_session("a"))
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
    from timmy_compactor.sidecar import work
    from timmy_compactor.sidecar.records import Records

    car = Sidecar(tmp_path, "sqlite", window=30_000)
    raw = write_json(car.sessions / "session_a.json", _big_session("a"))
    before = raw.read_bytes()
    view_path_for(raw).mkdir()
    proc = car.cli("sweep", "--now")
    assert proc.returncode == 0 and "Traceback" not in proc.stdout + proc.stderr, proc.stderr
    errors = [json.loads(line) for line in proc.stderr.splitlines() if '"view_not_written"' in line]
    assert len(errors) == 1 and str(view_path_for(raw)) in errors[0]["error"], proc.stderr
    assert "failed 1" in proc.stdout and raw.read_bytes() == before

    config = load_config(car.config_path)
    make_state_db(config.hermes_home / "state.db", "s1", tool_session(60))
    db_view = work.db_view_path(config, "s1")
    db_view.mkdir()
    with capture_logs() as logs:
        result = work.process_db_session("s1", config, Records(config.state_dir))
    assert result.action == "write_failed" and str(db_view) in (result.reason or "")
    assert [e["event"] for e in logs if e["log_level"] in ("warning", "error")] == ["view_not_written"]
    records = Records(config.state_dir)
    assert "s1" in work.stale_db_sessions(config, records)  # retried by the next sweep
    db_view.rmdir()
    assert work.process_db_session("s1", config, records).action == "written"
    assert "s1" not in work.stale_db_sessions(config, records)


def test_a_killed_process_its_parent_has_not_reaped_yet_counts_as_dead() -> None:
    """A zombie (exited, not yet waited for) writes nothing any more: its temp files and leases are
    a dead process's, not a live one's."""
    import subprocess

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
