"""What the sidecar says while it works (issue 24, item 5), read from the real processes the README
starts: one sweep per start, one task and one line per copied session, huey's per-task lines at
debug level only, a repeated write failure said once, log lines around `sweep --now`'s progress bar,
no pip chatter on a first start."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import select
import struct
import subprocess
import termios
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support import (
    VENV_BIN,
    Sidecar,
    load_sample,
    session_variant,
    tool_session,
    wait_for,
    write_like_hermes,
)
from tests.support import stop_consumer_script as stop_script
from tests.support_homes import SCRIPT, json_lines, script_env, write_config
from timmy_compactor.config import load_config
from timmy_compactor.sessions.names import view_path_for


def start(env: dict[str, str], log: Path, *args: str) -> Any:
    return subprocess.Popen(
        [str(SCRIPT), *args],
        cwd=SCRIPT.parent,
        env=env,
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def test_one_start_sweeps_once_and_a_cp_of_four_sessions_is_four_tasks_of_one_line_each(tmp_path: Path) -> None:
    """Through huey_consumer.sh -v (so that huey's per-task lines are there to count, at debug level),
    with the config at its old place: its notice once for the whole start."""
    home = tmp_path / "home"
    config, sessions = write_config(tmp_path)
    legacy = home / ".timmy" / "timmy-config" / "compaction.yaml"
    legacy.parent.mkdir(parents=True)
    config.rename(legacy)
    src = tmp_path / "src"
    src.mkdir()
    names = ["a", "b", "c", "d"]
    for name in names:
        write_like_hermes(src / f"session_{name}.json", session_variant(load_sample(), name))
    log = tmp_path / "sidecar.log"
    proc = start(script_env(HOME=str(home)), log, "-v")
    try:
        assert wait_for(lambda: any(e["event"] == "watching" for e in json_lines(log)), 60), log.read_text()[-3000:]
        time.sleep(2)  # every worker has started (each used to enqueue its own startup sweep)
        subprocess.run(["cp", *[str(src / f"session_{n}.json") for n in names], str(sessions)], check=True)
        views = [sessions / f"compacted_session_{n}.json" for n in names]
        assert wait_for(lambda: all(v.exists() for v in views), 60), log.read_text()[-3000:]
        # a worker logs its line just after the view lands: wait for the four lines before stopping it
        assert wait_for(lambda: sum(e["event"] == "view_written" for e in json_lines(log)) >= 4, 60)
        time.sleep(1.5)  # room for any second task per file
    finally:
        assert stop_script(proc) == 0, log.read_text()[-3000:]
    text = log.read_text()
    lines = json_lines(log)
    sweeps = [e for e in lines if re.match(r"Executing \S+\.sweep_sessions\b", e["event"])]
    assert len(sweeps) == 1, [e["event"] for e in sweeps]
    compactions = [e for e in lines if re.match(r"Executing \S+\.compact(_session)?:", e["event"])]
    assert len(compactions) == 4, [e["event"] for e in compactions]
    assert {e["level"] for e in lines if e["event"].startswith("Executing ")} == {"debug"}
    (stopped,) = [e for e in lines if e["event"] == "watcher_stopped"]
    assert stopped["submitted"] == 4
    written = [e for e in lines if e["event"] == "view_written"]
    assert sorted(e["session_id"] for e in written) == names
    task_lines = [e for e in lines if e["level"] == "info" and e.get("logger", "").startswith(("huey", "timmy"))]
    per_task = [e for e in task_lines if e.get("session_id") or re.search(r"\.compact(_session)?: ", e["event"])]
    assert per_task == written  # one info line per compaction, ours
    assert text.count("note: reading the config from its old location") == 1, text[-3000:]


def test_a_write_failure_that_repeats_is_one_error_then_debug_lines(tmp_path: Path) -> None:
    """A real consumer at the default huey level, three sweeps enqueued by the CLI: one error line,
    then debug lines; huey's per-task lines are not at info level."""
    car = Sidecar(tmp_path, "sqlite", window=8_000)
    config = json.loads(car.config_path.read_text())
    config["logging"]["level"] = "debug"
    car.config_path.write_text(json.dumps(config))
    raw = car.sessions / "session_ro.json"
    write_like_hermes(raw, {"session_id": "ro", "model": "m", "messages": tool_session(40)})
    view_path_for(raw).mkdir()  # the view cannot be written (a directory is in the way, for root too)
    car.start("consumer")
    log = car.logs["consumer"]

    def failures() -> list[dict[str, Any]]:
        return [e for e in json_lines(log) if e["event"] == "view_not_written"]

    try:
        assert wait_for(failures, 60), car.log_text()  # the consumer's startup sweep
        for _ in range(2):
            before = len(failures())
            done = car.cli("sweep")
            assert done.returncode == 0, done.stderr
            assert wait_for(lambda before=before: len(failures()) > before, 60), car.log_text()
    finally:
        car.stop_all()
    levels = [e["level"] for e in failures()]
    assert len(levels) >= 3 and levels[0] == "error" and set(levels[1:]) == {"debug"}, levels
    text = log.read_text()
    assert "/srv/app" not in text  # what the session says is never quoted
    assert "Executing" not in text and "executed in" not in text


def test_a_half_written_session_is_retried_quietly_then_one_error_line(tmp_path: Path) -> None:
    """huey's `raised RetryTask` lines are debug lines too: what a user sees at the default level is
    our one line once the retries are spent."""
    car = Sidecar(tmp_path, "sqlite")
    raw = car.sessions / "session_half.json"
    raw.write_text('{"session_id": "half", "messages": [{"role": "user", "content": "secret plan')
    car.start("consumer")
    log = car.logs["consumer"]
    try:
        done = car.cli("enqueue", "half")
        assert done.returncode == 0, done.stderr
        assert wait_for(lambda: any(e["event"] == "session_unreadable" for e in json_lines(log)), 60), car.log_text()
    finally:
        car.stop_all()
    text = log.read_text()
    assert "RetryTask" not in text and "Executing" not in text, text[-3000:]
    errors = [e for e in json_lines(log) if e["level"] in ("warning", "error")]
    assert [e["event"] for e in errors] == ["session_unreadable"]
    assert "secret plan" not in text


def run_in_a_terminal(argv: list[str], env: dict[str, str]) -> str:
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 160, 0, 0))  # a terminal 160 columns wide
    proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env, close_fds=True)
    os.close(slave)
    out = b""
    while True:
        ready, _, _ = select.select([master], [], [], 60)
        if not ready:
            break
        try:
            chunk = os.read(master, 65536)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    assert proc.wait(timeout=60) == 0, out.decode(errors="replace")[-3000:]
    return out.decode(errors="replace")


def test_sweep_now_in_a_terminal_prints_log_lines_around_its_progress_bar(tmp_path: Path) -> None:
    car = Sidecar(tmp_path, "sqlite")
    config = json.loads(car.config_path.read_text())
    config["logging"]["format"] = "auto"  # console lines in a terminal
    car.config_path.write_text(json.dumps(config))
    for k in range(12):
        write_like_hermes(car.sessions / f"session_t{k}.json", session_variant(load_sample(), f"t{k}"))
    out = run_in_a_terminal(
        [str(VENV_BIN / "timmy-compactor"), "sweep", "--now", "--config", str(car.config_path)], car.env
    )
    assert "sweep:" in out  # the bar was shown
    logged = [line for line in out.split("\n") if "view_written" in line]
    assert len(logged) == 12, out[-3000:]
    for line in logged:
        shown = line.rstrip("\r").rsplit("\r", 1)[-1]  # what is left on the terminal's line
        assert re.match(r"\d{4}-\d\d-\d\dT", shown), repr(line)
        assert "sweep:" not in shown and "%|" not in shown, repr(line)
    assert "sweep of " in out and "written 12" in out


@pytest.mark.slow
def test_a_first_start_sets_up_its_venv_without_pip_chatter(tmp_path: Path) -> None:
    config, _ = write_config(tmp_path)
    venv = tmp_path / "venv"
    log = tmp_path / "first.log"
    proc = start(script_env(config, venv=venv), log)
    try:
        started = {"watching", "The following commands are available"}  # the watcher's line and huey's
        events = lambda: {e.get("event", "").split(":")[0] for e in json_lines(log)}  # noqa: E731
        assert wait_for(lambda: started <= events(), 300), log.read_text()[-3000:]
        time.sleep(2)  # the workers are up: a stop in the middle of huey's start-up is another matter
    finally:
        assert stop_script(proc) == 0, log.read_text()[-3000:]
    text = log.read_text()
    assert text.startswith(f"setting up {venv} ...\n"), text[:500]
    for chatter in ("Editable install", "BuildBackendWarning", "*****", "WARNING: Location", "Successfully"):
        assert chatter not in text, chatter
    assert (venv / "bin" / "timmy-compactor").exists()
    assert load_config(config).state_dir.exists()


def test_a_startup_sweep_that_cannot_be_enqueued_is_left_for_the_next_starter(tmp_path: Path) -> None:
    """One sweep per start is taken by the first starter to ask; if its enqueue fails (Redis went
    away), the turn goes back, so the start still gets its sweep from a later worker or the watcher."""
    import redis

    from tests.support import free_port
    from timmy_compactor.sidecar import sweep
    from timmy_compactor.sidecar.app import enqueue_startup_sweep, make_app

    config, _ = write_config(tmp_path, backend="redis", redis_url=f"redis://127.0.0.1:{free_port()}/0")
    app = make_app(load_config(config))
    with pytest.raises(redis.exceptions.ConnectionError):
        enqueue_startup_sweep(app)
    assert sweep.startup_sweep_due(app.config)  # given back: the next starter sweeps
    assert not sweep.startup_sweep_due(app.config)  # and only one
