"""Operations (issue 21.6): `status --check`, an unreadable sessions folder, the watcher while the
queue is down, kill -9 of `huey_consumer.sh`."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, ClassVar

import pytest

from tests.support import (
    VENV_BIN,
    Sidecar,
    free_port,
    load_sample,
    make_state_db,
    session_variant,
    tool_session,
    wait_for,
    write_like_hermes,
)
from timmy_compactor.cli import main
from timmy_compactor.config import load_config
from timmy_compactor.sidecar.records import Records
from timmy_compactor.sidecar.running import sidecar_lock

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
    records.put(str(car.sessions / "session_x.json"), sha256="0" * 64, action="write_failed", reason="disk full")
    with sidecar_lock(car.state, car.sessions):
        code, out = check(car, capsys)
        assert code == 5 and out == "unhealthy: 1 session(s) failed (see `timmy-compactor status`)\n", out
        records.put(str(car.sessions / "session_x.json"), sha256="1" * 64, action="written")  # it works again
        assert check(car, capsys)[0] == 0
    code, out = check(car, capsys)  # several problems: the first one's code, a line for each
    assert code == 3 and len(out.splitlines()) == 1


# ---------------------------------------------------------------- an unreadable sessions folder


class NobodyCar(Sidecar):
    """A sidecar whose commands run as the user nobody (root reads any folder: chmod 000 stops only others)."""

    nobody: ClassVar[list[str]] = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]

    def cli(self, *argv: str) -> Any:
        import subprocess

        command = [*self.nobody, str(VENV_BIN / "timmy-compactor"), *argv, "--config", str(self.config_path)]
        env = {**self.env, "HOME": str(self.root)}
        return subprocess.run(command, env=env, cwd="/", capture_output=True, text=True, timeout=120, check=False)

    def start_watcher(self) -> Any:
        import subprocess

        log = self.root / "watcher.log"
        self.logs["watcher"] = log
        command = [*self.nobody, str(VENV_BIN / "timmy-compactor"), "watch", "--config", str(self.config_path)]
        with log.open("ab") as out:
            proc = subprocess.Popen(
                command,
                env={**self.env, "HOME": str(self.root)},
                cwd="/",
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.procs["watcher"] = proc
        return proc


def nobody_car() -> NobodyCar:
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to run the sidecar as a user a chmod 000 folder stops")
    root = Path(tempfile.mkdtemp(prefix="timmy-nobody-"))
    os.chmod(root, 0o755)
    car = NobodyCar(root / "car", "sqlite", window=8_000)
    probe = car.cli("--version")
    if probe.returncode != 0:  # a checkout in a 0700 folder: nobody cannot run its venv
        shutil.rmtree(root, ignore_errors=True)
        pytest.skip("the user nobody cannot run this checkout's venv")
    for folder in (car.root, car.root / "hermes", car.sessions):
        os.chown(folder, 65534, 65534)
    return car


def events(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def test_an_unreadable_sessions_folder_is_one_line_per_sweep_and_status_reports_the_rest() -> None:
    car = nobody_car()
    try:
        write_like_hermes(car.sessions / "session_snap.json", session_variant(load_sample(), "snap"))
        os.chown(car.sessions / "session_snap.json", 65534, 65534)
        make_state_db(car.root / "hermes" / "state.db", "s1", tool_session(150))
        first = car.cli("sweep", "--now", "--json")
        assert json.loads(first.stdout)["written"] == 2, first.stderr
        views = sorted(p.name for p in car.sessions.glob("compacted_*"))
        assert len(views) == 2
        os.chmod(car.sessions, 0)
        try:
            runs = [car.cli("sweep", "--now"), car.cli("sweep", "--now")]
            status = car.cli("status", "--json")
            human = car.cli("status")
            health = car.cli("status", "--check")
            export = car.cli("export", "--out", str(car.root / "export"))
        finally:
            os.chmod(car.sessions, 0o755)
        for run in runs:
            assert run.returncode == 0 and "Traceback" not in run.stderr, run.stderr
            lines = [e for e in events(run.stderr) if e["event"] == "sessions_dir_unreadable"]
            assert len(lines) == 1, run.stderr  # one line per sweep
            assert lines[0]["sessions_dir"] == str(car.sessions) and "chmod u+rx" in lines[0]["hint"]
            assert "view_removed" not in run.stderr
            assert f"{car.sessions}: the sessions folder cannot be read (Permission denied)" in run.stdout
        assert sorted(p.name for p in car.sessions.glob("compacted_*")) == views  # views kept
        data = json.loads(status.stdout)
        assert status.returncode == 0 and "Traceback" not in status.stderr, status.stderr
        assert "Permission denied" in data["sessions_dir_error"] and str(car.sessions) in data["sessions_dir_error"]
        assert data["sources"]["state_db"]["sessions"] == 1 and data["sources"]["state_db"]["usable"]
        assert data["sidecar"]["queue_error"] is None and data["sidecar"]["last_sweep"] is not None
        assert human.stdout.count("sessions folder cannot be read") == 1, human.stdout
        assert "state.db 1 session(s)" in human.stdout
        assert health.returncode == 3  # no sidecar runs here; the folder is said too
        assert f"unhealthy: {car.sessions}: the sessions folder cannot be read" in health.stdout
        assert export.returncode == 2 and "Traceback" not in export.stderr
        assert export.stderr.startswith(f"timmy-compactor: error: {car.sessions}: cannot read the sessions folder")
        assert "writing the export" not in export.stderr
    finally:
        shutil.rmtree(car.root.parent, ignore_errors=True)


def test_the_watcher_does_not_claim_watching_an_unreadable_folder_and_starts_once_it_can() -> None:
    car = nobody_car()
    try:
        os.chmod(car.sessions, 0)
        try:
            car.start_watcher()
            log = car.logs["watcher"]
            assert wait_for(lambda: "sessions_dir_unreadable" in log.read_text(), timeout=60), car.log_text()
            time.sleep(1)
            said = events(log.read_text())
            assert [e["event"] for e in said].count("sessions_dir_unreadable") == 1
            assert "watching" not in [e["event"] for e in said]
            assert "Traceback" not in log.read_text()
        finally:
            os.chmod(car.sessions, 0o755)
        assert wait_for(lambda: '"watching"' in log.read_text(), timeout=30), car.log_text()
        assert [e["event"] for e in events(log.read_text())].count("sessions_dir_unreadable") == 1
    finally:
        car.stop_all()
        shutil.rmtree(car.root.parent, ignore_errors=True)


# ---------------------------------------------------------------- the watcher while the queue is down


def test_the_watchers_queue_down_warning_is_one_line_per_interval_with_a_count(tmp_path: Path) -> None:
    car = Sidecar(tmp_path, "redis", f"redis://127.0.0.1:{free_port()}/0")  # nothing listens there
    try:
        car.start("watcher")
        assert car.wait_watching(), car.log_text()
        base = session_variant(load_sample(), "x")
        for k in range(40):  # 40 sessions written over ~4 s: 40 failed enqueues
            write_like_hermes(car.sessions / f"session_w{k}.json", base)
            time.sleep(0.1)
        assert wait_for(lambda: '"enqueue_failed"' in car.logs["watcher"].read_text(), timeout=10)
        time.sleep(2)
        said = [e for e in events(car.logs["watcher"].read_text()) if e["event"] == "enqueue_failed"]
        assert len(said) == 1, said
        assert said[0]["failed_attempts"] >= 1 and said[0]["next_warning_in_s"] == 30.0
        assert "Traceback" not in car.log_text()
    finally:
        car.stop_all()


def test_the_debouncer_counts_the_failed_attempts_it_did_not_say() -> None:
    from structlog.testing import capture_logs

    from timmy_compactor.sidecar import watcher

    failing = threading.Event()
    failing.set()

    def submit(path: str) -> None:
        if failing.is_set():
            raise ConnectionError("Error 111 connecting to 127.0.0.1:1. Connection refused.")

    debouncer = watcher.Debouncer(0.01, submit)
    with capture_logs() as logs:
        debouncer.start()
        try:
            for k in range(20):
                debouncer.touch(f"/s/session_{k}.json")
                time.sleep(0.02)
            time.sleep(0.3)
            debouncer._warned_at -= watcher.WARN_EVERY_SECONDS  # the interval has passed
            debouncer.touch("/s/session_last.json")
            assert wait_for(lambda: sum(e["event"] == "enqueue_failed" for e in logs) == 2, timeout=5), logs
            failing.clear()
            assert wait_for(lambda: any(e["event"] == "queue_backend_recovered" for e in logs), timeout=20), logs
        finally:
            debouncer.stop()
    said = [e for e in logs if e["event"] == "enqueue_failed"]
    assert said[0]["failed_attempts"] == 1 and said[1]["failed_attempts"] > 1
    assert debouncer.pending() == 0


# ---------------------------------------------------------------- kill -9 of huey_consumer.sh


def descendants(pid: int) -> set[int]:
    """Every live process below `pid` (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads the process tree from /proc (Linux)")
def test_kill_9_of_the_script_leaves_nothing_running_and_a_restart_works(tmp_path: Path) -> None:
    import signal
    import sys

    from tests.support import start_consumer_script, stop_consumer_script
    from timmy_compactor.sidecar.running import running

    car = Sidecar(tmp_path, "sqlite")
    env = {**car.env, "TIMMY_VENV": str(Path(sys.executable).parent.parent)}
    first = start_consumer_script(tmp_path / "first.log", env)
    second = None
    left: set[int] = set()
    try:
        assert wait_for(lambda: running(car.state) is not None, timeout=60), (tmp_path / "first.log").read_text()
        assert wait_for(lambda: len(descendants(first.pid)) >= 4, timeout=30)  # consumer, 2 workers, scheduler, watcher
        left = descendants(first.pid)
        os.kill(first.pid, signal.SIGKILL)
        first.wait(timeout=10)
        assert wait_for(lambda: not any(alive(pid) for pid in left), timeout=5), [p for p in left if alive(p)]
        assert running(car.state) is None
        started = time.monotonic()
        second = start_consumer_script(tmp_path / "second.log", env)
        assert wait_for(lambda: running(car.state) is not None, timeout=30), (tmp_path / "second.log").read_text()
        assert second.poll() is None and time.monotonic() - started < 10
        assert car.cli("status", "--check").returncode == 0
        write_like_hermes(car.sessions / "session_after.json", session_variant(load_sample(), "after"))
        assert wait_for((car.sessions / "compacted_session_after.json").exists, timeout=30), (
            tmp_path / "second.log"
        ).read_text()[-3000:]
    finally:
        for proc in (first, second):
            if proc is not None:
                stop_consumer_script(proc)
        for pid in left:  # orphans of a failed run: never left to the next test
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


# ---------------------------------------------------------------- issue 21.4: no task lists the folder


def test_no_task_and_no_commit_sweep_lists_the_sessions_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With 10^5 sessions a listing per task was most of its time: the compaction tasks (a snapshot, a
    state.db session) and the sweep a state.db commit runs never list the sessions folder."""
    import sqlite3

    from tests.support import add_db_session
    from timmy_compactor.sidecar import work
    from timmy_compactor.sidecar.app import make_app

    car = Sidecar(tmp_path, "sqlite", window=8_000)
    path = car.root / "hermes" / "state.db"
    make_state_db(path, "s1", tool_session(40))
    add_db_session(path, "s2", tool_session(40))
    raw = car.sessions / "session_snap.json"
    write_like_hermes(raw, session_variant(load_sample(), "snap"))
    app = make_app(load_config(car.config_path))
    listed: list[str] = []
    real_scandir, real_listdir = os.scandir, os.listdir
    real_glob, real_iterdir = Path.glob, Path.iterdir

    def spy(real: Any) -> Any:
        def call(where: Any = ".", *rest: Any) -> Any:
            if not isinstance(where, int) and Path(os.fspath(where)).resolve() == car.sessions.resolve():
                listed.append(real.__name__)
            return real(where, *rest)

        return call

    monkeypatch.setattr(os, "scandir", spy(real_scandir))
    monkeypatch.setattr(os, "listdir", spy(real_listdir))
    monkeypatch.setattr(Path, "glob", spy(real_glob))
    monkeypatch.setattr(Path, "iterdir", spy(real_iterdir))
    assert app.sweep_sessions.call_local(db_only=True) == 2  # the commit's sweep: s1 and s2
    while (task := app.huey.dequeue()) is not None:
        app.huey.execute(task)
    assert work.process_session(raw, app.config, app.records()).action == "written"
    db = sqlite3.connect(path)
    db.execute("INSERT INTO messages (session_id, role, content) VALUES ('s1', 'user', 'one more')")
    db.commit()
    db.close()
    assert app.sweep_sessions.call_local(db_only=True) == 1
    while (task := app.huey.dequeue()) is not None:
        app.huey.execute(task)
    assert listed == []
    assert len(list(car.sessions.glob("compacted_*"))) == 3
    assert "glob" in listed  # the spy does see a listing


def test_a_burst_of_commits_leaves_one_sweep_waiting_in_the_queue(tmp_path: Path) -> None:
    """The real watcher, no consumer: 20 commits, each its own event, enqueue one commit sweep (the
    one waiting reads the database when it starts, so it sees them all), not one per commit."""
    import sqlite3

    from timmy_compactor.sidecar.app import make_app

    car = Sidecar(tmp_path, "sqlite", window=8_000)
    path = car.root / "hermes" / "state.db"
    make_state_db(path, "s1", tool_session(10))
    try:
        car.start("watcher")
        assert car.wait_watching(), car.log_text()
        app = make_app(load_config(car.config_path))
        assert wait_for(lambda: app.huey.pending_count() == 1, timeout=30)  # the start's catch-up sweep
        for k in range(20):
            db = sqlite3.connect(path)
            db.execute("INSERT INTO messages (session_id, role, content) VALUES ('s1', 'user', ?)", (f"w{k}",))
            db.commit()
            db.close()
            time.sleep(0.25)  # past the watcher's 100 ms window: each commit is an event of its own
        time.sleep(1)
        names = [task.name for task in app.huey.pending()]
        assert names == ["sweep_sessions", "sweep_sessions"], names
        while (task := app.huey.dequeue()) is not None:  # a consumer runs them: s1 is compacted once
            app.huey.execute(task)
        assert (car.sessions / "compacted_session_s1.json").exists()
        assert not app.records().is_waiting("sweep:state.db")
    finally:
        car.stop_all()
