"""huey_consumer.sh supervises its two children: if either dies, the other is stopped and the
script exits non-zero. Real processes."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest

from tests.support import REPO, VENV_BIN, Sidecar, wait_for


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
