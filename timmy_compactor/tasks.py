"""The sidecar's Huey app for Python callers: `from timmy_compactor.tasks import enqueue`.

Importing it builds the app once from the configuration in the environment (`$TIMMY_COMPACTOR_CONFIG`,
then `$XDG_CONFIG_HOME/timmy-compactor/compaction.yaml`, then the defaults), the same queue and
tasks as `huey_consumer tasks.huey` (the root `tasks.py` is that consumer's name for this module).
From any Python that has the package, while the sidecar runs:

    from timmy_compactor.tasks import enqueue
    result = enqueue("20261122_abc")           # a session id, or a session file's path
    print(result.get(blocking=True, timeout=60)["action"])   # "written", "below_threshold", …

`enqueue` resolves the session here (relative paths against this process's directory) and returns
huey's Result handle; `compact(key)` (and its older names `compact_session(path)`,
`compact_db_session(id)`) and the other tasks are huey tasks as usual.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from timmy_compactor.config import load_config
from timmy_compactor.errors import EXIT_BAD_INPUT, TimmyError
from timmy_compactor.sidecar.app import make_app
from timmy_compactor.sidecar.processes import children_die_with_me
from timmy_compactor.sidecar.targets import enqueue_target, resolve_target

children_die_with_me()  # in the consumer huey_consumer.sh started: its workers and scheduler die with it
try:
    app = make_app(load_config())
except TimmyError as exc:  # a bad config, an unwritable state dir: one line for huey_consumer, not a traceback
    print(f"timmy-compactor: error: {exc}", file=sys.stderr)
    raise SystemExit(EXIT_BAD_INPUT) from None
config = app.config
huey = app.huey
records = app.records
compact = app.compact
compact_session = app.compact_session
compact_db_session = app.compact_db_session
sweep_sessions = app.sweep_sessions
session_export = app.session_export
periodic_sweep = app.periodic_sweep
periodic_export = app.periodic_export


def enqueue(session: str | Path, *, cwd: str | Path | None = None) -> Any:
    """Enqueue a compaction of `session` (an id, or a session file's path, relative to `cwd` or this
    process's directory); huey's Result handle, whose `.get(blocking=True)` is the task's outcome
    (`path`, `action`, `reason`, `report`). Raises `RefusedPathError` (one line) for what names no
    session."""
    target = resolve_target(str(session), config, Path(cwd) if cwd is not None else None)
    return enqueue_target(app, target)


__all__ = [
    "app",
    "compact",
    "compact_db_session",
    "compact_session",
    "config",
    "enqueue",
    "huey",
    "periodic_export",
    "periodic_sweep",
    "records",
    "session_export",
    "sweep_sessions",
]
