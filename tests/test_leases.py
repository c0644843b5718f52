"""sidecar/lease.py: several consumers on one queue or one Redis, each session leased, dead holders freed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support import (
    REPO,
    RedisServer,
    Sidecar,
    dead_pid,
    load_sample,
    session_variant,
    wait_for,
    write_like_hermes,
)
from timmy_compactor.config import load_config
from timmy_compactor.sessions.files import read_provenance, sha256_bytes
from timmy_compactor.sidecar import lease, work
from timmy_compactor.sidecar.app import App, make_app, task_key
from timmy_compactor.sidecar.records import Records

LEASE = 2.0


@pytest.fixture
def short_leases(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lease, "LEASE_SECONDS", LEASE)


def cars(root: Path, backend: str, redis: RedisServer | None, n: int) -> list[Sidecar]:
    """`n` consumers' sidecars on one queue and one sessions folder, each with its own state dir
    (as on `n` hosts; with SQLite, one host: the queue is the first one's)."""
    if redis is not None:
        redis.flush()
    first = Sidecar(root / "c0", backend, redis.url if redis else None)
    out = [first]
    for k in range(1, n):
        car = Sidecar(root / f"c{k}", backend, redis.url if redis else None)
        config = json.loads(car.config_path.read_text())
        config["sessions"] = json.loads(first.config_path.read_text())["sessions"]
        if redis is None:
            config["huey"]["state_dir"] = str(first.state)
        car.config_path.write_text(json.dumps(config))
        car.sessions = first.sessions
        out.append(car)
    for car in out:
        car.env["TIMMY_LEASE_SECONDS"] = str(LEASE)
    return out


def started(car: Sidecar, workers: int = 2) -> subprocess.Popen[bytes]:
    proc = car.start("consumer", workers)
    assert wait_for(lambda: "consumer started" in car.log_text().lower(), timeout=30), car.log_text()
    return proc


def app_of(car: Sidecar) -> App:
    return make_app(load_config(car.config_path))


def backend(request: pytest.FixtureRequest) -> RedisServer | None:
    return request.getfixturevalue("redis_server") if request.param == "redis" else None  # type: ignore[no-any-return]


@pytest.fixture(params=["sqlite", pytest.param("redis", marks=pytest.mark.redis)])
def queue(request: pytest.FixtureRequest) -> tuple[str, RedisServer | None]:
    return request.param, backend(request)


def test_a_locked_session_gives_its_worker_back_and_runs_after_its_holder(
    tmp_path: Path, queue: tuple[str, RedisServer | None], short_leases: None
) -> None:
    """One worker. While session `a` is leased elsewhere (a live holder, renewing), its task returns
    at once: session `b`'s task completes meanwhile. The holder, letting go, gets one rerun job for
    `a` (however many tasks found it busy), and `a` is compacted then."""
    (car,) = cars(tmp_path, *queue, 1)
    app = app_of(car)
    holder = lease.Leases(app.huey)
    held = holder.take("session:a", {"task": "compact_session", "arg": "elsewhere"})
    assert held is not None
    try:
        started(car, workers=1)
        base = load_sample()
        a, b = car.sessions / "session_a.json", car.sessions / "session_b.json"
        write_like_hermes(a, session_variant(base, "a"))
        write_like_hermes(b, session_variant(base, "b"))
        for _ in range(3):
            app.compact_session(str(a))
        app.compact_session(str(b))
        assert wait_for((car.sessions / "compacted_session_b.json").exists, timeout=10), car.log_text()
        assert car.logs["consumer"].read_text().count("session_busy_elsewhere") >= 3  # (and the startup sweep's)
        assert not (car.sessions / "compacted_session_a.json").exists()
        assert held.renew()  # still ours: renewed while it lives
    finally:
        rerun = holder.release(held)
    assert rerun is not None and task_key(app.config, rerun["task"], rerun["arg"]) == "a"  # the task that waited
    app.compact("a")  # what a consumer does with it (`_leased`)
    try:
        assert wait_for((car.sessions / "compacted_session_a.json").exists, timeout=10), car.log_text()
        assert "Traceback" not in car.log_text()
    finally:
        car.stop_all()


def test_a_dead_hosts_lease_frees_its_session_within_the_lease(
    tmp_path: Path, queue: tuple[str, RedisServer | None], short_leases: None
) -> None:
    """A consumer on another host died holding session `s` (its lease and in-flight record are
    left, nothing renews them). A live consumer's task for `s` finds it busy and returns; within
    one lease the survivor runs `s` again: the view appears in seconds, not after 120 s."""
    (car,) = cars(tmp_path, *queue, 1)
    app = app_of(car)
    raw = car.sessions / "session_s.json"
    write_like_hermes(raw, session_variant(load_sample(), "s"))
    started(car)
    dead = lease.Leases(app.huey)
    dead.host = "lost-host"
    held = dead.take("session:s", {"task": "compact_session", "arg": str(raw)})
    assert held is not None
    held.stop()  # its host is gone: nothing renews it
    try:
        app.compact_session(str(raw))
        assert wait_for(lambda: "session_busy_elsewhere" in car.log_text(), timeout=5), car.log_text()
        assert wait_for((car.sessions / "compacted_session_s.json").exists, timeout=3 * LEASE + 2), car.log_text()
        assert "inflight_session_rerun" in car.log_text()
    finally:
        car.stop_all()


def test_a_stale_writer_does_not_replace_a_newer_view(
    tmp_path: Path, queue: tuple[str, RedisServer | None], short_leases: None
) -> None:
    """A worker whose lease ran out (paused past it) and was taken over writes nothing: the view
    the new holder made from the newer raw stays."""
    (car,) = cars(tmp_path, *queue, 1)
    app = app_of(car)
    leases = lease.Leases(app.huey)
    raw = car.sessions / "session_v.json"
    base = load_sample()
    stale = leases.take("session:v", {"task": "compact_session", "arg": str(raw)})
    assert stale is not None
    stale.stop()
    leases.ops.drop(leases.lock_key("session:v"), stale.raw)  # its lease ran out
    newer = leases.take("session:v", {"task": "compact_session", "arg": str(raw)})
    assert newer is not None
    write_like_hermes(raw, session_variant(base, "v"))
    records = Records(car.state)
    with lease.fenced(newer):
        assert work.process_path(raw, app.config, records).action == "written"
    view = car.sessions / "compacted_session_v.json"
    made = view.read_bytes()
    write_like_hermes(raw, session_variant(base, "v", n_messages=len(base["messages"]) - 4))  # what it read
    with lease.fenced(stale), pytest.raises(lease.LeaseLostError):
        work.process_path(raw, app.config, records)
    assert view.read_bytes() == made
    assert not list(car.sessions.glob(".compacted_session_v.json.*.tmp"))  # its temp file discarded
    leases.release(newer)


def test_a_start_clears_its_hosts_dead_locks_only(tmp_path: Path, queue: tuple[str, RedisServer | None]) -> None:
    """huey's --flush-locks only flushes locks huey registered: the session leases a killed consumer
    of this host held are cleared by the next start; a live process's and another host's stay."""
    (car,) = cars(tmp_path, *queue, 1)
    app = app_of(car)
    leases = lease.Leases(app.huey)
    host = leases.host
    holders = {
        "session:dead": {"host": host, "pid": dead_pid(), "token": "d"},
        "session:live": {"host": host, "pid": os.getpid(), "token": "l"},
        "session:away": {"host": "other-host", "pid": dead_pid(), "token": "o"},
    }
    for name, holder in holders.items():
        assert leases.ops.add(leases.lock_key(name), json.dumps(holder).encode(), 60)
    started(car)
    try:
        assert wait_for(lambda: "stale_session_locks_cleared" in car.log_text(), timeout=10), car.log_text()
    finally:
        car.stop_all()
    assert leases.ops.get(leases.lock_key("session:dead")) is None
    assert leases.ops.get(leases.lock_key("session:live")) is not None
    assert leases.ops.get(leases.lock_key("session:away")) is not None


def test_the_periodic_sweep_runs_once_per_period_across_consumers(
    tmp_path: Path, queue: tuple[str, RedisServer | None]
) -> None:
    """Each consumer's scheduler enqueues the periodic sweep; the first to run it in a period
    sweeps (its state dir notes `last_sweep`), the other skips."""
    one, two = cars(tmp_path, *queue, 2)
    write_like_hermes(one.sessions / "session_p.json", session_variant(load_sample(), "p"))
    app = app_of(one)

    def logs() -> str:
        return one.log_text() + two.log_text()

    try:
        for car in (one, two):
            started(car)
        for _ in range(2):
            app.huey.enqueue(app.periodic_sweep.s())  # what each consumer's scheduler does at the period
        assert wait_for(lambda: "periodic_sweep_skipped" in logs(), timeout=10), logs()
        assert wait_for(lambda: '"event": "periodic_sweep"' in logs(), timeout=5), logs()
        assert logs().count('"event": "periodic_sweep"') == 1, logs()
    finally:
        one.stop_all()
        two.stop_all()


def test_a_once_mark_is_kept_for_its_period_only(tmp_path: Path, queue: tuple[str, RedisServer | None]) -> None:
    (car,) = cars(tmp_path, *queue, 1)
    leases = lease.Leases(app_of(car).huey)
    assert leases.once("sweep:x:1", 60)
    assert not leases.once("sweep:x:1", 60)  # the second consumer in that period
    assert leases.once("sweep:x:2", 0.2)
    time.sleep(0.3)
    assert leases.once("sweep:x:3", 60)
    assert leases.ops.get(leases._key("once", "sweep:x:2")) is None  # past its period: gone (SQLite too)
    assert leases.ops.get(leases._key("once", "sweep:x:1")) is not None


def test_concurrent_log_writers_write_whole_lines(tmp_path: Path) -> None:
    """Two processes logging JSON lines to one file (unbuffered, as the sidecar's processes run
    under a service manager): every line is one whole record."""
    out = tmp_path / "both.log"
    script = (
        "from timmy_compactor import logs\n"
        "logs.configure('json', 'info')\n"
        "log = logs.get_logger('t')\n"
        "for k in range(3000): log.info('line', k=k, pad='x' * (200 if k % 2 else 20000))\n"
    )
    with out.open("ab") as handle:
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", script],
                cwd=REPO,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
                stderr=handle,
                stdout=subprocess.DEVNULL,
            )
            for _ in range(2)
        ]
        assert all(p.wait(timeout=60) == 0 for p in procs)
    lines = out.read_text().splitlines()
    assert len(lines) == 6000
    assert all(json.loads(line)["event"] == "line" for line in lines)


@pytest.mark.redis
@pytest.mark.parametrize("end", ["kill -9", "SIGCONT"])
def test_a_killed_or_paused_consumers_inflight_session_is_run_again_by_another_within_seconds(
    redis_server: RedisServer, tmp_path: Path, short_leases: None, end: str
) -> None:
    """Consumer A is stopped mid-task (SIGSTOP while it holds the session's lease), then killed
    (-9) or resumed (SIGCONT) after consumer B took the session over: B writes the view within a
    lease or two, and a resumed A does not replace it (its lease is gone)."""
    one, two = cars(tmp_path, "redis", redis_server, 2)
    app = app_of(one)
    leases = lease.Leases(app.huey)
    raw = one.sessions / "session_k.json"
    view = one.sessions / "compacted_session_k.json"
    base = load_sample()
    proc = started(one, workers=1)
    try:
        write_like_hermes(raw, session_variant(base, "k"))
        inflight = leases._key("inflight", "session:k")
        caught = False
        for _ in range(20):  # stop A while its task is in flight (a compaction takes milliseconds)
            app.compact_session(str(raw))
            if wait_for(lambda: leases.ops.get(inflight) is not None, timeout=3, interval=0.001):
                os.killpg(proc.pid, signal.SIGSTOP)
                if leases.ops.get(inflight) is not None:
                    caught = True
                    break
                os.killpg(proc.pid, signal.SIGCONT)
            if view.exists():
                view.unlink()
        assert caught, one.log_text()
        if view.exists():  # stopped between its rename and letting go
            view.unlink()
        newer = session_variant(base, "k")
        newer["messages"] += [{"role": "user", "content": "and now?"}, {"role": "assistant", "content": "done"}]
        write_like_hermes(raw, newer)  # newer than what A read
        if end == "kill -9":
            os.killpg(proc.pid, signal.SIGKILL)
        started(two)
        assert wait_for(view.exists, timeout=3 * LEASE + 3), (two.log_text(), leases.ops.scan("timmy"))
        # B made it: by the in-flight watch (A's lease ran out) or, when B's start cleared the lease of
        # A's dead PID first, by its start's sweep (which then took the in-flight record over)
        assert wait_for(lambda: '"view_written"' in two.logs["consumer"].read_text(), timeout=5), two.log_text()
        _, meta = read_provenance(view)
        assert meta["raw_sha256"] == sha256_bytes(raw.read_bytes())
        made = view.read_bytes()
        if end == "SIGCONT":
            os.killpg(proc.pid, signal.SIGCONT)  # A resumes past its lease
            # it either finds the view current for the raw it reads now, or (had it read the older raw)
            # its write is refused by the fence: `view_not_replaced` (the in-process test shows that)
            time.sleep(1.5)
            assert view.read_bytes() == made
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGCONT)
        one.stop_all()
        two.stop_all()


# ---------------------------------------------------------------- scale-out on one Redis


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
        assert rerun is not None and task_key(app.config, rerun["task"], rerun["arg"]) == "shared"  # one job
        app.compact("shared")  # what a consumer letting go does with it
        # the view is written before its log line: wait for the line, not the file (a race under load)
        written = lambda: '"view_written"' in one.log_text() + two.log_text()  # noqa: E731
        assert wait_for(written, timeout=30), one.log_text() + two.log_text()
        assert view.exists()
        logs = one.log_text() + two.log_text()
        assert logs.count('"view_written"') == 1  # the others found it current
        assert "Traceback" not in logs
    finally:
        one.stop_all()
        two.stop_all()


def _take_and_die(config_path: str, name: str) -> None:
    app = make_app(load_config(Path(config_path)))
    held = lease.Leases(app.huey).take(name, {"task": "sweep_sessions", "arg": name})
    assert held is not None
    os._exit(0)  # killed mid-sweep: the lease and its in-flight record stay behind


def test_a_sweep_whose_worker_died_is_run_again_by_the_inflight_watch(
    tmp_path: Path, queue: tuple[str, RedisServer | None], short_leases: None
) -> None:
    """Issue 32 item 5: a full sweep holds its folder's lease, so the sweep of a worker killed mid-way
    (its sessions not yet enqueued) is run again by a live worker's in-flight watch: a session no
    watcher reported gets its view within a few leases, not at the next periodic sweep."""
    import multiprocessing

    (car,) = cars(tmp_path, *queue, 1)
    write_like_hermes(car.sessions / "session_seed.json", session_variant(load_sample(), "seed"))
    proc = started(car, workers=1)
    try:  # the start's own sweep is over once the session it found has its view
        assert wait_for((car.sessions / "compacted_session_seed.json").exists, timeout=30), car.log_text()
        raw = car.sessions / "session_unseen.json"
        write_like_hermes(raw, session_variant(load_sample(), "unseen"))  # no watcher runs: nobody enqueues it
        time.sleep(1)
        assert not (car.sessions / "compacted_session_unseen.json").exists()
        name = lease.sweep_lock_name(load_config(car.config_path).sessions_dir)
        child = multiprocessing.get_context("fork").Process(target=_take_and_die, args=(str(car.config_path), name))
        child.start()
        child.join(timeout=30)
        view = car.sessions / "compacted_session_unseen.json"
        assert wait_for(view.exists, timeout=6 * LEASE + 10), car.log_text()
    finally:
        car.stop_all()
        proc.wait(timeout=30)
