"""A sweep or a task that died, as `status --check` reports it (issue 32.1).

A sweep notes itself running (`sweep_running:<host>:<pid>`) and takes the note off when it ends; a
sweep that raised notes `sweep_failed` with its error in one line. A note of a running sweep whose
process is gone is a sweep that was killed. A task that ended in an error huey caught (a traceback
in the consumer's log) notes `task_died:<session>`; it stands until the session has an outcome
recorded after it. A full sweep that completes clears the sweeps' notes: it caught up on everything.
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
from collections.abc import Iterator
from typing import Any

from timmy_compactor.atomic import pid_is_dead
from timmy_compactor.sidecar.records import Records

RUNNING = "sweep_running:"
FAILED = "sweep_failed"
TASK_DIED = "task_died:"


def one_line(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


@contextlib.contextmanager
def sweeping(records: Records, *, full: bool) -> Iterator[None]:
    """Around one sweep: noted running while it runs, failed if it raises; a full one that completes
    clears what earlier sweeps left (failures, the notes of killed ones)."""
    host, pid = socket.gethostname(), os.getpid()
    mine = f"{RUNNING}{host}:{pid}"
    records.note(mine, {"at": time.time(), "host": host, "pid": pid})
    try:
        yield
    except Exception as exc:
        records.note(FAILED, {"at": time.time(), "error": one_line(exc)})
        raise
    else:
        if full:
            records.forget_notes([key for key, note in records.notes(RUNNING).items() if _killed(note)] + [FAILED])
    finally:
        records.forget_notes([mine])


def task_died(records: Records, key: str, task: str, exc: BaseException | None) -> None:
    records.note(f"{TASK_DIED}{key}", {"at": time.time(), "task": task, "error": one_line(exc) if exc else "?"})


def _killed(note: dict[str, Any]) -> bool:
    return note.get("host") == socket.gethostname() and pid_is_dead(note.get("pid"))


def _when(at: object) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(at))) if isinstance(at, int | float) else "?"


def died(records: Records) -> list[str]:
    """One line per kind of death `status --check` reports (none when healthy)."""
    lines = []
    killed = [note for note in records.notes(RUNNING).values() if _killed(note)]
    if killed:
        last = max(killed, key=lambda note: float(note.get("at") or 0))
        lines.append(
            f"a sweep died (started {_when(last.get('at'))}, its process {last.get('pid')} is gone): sessions may "
            "wait for the next sweep (`timmy-compactor sweep` runs one now)"
        )
    failed = records.noted(FAILED)
    if failed:
        lines.append(f"the last sweep failed ({_when(failed.get('at'))}: {failed.get('error')}); see the sidecar's log")
    tasks = {
        key.removeprefix(TASK_DIED): note
        for key, note in records.notes(TASK_DIED).items()
        if (records.last_run(key.removeprefix(TASK_DIED)) or 0) < float(note.get("at") or 0)
    }
    if tasks:
        session, note = max(tasks.items(), key=lambda item: float(item[1].get("at") or 0))
        lines.append(
            f"{len(tasks)} task(s) died with an error (last: {note.get('task')} of {session}, {_when(note.get('at'))}: "
            f"{note.get('error')}); see the sidecar's log"
        )
    return lines
