"""What the export reads: the raw snapshots in the sessions dir and the sessions in Hermes' state.db.

Never a view: views are not `session_<id>.json`, and nothing here reads one.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from timmy_compactor.export.summary import FileProblem
from timmy_compactor.sessions.files import Session
from timmy_compactor.sessions.names import is_session_name, session_id_of, shown_id
from timmy_compactor.sessions.statedb import StateDB, StateDBError, StateDBNotReadyError


def scan_sessions(sessions_dir: Path) -> tuple[list[tuple[str, Path]], list[FileProblem]]:
    """(key, path) of every raw session file directly in `sessions_dir`, sorted by key, and the
    entries refused. Symlinks are never followed: one that leaves the directory (or points at a view
    or any other file) is refused, one to a raw session here is skipped (that file is read itself)."""
    base = sessions_dir.resolve()
    found: list[tuple[str, Path]] = []
    refused: list[FileProblem] = []
    with os.scandir(base) as entries:
        listed = sorted((entry.name, entry.is_symlink(), entry.is_file()) for entry in entries)
    for name, symlink, regular in listed:
        if not is_session_name(name):
            continue
        path = base / name
        if symlink:
            real = path.resolve()
            if real.parent == base and is_session_name(real.name) and real.is_file():
                reason = f"symlink to {real.name}, which is exported under its own name; skipped"
            else:
                reason = f"symlink to {real}, which is not a raw session in {base}; refused (copy the file in instead)"
            refused.append(FileProblem(file=str(path), reason=reason))
        elif not regular:
            refused.append(FileProblem(file=str(path), reason="not a regular file; refused"))
        else:
            found.append((session_id_of(name), path))
    found.sort()  # by key: "session_a-b.json" sorts before "session_a.json", but key "a" before "a-b"
    return found, refused


@dataclass(frozen=True)
class DbSource:
    """A session in Hermes' state.db: exported whole (every generation, see `statedb.full_history`)."""

    db: StateDB
    session_id: str

    @property
    def name(self) -> str:
        """`state.db#<id>`, the id as a file name holds it (`names.file_id`): one path component, no
        separator, NUL or line break from a hostile id in a manifest, an error line or a log."""
        return f"state.db#{shown_id(self.session_id)}"


Source = Path | DbSource


def db_sources(hermes_home: Path | None) -> tuple[list[tuple[str, DbSource]], list[FileProblem]]:
    """(key, source) of every session in `hermes_home/state.db`, when it is there and readable."""
    if hermes_home is None:
        return [], []
    db = StateDB(Path(hermes_home).expanduser() / "state.db")
    if not db.path.is_file():
        return [], []
    try:
        db.check_schema()
        return [(sid, DbSource(db, sid)) for sid in sorted(db.high_water_marks())], []
    except StateDBNotReadyError:
        return [], []  # a brand-new database: nothing in it yet
    except StateDBError as exc:
        return [], [FileProblem(file=str(db.path), reason=f"{exc}; the JSON snapshots are exported instead")]


def updated_at(session: Session, path: Path) -> datetime:
    for field in ("last_updated", "session_start"):
        stamp = (session.document or {}).get(field)
        if isinstance(stamp, str):
            with contextlib.suppress(ValueError):
                return aware(datetime.fromisoformat(stamp))
    try:
        return datetime.fromtimestamp(path.stat().st_mtime, UTC)
    except OSError:  # gone since it was read: it counts as recent
        return datetime.now(UTC)


def aware(when: datetime) -> datetime:
    """Naive times (Hermes writes local time without an offset) are taken as local time."""
    return when.astimezone() if when.tzinfo is None else when
