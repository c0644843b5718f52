"""Issue 21, items 1-3: trust nothing from state.db. An unreadable database is unavailable, never
"every session deleted"; an id from it never names a path outside the sessions folder; one bad row
costs its own session and nothing else. Real files, real SQLite, the real CLI and sidecar processes."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support import REPO, VENV_BIN, Sidecar, add_db_session, make_state_db, tool_session, wait_for
from timmy_compactor.config import load_config
from timmy_compactor.sessions.names import file_id
from timmy_compactor.sidecar import sweep, work
from timmy_compactor.sidecar.records import Records


def events(text: str) -> list[dict[str, Any]]:
    """The JSON log lines of a process's output (other lines skipped)."""
    out = []
    for line in text.splitlines():
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
    return out


def named(runs: list[subprocess.CompletedProcess[str]], event: str) -> list[dict[str, Any]]:
    return [e for run in runs for e in events(run.stderr) if e.get("event") == event]


def views(car: Sidecar) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(car.sessions.glob("compacted_*"))}


def full_log(car: Sidecar) -> str:
    return "".join(p.read_text(errors="replace") for p in car.logs.values())


def three_db_sessions(car: Sidecar) -> Path:
    path = car.root / "hermes" / "state.db"
    make_state_db(path, "s1", tool_session(40))
    for sid in ("s2", "s3"):
        add_db_session(path, sid, tool_session(40))
    return path


def append_row(path: Path, session_id: str, content: str) -> None:
    db = sqlite3.connect(path)
    db.execute("INSERT INTO messages (session_id, role, content) VALUES (?, 'user', ?)", (session_id, content))
    db.commit()
    db.close()


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


# ---------------------------------------------------------------- 1. unavailable is not deleted


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
    assert work.process_db_session("s1", config, records).action == "written"
    view = work.db_view_path(config, "s1")
    made = view.read_bytes()
    snapshot = car.sessions / "session_s1.json"  # a frozen snapshot of the same session, fewer messages
    snapshot.write_text(json.dumps({"session_id": "s1", "messages": tool_session(30)}))
    undo = break_state_db(path, "schema")
    try:
        result = work.process_session(snapshot, config, records)
        assert result.action == "deferred" and "state.db unavailable (schema)" in (result.reason or "")
        assert view.read_bytes() == made
        snapshot.unlink()
        assert work.process_session(snapshot, config, records).action == "deferred"
        assert view.read_bytes() == made, "a snapshot gone while state.db is unreadable says nothing of its view"
        assert sweep.remove_orphan_views(config, records) == 0
        assert work.process_db_session("s1", config, records).action == "deferred"
    finally:
        undo()
    assert view.read_bytes() == made
    assert sweep.remove_orphan_views(config, records) == 0  # readable again: s1 is there, its view stays


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


# ---------------------------------------------------------------- 2. one naming rule


HOSTILE = ("x/../../../escaped", "y/../../escaped2", "..", "a\x00b", "z" * 300, "c:\\win\\path", "%2e%2e")


def test_file_id_keeps_hermes_ids_and_turns_any_other_into_one_safe_component() -> None:
    for normal in ("20260425_143012_a1b2c3", "0f8fad5b-d9cb-469f-a165-70867728950e", "s1", "cron_job-7"):
        assert file_id(normal) == normal  # existing views keep their names
    seen = set()
    for bad in HOSTILE:
        name = file_id(bad)
        assert "/" not in name and "\\" not in name and "\x00" not in name and ".." not in name, name
        assert 0 < len(name) <= 109 and name not in (".", "..")
        seen.add(name)
    assert len(seen) == len(HOSTILE), "two ids must not share a name"
    assert file_id("a b") != file_id("a_b") and file_id("a.b") != file_id("a_b")
    from timmy_compactor.sessions.names import UnsafeIdError

    for refused in ("", "   ", "q" * 1_001, None, b"bytes"):
        with pytest.raises(UnsafeIdError):
            file_id(refused)


def test_file_id_is_the_name_hermes_gives_the_snapshot() -> None:
    """A state.db session's view must sit beside the snapshot Hermes writes for it."""
    run_agent = pytest.importorskip("run_agent", reason="hermes-agent is not installed")
    for session_id in (*HOSTILE, "20260425_143012_a1b2c3", "a.b", "_x_", "üñí", "a%2F"):
        assert file_id(session_id) == run_agent._safe_session_filename_component(session_id), session_id


def test_a_hostile_id_never_writes_outside_the_sessions_folder(tmp_path: Path) -> None:
    """The issue's attack: a directory (or a symlink) named `session_<x>` in the sessions folder and an
    id `x/../../../escaped` wrote a full view into HOME. Every view must land in the sessions folder."""
    car = Sidecar(tmp_path, "sqlite", window=8_000)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (car.sessions / "session_x").mkdir()
    (car.sessions / "session_y").symlink_to(outside, target_is_directory=True)
    path = car.root / "hermes" / "state.db"
    make_state_db(path, "x/../../../escaped", tool_session(40))
    add_db_session(path, "y/../escaped2", tool_session(40))
    add_db_session(path, "s1", tool_session(40))
    everything_before = {p for p in tmp_path.rglob("*") if car.sessions not in p.parents}
    run = car.cli("sweep", "--now", "--json")
    assert json.loads(run.stdout) == {"sessions": 3, "written": 3}, run.stderr
    assert {p for p in tmp_path.rglob("*") if car.sessions not in p.parents} - everything_before <= {
        p for p in tmp_path.rglob("*") if car.state in p.parents or p == car.state or p.name.endswith(".log")
    }, "a file was written outside the sessions and state folders"
    assert list(outside.iterdir()) == [] and list((car.sessions / "session_x").iterdir()) == []
    names = sorted(p.name for p in car.sessions.glob("compacted_*"))
    assert names == sorted(
        f"compacted_session_{file_id(i)}.json" for i in ("x/../../../escaped", "y/../escaped2", "s1")
    )
    again = car.cli("sweep", "--now", "--json")  # the views are known: none is an orphan, none redone
    assert json.loads(again.stdout) == {"sessions": 0}, again.stderr
    assert sorted(p.name for p in car.sessions.glob("compacted_*")) == names
    show = car.cli("show", "x/../../../escaped", "--ref", "0")  # recall by the real id finds its rows
    assert show.returncode == 0 and "fix the bug in /srv/app/main.py" in show.stdout, show.stderr


def test_inside_refuses_paths_that_leave_their_folder(tmp_path: Path) -> None:
    from timmy_compactor.sessions.names import OutsideFolderError, inside
    from timmy_compactor.sessions.rawstore import RawStore

    folder = tmp_path / "sessions"
    folder.mkdir()
    (folder / "session_x").mkdir()
    (folder / "link").symlink_to(tmp_path, target_is_directory=True)
    assert inside(folder / "compacted_session_a.json", folder) == folder.resolve() / "compacted_session_a.json"
    for escaping in (folder / "session_x" / ".." / ".." / "escaped.json", folder / "link" / "v.json", folder / ".."):
        with pytest.raises(OutsideFolderError):
            inside(escaping, folder)
    store = RawStore(tmp_path / "engine")
    for session_id in HOSTILE:
        assert store.directory(session_id).parent == (tmp_path / "engine").resolve()


# ---------------------------------------------------------------- 3. one bad row costs its own session only

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


# ---------------------------------------------------------------- 4. a commit enqueues what changed, once


def test_a_commit_enqueues_only_changed_sessions_and_never_one_already_waiting(tmp_path: Path) -> None:
    """The real app on its real SQLite queue, with no consumer: what each sweep puts in the queue."""
    from timmy_compactor.sidecar.app import make_app

    car = Sidecar(tmp_path, "sqlite", window=8_000)
    path = three_db_sessions(car)
    app = make_app(load_config(car.config_path))
    sweep = app.sweep_sessions.call_local
    assert sweep(db_only=True) == 3 and app.huey.pending_count() == 3
    for k in range(5):  # Hermes goes on writing while the tasks wait: nothing more is enqueued
        append_row(path, "s1", f"write {k}")
        assert sweep(db_only=True) == 0
    assert app.huey.pending_count() == 3
    while (task := app.huey.dequeue()) is not None:  # a consumer runs the three tasks
        app.huey.execute(task)
    assert app.records().waiting() == set()
    assert sweep(db_only=True) == 0, "nothing changed since the tasks read the rows"
    append_row(path, "s2", "after the task ran")
    assert sweep(db_only=True) == 1 and app.huey.pending_count() == 1  # s2 alone, s1 and s3 unchanged
    assert app.records().waiting() == {"db:s2"}
    assert app.records().waiting(ttl=0) == set(), "a task waiting too long (a flushed queue) no longer blocks"


def test_a_commit_sweep_removes_the_views_of_deleted_sessions_without_listing_the_folder(tmp_path: Path) -> None:
    from timmy_compactor.sidecar.app import make_app

    car = Sidecar(tmp_path, "sqlite", window=8_000)
    path = three_db_sessions(car)
    config = load_config(car.config_path)
    app = make_app(config)
    for session_id in ("s1", "s2", "s3"):
        assert work.process_db_session(session_id, config, app.records()).action == "written"
    orphan = car.sessions / "compacted_session_gone.json"  # a snapshot's view whose raw went: the full sweep's
    orphan.write_text("{}")
    db = sqlite3.connect(path)  # `hermes sessions delete s2`
    db.execute("DELETE FROM messages WHERE session_id = 's2'")
    db.execute("DELETE FROM sessions WHERE id = 's2'")
    db.commit()
    db.close()
    assert app.sweep_sessions.call_local(db_only=True) == 0
    assert sorted(p.name for p in car.sessions.glob("compacted_*")) == [
        "compacted_session_gone.json",
        "compacted_session_s1.json",
        "compacted_session_s3.json",
    ]
    assert app.records().get("db:s2") is None
    app.sweep_sessions.call_local()
    assert not orphan.exists()


def test_a_snapshot_named_by_file_id_is_its_state_db_session(tmp_path: Path) -> None:
    car = Sidecar(tmp_path, "sqlite", window=8_000)
    hostile = "x/../../../escaped"
    make_state_db(car.root / "hermes" / "state.db", hostile, tool_session(40))
    config = load_config(car.config_path)
    snapshot = car.sessions / f"session_{file_id(hostile)}.json"  # what Hermes writes for it
    snapshot.write_text(json.dumps({"session_id": hostile, "messages": tool_session(10)}))
    result = work.process_session(snapshot, config, Records(config.state_dir))
    assert (result.path, result.action) == (f"db:{hostile}", "written")


def test_the_export_names_a_hostile_id_by_its_file_id(tmp_path: Path) -> None:
    from timmy_compactor.export import export_sessions

    car = Sidecar(tmp_path, "sqlite", window=8_000)
    hostile = "x/../../../escaped\nFAKE log line"
    make_state_db(car.root / "hermes" / "state.db", hostile, tool_session(4))
    add_db_session(car.root / "hermes" / "state.db", "blob", [{"role": "user", "content": b"\x00\x01"}])
    summary = export_sessions(car.sessions, tmp_path / "out", hermes_home=car.root / "hermes", progress=False)
    assert summary.exported == 1 and [p.file for p in summary.failed] == ["state.db#blob"]
    (record,) = [json.loads(line) for line in (tmp_path / "out" / "conversations.jsonl").read_text().splitlines()]
    assert record["id"] == hostile  # the data keeps the real id
    assert record["source"]["file"] == f"state.db#{file_id(hostile)}"  # names never carry it raw


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
