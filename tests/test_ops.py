"""The operator's side (issues 17 and 16): enqueue checks, status, the sidecar lock, defaults,
version and help text, one log format, Redis going away, scale-out on one Redis."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support import load_sample, session_variant, stop_consumer_script, write_like_hermes
from timmy_compactor.cli import main
from timmy_compactor.config import load_config


def write_config(root: Path, **huey: Any) -> tuple[Path, Path]:
    sessions = root / "hermes" / "sessions"
    sessions.mkdir(parents=True, exist_ok=True)
    path = root / "compaction.yaml"
    path.write_text(
        json.dumps(
            {
                "model": {"context_window": 20_000},
                "sessions": {"dir": str(sessions), "hermes_home": str(root / "hermes")},
                "huey": {"state_dir": str(root / "state"), **huey},
                "logging": {"format": "json"},
            }
        )
    )
    return path, sessions


def pending(config_path: Path) -> int:
    from timmy_compactor.sidecar.app import make_app

    return int(make_app(load_config(config_path)).huey.pending_count())


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (lambda root, sessions: Path("/etc/passwd"), "not a session file"),
        (lambda root, sessions: sessions / "session_missing.json", "no such session file"),
        (lambda root, sessions: sessions / "compacted_session_a.json", "not a session file"),
        (lambda root, sessions: root / "session_a.json", "outside the sessions directory"),
        (lambda root, sessions: sessions, "no such session file"),
    ],
    ids=["etc-passwd", "missing", "a-view", "outside", "a-directory"],
)
def test_enqueue_refuses_what_is_not_a_session_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], make: Any, expected: str
) -> None:
    config, sessions = write_config(tmp_path)
    doc = session_variant(load_sample(), "a")
    write_like_hermes(sessions / "session_a.json", doc)
    write_like_hermes(sessions / "compacted_session_a.json", doc)
    write_like_hermes(tmp_path / "session_a.json", doc)
    good = sessions / "session_a.json"
    code = main(["enqueue", str(good), str(make(tmp_path, sessions)), "--config", str(config)])
    out, err = capsys.readouterr()
    assert code == 2
    assert expected in err and len(err.strip().splitlines()) == 1 and err.startswith("timmy-compactor: error:")
    assert "enqueued" not in out
    assert pending(config) == 0  # nothing enqueued, not even the good path before it


def test_enqueue_accepts_a_session_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config, sessions = write_config(tmp_path)
    write_like_hermes(sessions / "session_a.json", session_variant(load_sample(), "a"))
    assert main(["enqueue", str(sessions / "session_a.json"), "--config", str(config)]) == 0
    assert "enqueued" in capsys.readouterr().out
    assert pending(config) == 1


# ---------------------------------------------------------------- defaults (issue 17.9)


def test_writing_training_data_is_opt_in(tmp_path: Path) -> None:
    from timmy_compactor.config import Config
    from timmy_compactor.sidecar.app import make_app

    assert Config().export.enabled is False
    config_path, _ = write_config(tmp_path)
    app = make_app(load_config(config_path))
    export_dir = Path(app.config.export.dir).expanduser()
    assert app.periodic_export.call_local() == {"disabled": "export.enabled is false"}
    assert not export_dir.exists()
    data = json.loads(config_path.read_text())
    data["export"] = {"enabled": True, "dir": str(tmp_path / "export")}
    config_path.write_text(json.dumps(data))
    result = make_app(load_config(config_path)).periodic_export.call_local()
    assert "disabled" not in result and result["out_dir"] == str(tmp_path / "export")
    assert (tmp_path / "export" / "manifest.json").exists()


def test_hermes_status_creates_nothing_at_the_path_given(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.support import listing

    typo = tmp_path / "hermse"
    assert main(["hermes", "status", "--hermes-home", str(typo)]) == 2
    assert "no Hermes home there" in capsys.readouterr().err
    assert not typo.exists()
    pytest.importorskip("hermes_cli")
    home = tmp_path / "hermes"
    home.mkdir()
    (home / "config.yaml").write_text("model:\n  default: x\n")
    before = listing(home)
    assert main(["hermes", "status", "--hermes-home", str(home)]) == 1  # not enabled
    assert listing(home) == before and sorted(p.name for p in home.iterdir()) == ["config.yaml"]
    assert main(["hermes", "enable", "--hermes-home", str(home)]) == 0  # the loader in the copy sees it
    capsys.readouterr()
    before = listing(home)
    assert main(["hermes", "status", "--hermes-home", str(home)]) == 0
    assert "ACTIVE" in capsys.readouterr().out
    assert listing(home) == before


def test_hermes_status_says_whether_the_engine_can_keep_its_raw_logs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("hermes_cli")
    home = tmp_path / "hermes"
    home.mkdir()
    (home / "config.yaml").write_text("model:\n  default: x\n")
    config = tmp_path / "compaction.yaml"
    for state, writable in ((tmp_path / "state", True), (tmp_path / "blocker" / "state", False)):
        config.write_text(json.dumps({"huey": {"state_dir": str(state)}}))
        (tmp_path / "blocker").write_text("a file where a directory would be")  # ENOTDIR, for root too
        main(["hermes", "status", "--hermes-home", str(home), "--json", "--config", str(config)])
        shown = json.loads(capsys.readouterr().out)
        assert shown["raw_log_dir"] == str(state / "hermes-engine") and shown["raw_log_writable"] is writable
        assert not state.exists()  # checking creates nothing


def test_help_speaks_of_the_product_and_version(capsys: pytest.CaptureFixture[str]) -> None:
    from timmy_compactor import __version__

    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"timmy-compactor {__version__}"
    with pytest.raises(SystemExit):
        main(["--help"])
    text = capsys.readouterr().out
    assert "seed" not in text.lower()
    assert "eval-ledger" in text


def test_eval_ledger_help_says_what_it_checks(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["eval-ledger", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "seed" not in text.lower()
    for what in ("ledger strategy", "superseded facts", "obligations", "hot tail", "baseline"):
        assert what in text


def test_eval_without_the_eval_extra_prints_the_table_and_a_hint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    from tests.support import sample_path

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` raises ImportError
    out = tmp_path / "report"
    args = ["eval", str(sample_path("session_sample.json")), "--strategies", "rules", "--checkpoints", "2"]
    assert main([*args, "--out", str(out)]) == 0
    stdout, stderr = capsys.readouterr()
    assert "| `rules` |" in stdout
    assert stderr.strip().splitlines() == [
        "timmy-compactor eval: no plots: matplotlib is missing (pip install 'timmy-compactor[eval]')"
    ]
    assert (out / "report.html").exists() and not list(out.glob("*.png"))


# ---------------------------------------------------------------- status and the sidecar lock (issue 17.8)


def start_sidecar_sh(root: Path, config: Path, name: str) -> tuple[Any, Path]:
    import os
    import sys

    from tests.support import start_consumer_script

    log = root / f"{name}.log"
    env = {**os.environ, "TIMMY_COMPACTOR_CONFIG": str(config), "TIMMY_VENV": str(Path(sys.executable).parent.parent)}
    env.pop("TIMMY_WORKERS", None)
    return start_consumer_script(log, env), log


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


# ---------------------------------------------------------------- scale-out on one Redis (issue 16.9)


@pytest.mark.redis
def test_two_consumers_on_one_redis_never_compact_one_session_at_once(redis_server: Any, tmp_path: Path) -> None:
    """Two consumers, as on two hosts (each its own state dir, so no shared flock), share one Redis and
    one sessions dir. While the session's lease is held in Redis (here by a third party), neither
    compacts it (each gives its worker back at once); once released, its holder enqueues it again
    and one of them compacts it."""
    from tests.support import Sidecar, wait_for
    from timmy_compactor.sidecar.app import make_app

    redis_server.flush()
    one = Sidecar(tmp_path / "one", "redis", redis_server.url)
    two = Sidecar(tmp_path / "two", "redis", redis_server.url)
    config = json.loads(two.config_path.read_text())
    config["sessions"] = {"dir": str(one.sessions), "hermes_home": str(one.sessions.parent)}
    two.config_path.write_text(json.dumps(config))
    try:
        for car in (one, two):
            car.start("consumer")
        assert wait_for(lambda: all("consumer started" in c.log_text().lower() for c in (one, two)), timeout=30), (
            one.log_text() + two.log_text()
        )
        app = make_app(load_config(one.config_path))
        raw = one.sessions / "session_shared.json"
        view = one.sessions / "compacted_session_shared.json"
        from timmy_compactor.sidecar.lease import Leases

        leases = Leases(app.huey)
        held = leases.take("session:shared", {"task": "compact_session", "arg": "elsewhere"})  # a third party
        assert held is not None
        try:
            write_like_hermes(raw, session_variant(load_sample(), "shared"))

            def both_refused() -> bool:
                if "session_busy_elsewhere" in one.log_text() and "session_busy_elsewhere" in two.log_text():
                    return True
                app.compact_session(str(raw))  # whichever worker is free takes it: ask until both have
                return False

            assert wait_for(both_refused, timeout=60, interval=0.3), one.log_text() + two.log_text()
            assert not view.exists()
        finally:
            rerun = leases.release(held)
        assert rerun == {"task": "compact_session", "arg": str(raw)}  # one job, however many were refused
        app.compact_session(rerun["arg"])  # what a consumer letting go does with it
        assert wait_for(view.exists, timeout=30), one.log_text() + two.log_text()
        logs = one.log_text() + two.log_text()
        assert logs.count('"view_written"') == 1  # the others found it current
        assert "Traceback" not in logs
    finally:
        one.stop_all()
        two.stop_all()


# ---------------------------------------------------------------- Redis down (issue 17.3)


def test_redis_down_at_start_fails_fast_in_one_line(tmp_path: Path) -> None:
    from tests.support import free_port

    url = f"redis://127.0.0.1:{free_port()}/0"
    config, _ = write_config(tmp_path, backend="redis", redis_url=url)
    proc, log = start_sidecar_sh(tmp_path, config, "no-redis")
    try:
        code = proc.wait(timeout=60)
    finally:
        stop_consumer_script(proc)
    text = log.read_text()
    assert code != 0
    errors = [line for line in text.splitlines() if line.startswith("timmy-compactor: error:")]
    assert errors == [f"timmy-compactor: error: Redis at {url} is not reachable: " + errors[0].split(": ", 3)[-1]]
    assert "Traceback" not in text and len(text) < 2000, text


@pytest.mark.redis
def test_redis_going_away_backs_off_quietly_and_recovers(tmp_path: Path) -> None:
    import time

    from tests.support import RedisServer, Sidecar, wait_for

    server = RedisServer(tmp_path / "redis")
    (tmp_path / "redis").mkdir()
    server.start()
    car = Sidecar(tmp_path / "car", "redis", server.url)
    try:
        car.start("consumer")
        assert wait_for(lambda: "consumer started" in car.log_text().lower(), timeout=30), car.log_text()
        server.stop()
        time.sleep(6)  # gone for a while: one warning per process, then silence
        down = car.log_text()
        assert "Traceback" not in down, down
        warnings = down.count('"queue_unreachable"')
        assert 1 <= warnings <= 3, down  # 2 workers (each its own connection), never one per poll
        assert len(down) < 10_000
        server.start()
        assert wait_for(lambda: '"queue_reachable_again"' in car.log_text(), timeout=20), car.log_text()
        from timmy_compactor.sidecar.app import make_app

        raw = car.sessions / "session_back.json"
        write_like_hermes(raw, session_variant(load_sample(), "back"))
        make_app(load_config(car.config_path)).compact_session(str(raw))
        assert wait_for((car.sessions / "compacted_session_back.json").exists, timeout=20), car.log_text()
        assert "Traceback" not in car.log_text()
    finally:
        car.stop_all()
        server.stop()


# ---------------------------------------------------------------- one log format (issue 16.6)


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


def test_the_scheduler_skips_a_periodic_task_quietly_while_redis_is_down(tmp_path: Path) -> None:
    """At a minute boundary with Redis down, the scheduler's enqueue of the periodic sweep logs one
    warning (no traceback) and is dropped: the next sweep after Redis returns catches up."""
    import redis

    from tests.support import free_port
    from timmy_compactor.sidecar.app import make_app

    config, _ = write_config(tmp_path, backend="redis", redis_url=f"redis://127.0.0.1:{free_port()}/0")
    app = make_app(load_config(config))
    assert app.huey.enqueue(app.periodic_sweep.s()) is None
    with pytest.raises(redis.exceptions.ConnectionError):  # a user's enqueue still says it failed
        app.compact_session("/nowhere/session_x.json")


def test_enqueue_and_sweep_with_redis_down_say_so_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.support import free_port

    url = f"redis://127.0.0.1:{free_port()}/0"
    config, sessions = write_config(tmp_path, backend="redis", redis_url=url)
    write_like_hermes(sessions / "session_a.json", session_variant(load_sample(), "a"))
    for argv in (["enqueue", str(sessions / "session_a.json")], ["sweep"]):
        assert main([*argv, "--config", str(config)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith(f"timmy-compactor: error: Redis at {url} is not reachable")
