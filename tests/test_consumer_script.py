"""huey_consumer.sh: its flags, its two children supervised, kill -9 leaving nothing running. Real processes."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support import (
    REPO,
    VENV_BIN,
    Sidecar,
    load_sample,
    session_variant,
    start_consumer_script,
    wait_for,
    write_like_hermes,
)
from tests.support import stop_consumer_script as stop_script
from tests.support_homes import SCRIPT, VENV, json_lines, script_env, write_config


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
        kids: dict[int, bytes] = {}

        def both_running() -> bool:
            """Both children started, the victim among them, in one reading of /proc (a child that is
            exec'ing -- setsid, then with_parent, then the command -- shows an empty command line)."""
            names = _child_commands(script.pid)
            ready = len(names) == 2 and all(b"bin/" in c for c in names.values())
            if ready and any(victim.encode() in c for c in names.values()):
                kids.update(names)
                return True
            return False

        assert wait_for(both_running, timeout=30)
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
        assert wait_for(lambda: not any(alive(pid) for pid in left), timeout=15), [p for p in left if alive(p)]
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


def master_of(script: int) -> int:
    """The huey consumer below the script (the process whose children are the workers and scheduler)."""
    return next(p for p in _children(script) if b"huey_consumer" in Path(f"/proc/{p}/cmdline").read_bytes())


def views_current(car: Sidecar, names: list[str]) -> bool:
    """Every session's view there and made from the session as it is now (its provenance's sha256)."""
    import hashlib

    from timmy_compactor.sessions.files import SessionError, read_provenance

    for name in names:
        raw = (car.sessions / f"session_{name}.json").read_bytes()
        try:
            made_from = read_provenance(car.sessions / f"compacted_session_{name}.json")[1].get("raw_sha256")
        except (OSError, ValueError, SessionError):
            return False
        if made_from != hashlib.sha256(raw).hexdigest():
            return False
    return True


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads the process tree from /proc (Linux)")
@pytest.mark.parametrize("victims", ["script+master", "master", "watcher", "worker", "scheduler"])
def test_kill_9_under_load_leaves_no_process_and_every_view_current_after_the_restart(
    tmp_path: Path, victims: str
) -> None:
    """Sessions written while the sidecar works; kill -9 of the script and the huey master together, or
    of any one process (the master, the watcher, a worker, the scheduler): no process of the sidecar is
    left without its supervisor, and (after the restart a service manager makes when the script exits)
    every view is made from its session as it now is (32.5)."""
    import sys

    from tests.support import big_session

    car = Sidecar(tmp_path, "sqlite")
    env = {**car.env, "TIMMY_VENV": str(Path(sys.executable).parent.parent), "TIMMY_LEASE_SECONDS": "2"}
    names = [f"s{n}" for n in range(12)]
    for name in names:
        write_like_hermes(car.sessions / f"session_{name}.json", big_session(name))
    first = start_consumer_script(tmp_path / "first.log", env)
    second = None
    left: set[int] = set()
    try:
        assert wait_for(lambda: len(descendants(first.pid)) >= 5, timeout=30), (tmp_path / "first.log").read_text()
        master = master_of(first.pid)
        left = descendants(first.pid)
        for name in names[:6]:  # written again while the first sidecar works: the views must follow
            write_like_hermes(car.sessions / f"session_{name}.json", session_variant(big_session(name), name))
        if victims in ("worker", "scheduler"):  # huey forks its scheduler first, then its workers
            children = sorted(_children(master))
            os.kill(children[0] if victims == "scheduler" else children[-1], signal.SIGKILL)
        else:
            watcher = next(p for p in _children(first.pid) if p != master)
            os.kill(watcher if victims == "watcher" else master, signal.SIGKILL)
            if victims == "script+master":
                os.kill(first.pid, signal.SIGKILL)
            first.wait(timeout=30)
            assert wait_for(lambda: not any(alive(pid) for pid in left), timeout=15), [p for p in left if alive(p)]
            second = start_consumer_script(tmp_path / "second.log", env)
        logs = "".join(p.read_text()[-3000:] for p in tmp_path.glob("*.log"))
        assert wait_for(lambda: views_current(car, names), timeout=90), logs
    finally:
        for proc in (first, second):
            if proc is not None:
                stop_script(proc)
        gone = wait_for(lambda: not any(alive(pid) for pid in left if pid != first.pid), timeout=15)
        assert gone, "a process outlived its sidecar"  # a parent-death signal is delivered, not awaited
        for pid in left:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_a_start_refuses_to_run_beside_an_orphan_of_an_earlier_sidecar(tmp_path: Path) -> None:
    """A process of a sidecar whose script is gone (registered, still running): the start's check says
    so in one line naming its PID and what to do, and starts nothing; once it is gone, the start works."""
    import sys

    from tests.support import dead_pid

    car = Sidecar(tmp_path, "sqlite")
    orphan = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from pathlib import Path; from timmy_compactor.sidecar.processes import register\n"
            "register(Path(sys.argv[1]), int(sys.argv[2]), 'huey worker or scheduler'); print('ok', flush=True)\n"
            "time.sleep(60)",
            str(car.state),
            str(dead_pid()),
        ],
        stdout=subprocess.PIPE,
        env=car.env,
    )
    try:
        assert orphan.stdout is not None and orphan.stdout.readline() == b"ok\n"
        refused = car.cli("watch", "--check")
        assert refused.returncode == 2
        assert refused.stderr.count("\n") == 1 and f"{orphan.pid} (huey worker or scheduler)" in refused.stderr
        assert f"kill {orphan.pid}" in refused.stderr
        assert car.cli("watch", "--check-backend").returncode == 2
    finally:
        orphan.kill()
        orphan.wait()
    assert car.cli("watch", "--check").returncode == 0


# ---------------------------------------------------------------- its flags


def run_script(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT), *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=60, check=False
    )


def test_consumer_script_help_starts_nothing(tmp_path: Path) -> None:
    venv = tmp_path / "no-venv"  # a first run would create it: --help must not
    for flag in ("--help", "-h"):
        done = run_script(flag, env=script_env(venv=venv))
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith("Usage: ./huey_consumer.sh ")
        for words in ("-w, --workers N", "-v, --verbose", "-q, --quiet", "TIMMY_LOG_LEVEL", "TIMMY_WORKERS"):
            assert words in done.stdout
        assert done.stderr == ""
    assert not venv.exists()


@pytest.mark.parametrize(
    ("args", "extra", "message"),
    [
        (["--bogus"], {}, "unknown argument '--bogus'"),
        (["-x"], {}, "unknown argument '-x'"),
        (["start"], {}, "unknown argument 'start'"),
        (["-w"], {}, "-w needs a number of workers"),
        (["-w", "zero"], {}, "the number of workers must be a positive integer, got 'zero'"),
        (["--workers=0"], {}, "the number of workers must be a positive integer, got '0'"),
        ([], {"TIMMY_WORKERS": "-3"}, "the number of workers must be a positive integer, got '-3'"),
        ([], {"TIMMY_LOG_LEVEL": "loud"}, "TIMMY_LOG_LEVEL must be debug, info, warning or error, got 'loud'"),
    ],
    ids=["long", "short", "positional", "w-without-n", "w-not-a-number", "workers-zero", "env-workers", "env-level"],
)
def test_consumer_script_refuses_a_bad_argument_in_one_line(
    tmp_path: Path, args: list[str], extra: dict[str, str], message: str
) -> None:
    venv = tmp_path / "no-venv"
    done = run_script(*args, env=script_env(venv=venv, **extra))
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr == f"huey_consumer.sh: error: {message} (see ./huey_consumer.sh --help)\n"
    assert not venv.exists()


def start_script(root: Path, config: Path, name: str, *args: str, **extra: str) -> tuple[Any, Path]:
    log = root / f"{name}.log"
    return start_consumer_script(log, script_env(config, **extra), *args), log


def enqueue(config: Path, path: Path) -> None:
    done = subprocess.run(
        [str(VENV / "bin" / "timmy-compactor"), "enqueue", str(path), "--config", str(config)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr


def test_consumer_script_verbose_and_workers_reach_huey(tmp_path: Path) -> None:
    """`-v -w 1`: huey starts one worker (the config says 3) and debug lines are logged, ours and huey's."""
    config, sessions = write_config(tmp_path, workers=3)
    proc, log = start_script(tmp_path, config, "verbose", "-v", "-w", "1")
    try:
        assert wait_for(lambda: "with 1 process" in log.read_text() or "1 x process" in log.read_text(), 60), (
            log.read_text()[-3000:]
        )
        raw = sessions / "session_habits.json"
        write_like_hermes(raw, load_sample())
        enqueue(config, raw)  # the watcher may not be watching yet; the queue is
        view = sessions / "compacted_session_habits.json"
        assert wait_for(view.exists, timeout=60), log.read_text()[-3000:]
        enqueue(config, raw)  # the view is current: said at debug level only
        assert wait_for(lambda: any(e["event"] == "view_current" for e in json_lines(log)), timeout=60), (
            log.read_text()[-3000:]
        )
        levels = {e.get("level") for e in json_lines(log)}
        assert {"debug", "info"} <= levels
        assert any(e.get("logger", "").startswith("huey") and e.get("level") == "debug" for e in json_lines(log))
    finally:
        assert stop_script(proc) == 0, log.read_text()[-3000:]


def test_consumer_script_quiet_logs_only_warnings_and_errors(tmp_path: Path) -> None:
    """`-q` (and TIMMY_LOG_LEVEL=warning): a compaction leaves no info line, ours or huey's."""
    from timmy_compactor.sidecar.running import running

    for name, args, extra in (("quiet", ["-q"], {}), ("env", [], {"TIMMY_LOG_LEVEL": "WARNING"})):
        root = tmp_path / name
        config, sessions = write_config(root)
        proc, log = start_script(root, config, name, *args, **extra)
        try:
            assert wait_for(lambda root=root: running(root / "state") is not None, timeout=60), log.read_text()
            write_like_hermes(sessions / "session_habits.json", load_sample())
            enqueue(config, sessions / "session_habits.json")  # the watcher may not be watching yet
            view = sessions / "compacted_session_habits.json"
            assert wait_for(view.exists, timeout=60), log.read_text()[-3000:]
        finally:
            assert stop_script(proc) == 0, log.read_text()[-3000:]
        lines = json_lines(log)
        assert {e.get("level") for e in lines} <= {"warning", "error"}, log.read_text()[-3000:]
        assert "Executing" not in log.read_text() and "view_written" not in log.read_text()
