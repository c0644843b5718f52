"""What a session source is: the interface every source implements, the reference to one session it
holds, and the errors a source raises. The sources themselves are `snapshots.SnapshotSource` and
`dbsource.StateDbSource`; `sources` registers them (SOURCES) and holds THE picker between them.

A **source** lists its sessions, each with a cheap mark that changes whenever the session does (a
snapshot's `(mtime_ns, size)`, a state.db session's high-water mark: "changed since"); finds one
session by its key without listing the others (one change, one look); and reads one session: its
live context (what the compactor compacts), its whole history (what `show --history` numbers) and
the bytes the export hashes and parses.

A session's **key** is its file id (`names.file_id`): the `<id>` its snapshot and its view carry,
the one name two sources agree on.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Protocol

from timmy_compactor.errors import TimmyError
from timmy_compactor.sessions.files import Session
from timmy_compactor.sessions.names import shown_id

CAUSES = {
    "schema": "schema changed (a Hermes upgrade?): upgrade timmy-compactor to a version that knows it",
    "locked": "another program holds a long write lock on it; nothing to do if it is Hermes at work",
    "permission": "make it (and its folder) readable by the user the sidecar runs as",
    "corrupt": "check it with: sqlite3 state.db 'PRAGMA integrity_check'",
    "unreadable": "check the file",
    "not_ready": "nothing to do: Hermes is creating it",
    "row": "fix or remove the session in Hermes; the other sessions are not affected",
}
"""Why state.db cannot be read, and what to do. Whatever the cause, views are kept as they are
and the next readable sweep picks up where the last one left."""


class StateDBError(TimmyError, RuntimeError):
    """The database cannot be used (locked, truncated, unknown schema...); the message says why.
    `cause` is one of CAUSES; `hint` what to do about it."""

    def __init__(self, message: str, cause: str = "unreadable") -> None:
        super().__init__(message)
        self.cause = cause

    @property
    def hint(self) -> str:
        return CAUSES.get(self.cause, CAUSES["unreadable"])


class StateDBNotReadyError(StateDBError):
    """A brand-new database: Hermes has not written its schema (or any row) yet."""


class UnusableSessionError(StateDBError):
    """One session whose rows cannot be used (binary content, JSON nested too deep, an id no file
    name can stand for...). The message names the session (by its file id) and the row, never what
    the row holds; the other sessions are not affected."""

    def __init__(self, session_id: object, problem: str) -> None:
        super().__init__(f"session {shown_id(session_id)}: {problem}", cause="row")
        self.problem = problem


@dataclass(frozen=True, kw_only=True)
class Places:
    """Where one home keeps its sessions: the sessions folder and Hermes' home (its state.db)."""

    sessions_dir: Path
    hermes_home: Path | None = None
    busy_timeout: float = 5.0  # how long a read of state.db waits for a writer's lock


@dataclass(frozen=True, kw_only=True)
class SessionRef:
    """One session as one source holds it."""

    source: str  # the name of its source
    session_id: str  # its id in that source (state.db: Hermes' id, which may be no file name)
    key: str | None  # its file id: what two sources agree on (None: no file can be named after it)
    mark: Hashable  # changes whenever the session does
    path: Path | None = None  # a snapshot's file
    written_at: float | None = None  # when it last changed, if the source knows (a snapshot's mtime)
    platform: str | None = None  # where Hermes ran it (cli, telegram…), if the source knows without reading it
    host_tools: bool = False  # it records no tool schemas: Hermes' enabled tools (per platform) go into its view

    @property
    def name(self) -> str:
        """How a log line, a manifest or an error names it: its file, or `<source>#<file id>`."""
        return str(self.path) if self.path is not None else f"{self.source}#{shown_id(self.session_id)}"


class SourceUnavailableError(TimmyError):
    """A source that is there but cannot be read now; `error` says why (a StateDBError: its cause and hint)."""

    def __init__(self, source: str, error: TimmyError) -> None:
        super().__init__(str(error))
        self.source = source
        self.error = error


@dataclass(frozen=True)
class Listing:
    """What a source holds: its sessions, and the entries it refused (path or name, and why)."""

    refs: tuple[SessionRef, ...]
    refused: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, kw_only=True)
class Watched:
    """A folder a source asks the watcher to watch, and what a change to one of its entries means:
    with `key_of`, a change to the session that entry is (its key, or None: not one of its entries);
    with `names`, a change to the source as a whole (a sweep of it finds what moved)."""

    source: str
    folder: Path
    events: frozenset[str]  # the watchdog events that mean a change (created, modified, closed, moved, deleted)
    key_of: Callable[[str], str | None] | None = None
    names: frozenset[str] = frozenset()
    is_home: bool = False  # the source's own folder: created when missing, watched again once readable

    def accepts(self, name: str) -> bool:
        return name in self.names or (self.key_of is not None and self.key_of(name) is not None)


class SessionSource(Protocol):
    name: ClassVar[str]

    @classmethod
    def open(cls, places: Places) -> SessionSource | None:
        """The source of this home, or None when it has none (no state.db)."""

    @classmethod
    def watched(cls, places: Places) -> list[Watched]:
        """What the watcher watches for it ([]: nothing; its changes are found by the sweeps)."""

    def listing(self) -> Listing:
        """Every session it holds (SourceUnavailableError: it cannot be read now)."""

    def find(self, key: str) -> SessionRef | None:
        """The session of this key, without listing the others (SourceUnavailableError as above)."""

    def read(self, ref: SessionRef) -> Session:
        """Its live context, as the compactor reads it (SessionError, StateDBError)."""

    def history(self, ref: SessionRef) -> Session:
        """Every message it ever had, once each (a snapshot: its messages)."""

    def raw(self, ref: SessionRef) -> bytes:
        """Its whole history as the bytes of a session document (what the export hashes and parses)."""
