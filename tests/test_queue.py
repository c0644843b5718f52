"""sidecar/queue.py: the huey backend while Redis is away (at start, while running, the scheduler, a user's enqueue)."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

from tests.support import load_sample, session_variant, stop_consumer_script, write_like_hermes
from tests.support_homes import start_sidecar_sh
from tests.support_homes import write_default_config as write_config
from timmy_compactor.cli import main
from timmy_compactor.config import load_config


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


@pytest.mark.redis
def test_a_wrong_redis_password_is_said_as_such_not_as_unreachable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], redis_server: object
) -> None:
    """Issue 33 item 8: Redis answers but refuses the password: every verb says "authentication
    failed" and what to set (never "not reachable", never the password)."""
    import redis

    from tests.support import RedisServer

    assert isinstance(redis_server, RedisServer)
    admin = redis.Redis.from_url(redis_server.url)
    admin.execute_command("ACL", "SETUSER", "timmy", "on", ">right", "~*", "&*", "+@all")
    try:
        url = f"redis://timmy:n0tTh3P4ss@127.0.0.1:{redis_server.port}/0"
        config, sessions = write_config(tmp_path, backend="redis", redis_url=url)
        write_like_hermes(sessions / "session_a.json", session_variant(load_sample(), "a"))
        shown = f"redis://timmy:***@127.0.0.1:{redis_server.port}/0"
        for argv in (["enqueue", "a"], ["sweep"], ["watch", "--check"]):
            assert main([*argv, "--config", str(config)]) == 2
            err = capsys.readouterr().err.strip().splitlines()
            assert err == [
                f"timmy-compactor: error: Redis authentication failed at {shown} (the password given is refused): "
                "set the password in huey.redis_url or TIMMY_REDIS_URL, redis://:PASSWORD@host:port/db"
            ], err
        assert main(["status", "--check", "--config", str(config)]) == 3  # no sidecar runs: the first problem
        lines = capsys.readouterr().out.splitlines()
        assert lines[1].startswith(f"unhealthy: queue (redis) authentication failed at {shown}"), lines
        assert main(["status", "--config", str(config)]) == 0
        out = capsys.readouterr().out
        assert f"queue (redis): authentication failed at {shown}" in out and "unreachable" not in out
        assert "n0tTh3P4ss" not in out
        admin.config_set("requirepass", "right")  # the default user now needs one, and the URL gives none
        config, _ = write_config(tmp_path, backend="redis", redis_url=redis_server.url)
        assert main(["enqueue", "a", "--config", str(config)]) == 2
        assert "authentication failed at " in (err := capsys.readouterr().err) and "(it asks for a password)" in err
    finally:
        with contextlib.suppress(redis.exceptions.RedisError):  # the admin's connection is still logged in
            admin.config_set("requirepass", "")
        admin.execute_command("ACL", "DELUSER", "timmy")
