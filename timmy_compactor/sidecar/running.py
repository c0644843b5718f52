"""One sidecar per home: the watcher holds `<state_dir>/sidecar.lock` (flock, released by the
kernel when it dies) and writes its PID there; `status` reads it, a second sidecar is refused with
the running one's PID. Consumers without a watcher (scale-out on one Redis) take no such lock: what
keeps them apart is a lease per session in the queue backend (`sidecar.lease`)."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from timmy_compactor.errors import TimmyError

LOCK_NAME = "sidecar.lock"


class AlreadyRunningError(TimmyError, RuntimeError):
    """Another sidecar already runs on this home."""


def lock_path(state_dir: Path) -> Path:
    return state_dir / LOCK_NAME


def running(state_dir: Path) -> dict[str, Any] | None:
    """The running sidecar's record (pid, host, started, sessions_dir), or None when none holds the lock."""
    path = lock_path(state_dir)
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            try:
                info: dict[str, Any] = json.loads(handle.read() or b"{}")
            except ValueError:
                info = {}
            return info or {"pid": None}
        fcntl.flock(handle, fcntl.LOCK_UN)
    return None


def describe(info: dict[str, Any]) -> str:
    started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(info["started"])) if info.get("started") else "?"
    return f"PID {info.get('pid')} on {info.get('host', '?')}, started {started}, watching {info.get('sessions_dir')}"


def check_can_run(state_dir: Path) -> None:
    """What `sidecar_lock` refuses (a state dir it cannot write, a sidecar holding the lock), asked
    without taking the lock: a `status` meanwhile must not read a start's check as a running sidecar."""
    os.close(_open_lock(state_dir))
    info = running(state_dir)
    if info is not None:
        raise _already_running(state_dir, info)


def _open_lock(state_dir: Path) -> int:
    from timmy_compactor.atomic import private_dir
    from timmy_compactor.sidecar.records import recording

    path = lock_path(state_dir)
    with recording(path):  # an unwritable state dir: one error naming the lock file, not a traceback
        private_dir(state_dir)  # 0700, as the records and the queue make it
        return os.open(path, os.O_RDWR | os.O_CREAT, 0o600)


def _already_running(state_dir: Path, info: dict[str, Any]) -> AlreadyRunningError:
    return AlreadyRunningError(f"a sidecar already runs for {state_dir} ({describe(info)}); stop it first")


@contextlib.contextmanager
def sidecar_lock(state_dir: Path, sessions_dir: Path) -> Iterator[None]:
    """Hold the home's sidecar lock, or raise AlreadyRunningError naming the sidecar that holds it."""
    from timmy_compactor.sidecar.records import recording

    path = lock_path(state_dir)
    with os.fdopen(_open_lock(state_dir), "r+b") as handle:
        deadline = time.monotonic() + 1.0  # a `status` reading the lock holds it for an instant
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() < deadline:
                    time.sleep(0.05)
                    continue
                raise _already_running(state_dir, running(state_dir) or {}) from None
        record = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "started": time.time(),
            "sessions_dir": str(sessions_dir),
        }
        with recording(path):  # a full disk: the PID is not recorded, said in one line
            handle.truncate(0)
            handle.write(json.dumps(record).encode())
            handle.flush()
        try:
            yield
        finally:
            handle.truncate(0)
            fcntl.flock(handle, fcntl.LOCK_UN)
