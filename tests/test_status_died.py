"""`status --check` reports a sweep or a task that died as unhealthy (issue 32.1): the real app on its
real SQLite queue, a sweep's process killed for real, `status --check` run as a user runs it."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support import Sidecar, big_session, write_like_hermes
from timmy_compactor.config import load_config
from timmy_compactor.sidecar import work
from timmy_compactor.sidecar.app import make_app
from timmy_compactor.sidecar.status import STATUS_SESSIONS_FAILING, check


def unhealthy(car: Sidecar) -> list[str]:
    """The lines of `status --check` past "no sidecar runs" (none runs in these tests)."""
    done = car.cli("status", "--check")
    lines = [line for line in done.stdout.splitlines() if "no sidecar runs" not in line]
    assert done.returncode in (0, 3, STATUS_SESSIONS_FAILING), done
    return lines


def test_a_sweep_that_raised_is_unhealthy_until_a_sweep_completes(tmp_path: Path, monkeypatch: Any) -> None:
    from timmy_compactor.sidecar import sweep

    car = Sidecar(tmp_path, "sqlite")
    write_like_hermes(car.sessions / "session_a.json", big_session("a"))
    app = make_app(load_config(car.config_path))
    real = sweep.sweep_sources

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("Symlink loop from '/x/session_loop.json'")

    monkeypatch.setattr(sweep, "sweep_sources", broken)
    assert app.sweep_sessions.call_local() == 0  # one error line, no traceback
    code, lines = check(load_config(car.config_path))
    assert code == 3  # no sidecar runs: the lowest code; the sweep's line is there too
    assert any("the last sweep failed" in line and "RuntimeError: Symlink loop" in line for line in lines), lines
    monkeypatch.setattr(sweep, "sweep_sources", real)
    assert app.sweep_sessions.call_local() == 1
    assert unhealthy(car) == []


def test_a_sweep_whose_process_was_killed_is_unhealthy(tmp_path: Path) -> None:
    car = Sidecar(tmp_path, "sqlite")
    write_like_hermes(car.sessions / "session_a.json", big_session("a"))
    make_app(load_config(car.config_path)).records()
    killed_mid_sweep = (
        "import os, signal, sys; from pathlib import Path\n"
        "from timmy_compactor.sidecar.health import sweeping; from timmy_compactor.sidecar.records import Records\n"
        "with sweeping(Records(Path(sys.argv[1])), full=True):\n    os.kill(os.getpid(), signal.SIGKILL)"
    )
    done = subprocess.run([sys.executable, "-c", killed_mid_sweep, str(car.state)], env=car.env, check=False)
    assert done.returncode == -signal.SIGKILL
    lines = unhealthy(car)
    assert len(lines) == 1 and "unhealthy: a sweep died" in lines[0], lines
    app = make_app(load_config(car.config_path))
    assert app.sweep_sessions.call_local() == 1  # a sweep that completes catches up
    assert unhealthy(car) == []


def test_a_task_that_died_with_an_error_is_unhealthy_until_its_session_runs_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    car = Sidecar(tmp_path, "sqlite")
    write_like_hermes(car.sessions / "session_a.json", big_session("a"))
    app = make_app(load_config(car.config_path))
    real = work.process

    def crash(*args: Any, **kwargs: Any) -> Any:
        raise KeyError("a bug")

    monkeypatch.setattr(work, "process", crash)
    app.compact("a", retries=0)
    task = app.huey.dequeue()
    app.huey.execute(task)  # huey logs the traceback; the signal notes it
    lines = unhealthy(car)
    assert len(lines) == 1 and "1 task(s) died with an error (last: compact of a" in lines[0], lines
    assert "KeyError: 'a bug'" in lines[0]
    monkeypatch.setattr(work, "process", real)
    app.compact("a")
    app.huey.execute(app.huey.dequeue())
    assert (car.sessions / "compacted_session_a.json").exists()
    assert unhealthy(car) == []
