"""Every process of a sidecar started by `huey_consumer.sh`, registered, and dying with its parent.

Each one (the consumer, its workers and scheduler, the watcher) holds an exclusive flock on
`<state_dir>/processes/<pid>.lock` for as long as it lives (the kernel lets go when it dies, whatever
killed it), with its supervisor's PID (the script's) and what it is written in it. A process whose
file is locked while its supervisor is gone is an orphan: a start refuses to run beside one
(`refuse_beside_orphans`, asked by `watch --check` and `--check-backend`), naming the PIDs.

The consumer's children (forked by huey) get SIGKILL from the kernel when the consumer dies
(`children_die_with_me`: `prctl(PR_SET_PDEATHSIG)` at each fork, Linux), so a `kill -9` of the
consumer, or of the script and the consumer together, leaves no worker running tasks. Their
sessions' in-flight work is run again from its lease (`sidecar.lease`).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
from pathlib import Path
from typing import Any

from timmy_compactor.atomic import pid_is_dead, private_dir
from timmy_compactor.errors import TimmyError

FOLDER = "processes"
FD_ENV = "TIMMY_SIDECAR_PROCESS_FD"
"""The descriptor of this process's registration (inherited across the exec of with_parent)."""
SUPERVISOR_ENV = "TIMMY_SIDECAR_SUPERVISOR"
STATE_ENV = "TIMMY_SIDECAR_PROCESSES"
PR_SET_PDEATHSIG = 1


class OrphansRunningError(TimmyError, RuntimeError):
    """Processes of an earlier sidecar on this home still run, their supervisor gone."""


def register(state_dir: Path, supervisor: int, what: str) -> int:
    """Register this process (its PID, `supervisor`, `what` it is); the locked descriptor, to keep open
    for the process's life (inheritable: it stays across an exec)."""
    folder = private_dir(state_dir / FOLDER)
    fd = os.open(folder / f"{os.getpid()}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    os.ftruncate(fd, 0)
    os.write(fd, json.dumps({"pid": os.getpid(), "supervisor": supervisor, "what": what}).encode())
    os.set_inheritable(fd, True)
    return fd


def live(state_dir: Path) -> list[dict[str, Any]]:
    """The registered processes that live (their file locked), in PID order; the files of dead ones go."""
    found = []
    folder = state_dir / FOLDER
    with contextlib.suppress(OSError):
        for path in sorted(folder.glob("*.lock"), key=lambda p: p.stem.zfill(12)):
            with contextlib.suppress(OSError), path.open("rb") as handle:
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    found.append(_record(handle.read(), path))
                    continue
                path.unlink()  # its process died: locked by no one
    return found


def _record(raw: bytes, path: Path) -> dict[str, Any]:
    try:
        record = json.loads(raw)
    except ValueError:
        record = None
    return record if isinstance(record, dict) else {"pid": int(path.stem) if path.stem.isdecimal() else None}


def orphans(state_dir: Path) -> list[dict[str, Any]]:
    """The live registered processes whose supervisor is gone."""
    return [p for p in live(state_dir) if isinstance(p.get("supervisor"), int) and pid_is_dead(p["supervisor"])]


def refuse_beside_orphans(state_dir: Path) -> None:
    """Raise OrphansRunningError, one line naming the PIDs and what to do, if any orphan runs."""
    left = orphans(state_dir)
    if not left:
        return
    named = ", ".join(f"{p.get('pid')} ({p.get('what', '?')})" for p in left)
    pids = " ".join(str(p.get("pid")) for p in left)
    raise OrphansRunningError(
        f"{len(left)} process(es) of an earlier sidecar on this home still run without it: {named}; "
        f"stop them (kill {pids}) and start again"
    )


def exit_with_parent(sig: int = signal.SIGTERM) -> bool:
    """Ask the kernel to send `sig` to this process when its parent dies (Linux); False elsewhere."""
    import ctypes
    import sys

    if not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    return int(libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)) == 0


def children_die_with_me() -> bool:
    """In a registered process (`FD_ENV` set, by with_parent): every child forked from here on gets
    SIGKILL when this process dies, and registers itself. False (nothing done) in any other process."""
    fd, supervisor, state = (os.environ.get(name, "") for name in (FD_ENV, SUPERVISOR_ENV, STATE_ENV))
    if not (fd.isdecimal() and supervisor.isdecimal() and state):
        return False
    parent = os.getpid()

    def in_child() -> None:
        exit_with_parent(signal.SIGKILL)  # a worker takes no signal from a dead consumer: it must not outlive it
        if os.getppid() != parent:  # the consumer died before the kernel was asked
            os._exit(1)
        with contextlib.suppress(OSError):
            os.close(int(os.environ[FD_ENV]))  # the consumer's registration: not this process's
        with contextlib.suppress(OSError):
            os.environ[FD_ENV] = str(register(Path(state), int(supervisor), "huey worker or scheduler"))

    os.register_at_fork(after_in_child=in_child)
    return True
