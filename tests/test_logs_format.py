"""logs.py: one format for every line, huey's and ours (JSON, or console in a terminal), naming its logger."""

from __future__ import annotations

import io
import json
from pathlib import Path

import structlog

from tests.support_homes import write_default_config as write_config
from timmy_compactor import logs


def test_log_lines_carry_their_logger_name() -> None:
    stream = io.StringIO()
    logs.configure("json", "info", stream)
    try:
        logs.get_logger("timmy_compactor.sidecar.work").info("hello", n=1)
    finally:
        structlog.reset_defaults()
    line = json.loads(stream.getvalue())
    assert (line["logger"], line["event"], line["n"]) == ("timmy_compactor.sidecar.work", "hello", 1)


# ---------------------------------------------------------------- huey's lines and ours


def run_consumer_briefly(tmp_path: Path, fmt: str, tty: bool) -> str:
    import os
    import pty
    import signal
    import subprocess
    import sys
    import time

    from tests.support import REPO

    config, sessions = write_config(tmp_path)
    data = json.loads(config.read_text())
    data["logging"] = {"format": fmt}
    config.write_text(json.dumps(data))
    (sessions / "session_bad.json").write_text("{ broken")  # a line from our code too
    os.utime(sessions / "session_bad.json", (time.time() - 60, time.time() - 60))
    env = {**os.environ, "TIMMY_COMPACTOR_CONFIG": str(config)}
    cmd = [str(Path(sys.executable).parent / "huey_consumer"), "tasks.huey", "-w", "1", "-k", "process"]
    if tty:
        leader, follower = pty.openpty()
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=follower, stderr=follower, start_new_session=True)
        os.close(follower)
    else:
        out = tmp_path / "out.log"
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=out.open("wb"), stderr=subprocess.STDOUT)
    chunks = b""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and b"session_unreadable" not in chunks:
        if tty:
            import select

            if select.select([leader], [], [], 0.2)[0]:
                chunks += os.read(leader, 65536)
        else:
            time.sleep(0.2)
            chunks = out.read_bytes()
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=20)
    if tty:
        with_rest = chunks
        while select.select([leader], [], [], 0.2)[0]:
            try:
                with_rest += os.read(leader, 65536)
            except OSError:
                break
        os.close(leader)
        return with_rest.decode(errors="replace").replace("\r\n", "\n")
    return out.read_text()


def test_huey_lines_and_ours_share_one_json_format(tmp_path: Path) -> None:
    text = run_consumer_briefly(tmp_path, "auto", tty=False)
    lines = [line for line in text.splitlines() if line.strip()]
    records = [json.loads(line) for line in lines]  # every line is JSON, huey's too
    assert all(r.get("logger") for r in records), lines
    loggers = {r["logger"] for r in records}
    assert {"huey.consumer", "timmy_compactor.sidecar.work"} <= loggers, loggers
    assert any("consumer started" in r["event"].lower() for r in records)


def test_console_lines_in_a_terminal(tmp_path: Path) -> None:
    text = run_consumer_briefly(tmp_path, "auto", tty=True)
    lines = [line for line in text.splitlines() if line.strip() and not line.startswith(("+ ", " "))]
    started = [line for line in lines if "consumer started" in line.lower()]
    assert started and "[huey.consumer]" in started[0] and not started[0].startswith("{"), lines
    assert any("session_unreadable" in line and "[timmy_compactor.sidecar.work]" in line for line in lines), lines
    assert not any(line.startswith("[20") for line in lines), lines  # huey's own format is gone


def test_the_script_on_a_new_home_logs_only_json_lines_and_creates_nothing_of_hermes(tmp_path: Path) -> None:
    """Issue 33 item 9: ./huey_consumer.sh off a terminal, on a home where Hermes never ran: its
    config check is a JSON line too (config_ok, no plain `config OK: …` among them), and it waits for
    Hermes' sessions folder instead of creating ~/.hermes/sessions."""
    from tests.support import start_consumer_script, stop_consumer_script, wait_for
    from tests.support_homes import script_env

    home = tmp_path / "home"
    home.mkdir()
    env = script_env(HOME=str(home))
    for name in ("TIMMY_COMPACTOR_CONFIG", "XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_DATA_HOME"):
        env.pop(name, None)
    log = tmp_path / "sidecar.log"
    proc = start_consumer_script(log, env)
    try:
        assert wait_for(lambda: "waiting_for_sessions_dir" in log.read_text(), timeout=60), log.read_text()
        assert wait_for(lambda: "consumer started" in log.read_text().lower(), timeout=60), log.read_text()
    finally:
        assert stop_consumer_script(proc) == 0, log.read_text()
    lines = [line for line in log.read_text().splitlines() if line.strip()]
    records = [json.loads(line) for line in lines]  # every line is JSON
    said = [r for r in records if r["event"] == "config_ok"]
    assert [r["source"] for r in said] == ["built-in defaults"], lines
    assert not (home / ".hermes").exists()
