"""What a user may name to enqueue a compaction: a session id, or a session file by any path.

`timmy-compactor enqueue` and the Python recipe (`timmy_compactor.tasks.enqueue`) resolve what they
are given here, in the caller's working directory, before anything is enqueued (the consumer runs
elsewhere, in another directory):

- a **path** (it has a `/`, ends in `.json` or starts with `~`): relative to the current directory
  when that file exists there, else to the sessions dir; it must be a `session_<id>.json` directly in
  the sessions dir (symlinks resolved). A file that does not exist names a `state.db` session by its id.
- a **session id** (`20261122_abc`, or `session_20261122_abc`): its `session_<id>.json` in the sessions
  dir, else its rows in Hermes' `state.db` (Hermes' default: no JSON snapshots).

When both exist the database wins, as everywhere (`sessions.sources.Picker`; the task itself asks it).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from timmy_compactor.config import Config
from timmy_compactor.sessions.names import (
    SESSION_PREFIX,
    SESSION_SUFFIX,
    is_session_name,
    session_id_of,
)
from timmy_compactor.sessions.sources import STATE_DB, key_of
from timmy_compactor.sidecar.dblook import look_at_state_db, picker
from timmy_compactor.sidecar.folder import RefusedPathError, resolve_session_path


@dataclass(frozen=True)
class Target:
    """A session to compact: a raw file (`compact_session`) or a state.db session (`compact_db_session`)."""

    kind: Literal["file", "db"]
    value: str  # the real path of the file, or the session id

    @property
    def key(self) -> str:
        """The session's key (its file id), what the compaction task takes."""
        key = session_id_of(Path(self.value)) if self.kind == "file" else key_of(self.value)
        assert key is not None, "a target is named by its key"
        return key

    def describe(self) -> str:
        return self.value if self.kind == "file" else f"state.db session {self.value}"


def _looks_like_path(text: str) -> bool:
    return os.sep in text or "/" in text or text.endswith(SESSION_SUFFIX) or text.startswith(("~", "."))


def _db_session(config: Config, key: str) -> str | None:
    """The id of the state.db session whose file names carry `key` (`names.file_id`), if the picker
    gives it to state.db; a database that cannot be read names no session (the refusal says so)."""
    winner, _ = picker(config, look_at_state_db(config, marks=False)).find(key)
    return winner.session_id if winner is not None and winner.source == STATE_DB else None


def resolve_target(text: str, config: Config, cwd: Path | None = None) -> Target:
    """The session `text` names, or RefusedPathError saying why it names none (one line)."""
    cwd = cwd or Path.cwd()
    sessions_dir = config.sessions_dir
    if not text.strip():
        raise RefusedPathError("an empty name is not a session")
    if _looks_like_path(text):
        given = Path(text).expanduser()
        if not given.is_absolute():
            here = cwd / given
            given = here if here.exists() or here.is_symlink() else sessions_dir / given
        if given.is_file():
            return Target("file", str(resolve_session_path(given, sessions_dir)))
        if is_session_name(given.name) and not given.exists():
            in_sessions_dir = given.parent.resolve() == sessions_dir.expanduser().resolve()
            db_id = _db_session(config, session_id_of(given)) if in_sessions_dir else None
            if db_id is not None:
                return Target("db", db_id)
        raise RefusedPathError(f"{text}: no such session file")
    session_id = text.removeprefix(SESSION_PREFIX) if text.startswith(SESSION_PREFIX) else text
    snapshot = sessions_dir / f"{SESSION_PREFIX}{session_id}{SESSION_SUFFIX}"
    if snapshot.is_file():
        return Target("file", str(resolve_session_path(snapshot, sessions_dir)))
    for key in dict.fromkeys((key_of(session_id), session_id)):  # an id, else a key (the name of its view)
        db_id = _db_session(config, key) if key is not None else None
        if db_id is not None:
            return Target("db", db_id)
    raise RefusedPathError(f"{text}: no session of that id: neither {snapshot} nor a session in state.db")


def enqueue_target(app: Any, target: Target, **options: Any) -> Any:
    """Enqueue the compaction of `target` (by its key) on `app` (a `sidecar.app.App`), ahead of sweep
    work (someone asked for it now); huey's Result handle."""
    from timmy_compactor.sidecar.live import LIVE

    return app.compact(target.key, **{"priority": LIVE, **options})
