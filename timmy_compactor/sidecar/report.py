"""What `status` says, typed: the report `status.gather` builds from the sources, which the printer
(`sidecar/cli.py`) and `status --json` (`StatusReport.as_json`, its keys as documented) both read."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from timmy_compactor.host.trigger import Trigger

VIEW_STATES = ("fresh", "stale", "missing", "none", "unreadable")
COPY_STATES = ("current", "frozen", "absent")


@dataclass(frozen=True, kw_only=True)
class SessionStatus:
    """How one session stands, from the source that wins it."""

    source: str
    key: str  # its key (the `<id>` of its view), or how it is shown when no file can be named after it
    name: str  # how it is named: a snapshot's path, `state.db#<key>`
    path: Path | None  # its file, when the source has one (a snapshot); never an invented one
    tokens: int | None
    usage: float | None
    above_threshold: bool
    view: str  # fresh | stale | missing | none (below threshold) | unreadable
    error: str | None = None
    orphans: int = 0  # orphan tool calls/results in the view (a call still awaiting its result at the end is none)
    above_budget: bool = False  # the view is larger than target_after allows (its report's note says why)


@dataclass(frozen=True, kw_only=True)
class Unavailable:
    """Why a source cannot be read now, and what to do."""

    cause: str | None
    error: str
    hint: str | None


@dataclass(frozen=True, kw_only=True)
class SourceReport:
    """One source of this home: the sessions it wins, those it cannot use, why it cannot be read (if
    so), and how the copies the sources below it hold of its sessions stand (current, frozen, absent)."""

    name: str
    sessions: int
    unusable: int
    unavailable: Unavailable | None
    copies: Mapping[str, int]


@dataclass(frozen=True, kw_only=True)
class SidecarState:
    running: dict[str, Any] | None  # the running sidecar's PID and start, or None
    queue_depth: int | None
    queue_error: str | None
    last_sweep: dict[str, object] | None


@dataclass(frozen=True, kw_only=True)
class ErrorEntry:
    name: str
    action: str
    reason: str | None
    at: float


@dataclass(frozen=True, kw_only=True)
class RawLogs:
    dir: Path
    sessions: int
    bytes: int
    keep_days: int
    prompt_tokens: int = 0  # what Hermes reported over the sessions held
    cache_read_share: float | None = None  # of those prompt tokens, what its provider read from the cache


@dataclass(frozen=True, kw_only=True)
class StatusReport:
    sidecar: SidecarState
    state_error: str | None
    sessions_dir: Path
    sessions_dir_error: str | None
    sessions_dir_exists: bool  # false on a home where Hermes has not run yet (the sidecar waits for it)
    sessions: tuple[SessionStatus, ...]
    sources: tuple[SourceReport, ...]
    backend: str
    views_trigger: Trigger
    hermes_trigger: Trigger
    engine_raw_logs: RawLogs
    last_errors: tuple[ErrorEntry, ...]
    state_db_path: Path
    state_db_usable: bool
    snapshots_enabled: bool | None

    def source(self, name: str) -> SourceReport:
        found = next((s for s in self.sources if s.name == name), None)
        return found or SourceReport(name=name, sessions=0, unusable=0, unavailable=None, copies={})

    def as_json(self) -> dict[str, Any]:
        """`status --json`: the keys the docs and the callers use."""
        views = {state: sum(s.view == state for s in self.sessions) for state in VIEW_STATES}
        db, snapshots = self.source("state.db"), self.source("file")
        raw_logs = dataclasses.asdict(self.engine_raw_logs)
        return {
            "sidecar": dataclasses.asdict(self.sidecar),
            "state_error": self.state_error,
            "sessions_dir": str(self.sessions_dir),
            "sessions_dir_error": self.sessions_dir_error,
            "sessions_dir_exists": self.sessions_dir_exists,
            "sessions": len(self.sessions),
            "above_threshold": sum(s.above_threshold for s in self.sessions),
            "views": views,
            "views_with_orphans": sum(1 for s in self.sessions if s.orphans),
            "views_above_budget": sum(s.above_budget for s in self.sessions),
            "backend": self.backend,
            "triggers": {
                "views": dataclasses.asdict(self.views_trigger),
                "inside_hermes": dataclasses.asdict(self.hermes_trigger),
            },
            "hermes_engine_raw_logs": {**raw_logs, "dir": str(self.engine_raw_logs.dir)},
            "sources": {
                "state_db": {
                    "path": str(self.state_db_path),
                    "usable": self.state_db_usable,
                    "unavailable": None if db.unavailable is None else dataclasses.asdict(db.unavailable),
                    "sessions": db.sessions,
                    "unusable_sessions": db.unusable,
                    "snapshots_of_these": {k: db.copies.get(k, 0) for k in COPY_STATES},
                },
                "snapshots": {"enabled_in_hermes": self.snapshots_enabled, "files_without_db_rows": snapshots.sessions},
                **{s.name: dataclasses.asdict(s) for s in self.sources if s.name not in ("state.db", "file")},
            },
            "per_session": [_session_entry(s) for s in self.sessions],
            "last_errors": [
                {"path": e.name, "session": Path(e.name).name, "action": e.action, "reason": e.reason, "at": e.at}
                for e in self.last_errors
            ],
        }


def _session_entry(s: SessionStatus) -> dict[str, Any]:
    return {
        "session": s.key,
        "source": s.source,
        "path": s.name,
        "tokens": s.tokens,
        "usage": None if s.usage is None else round(s.usage, 4),
        "above_threshold": s.above_threshold,
        "view": s.view,
        "orphans": s.orphans,
        "above_budget": s.above_budget,
    }
