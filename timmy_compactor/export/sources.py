"""What the export reads: the raw snapshots in the sessions dir and the sessions in Hermes' state.db,
as the session sources give them (`sessions.sources`).

Never a view: views are not `session_<id>.json`, and nothing here reads one.
"""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime
from pathlib import Path

from timmy_compactor.export.summary import ExportError, FileProblem
from timmy_compactor.sessions.files import Session
from timmy_compactor.sessions.source import StateDBNotReadyError
from timmy_compactor.sessions.sources import SNAPSHOT, STATE_DB, Picker, Places, SessionRef


def sessions_to_export(
    sessions_dir: Path, hermes_home: Path | None
) -> tuple[Picker, list[tuple[str, SessionRef]], list[FileProblem]]:
    """(key, session) of every session to export, sorted by key, from the source the picker gives it
    to (`sessions.sources`: a session in state.db is exported from there, whole across Hermes'
    compressions, and its snapshot left out), and the entries refused.

    Snapshots: symlinks are never followed: one that leaves the directory (or points at a view or any
    other file) is refused, one to a raw session here is skipped (that file is read itself). A
    state.db that cannot be read is reported, and the snapshots are exported instead; a brand-new one
    holds nothing yet. The key is the session's id (a snapshot's: the `<id>` of its file name)."""
    places = Places(sessions_dir=Path(sessions_dir), hermes_home=Path(hermes_home) if hermes_home else None)
    picker = Picker.of(places)
    picked = picker.pick()
    unreadable = picked.unavailable.get(SNAPSHOT)
    if unreadable is not None:  # nothing is exported: not a failure to write the export
        raise ExportError(
            sessions_dir,
            f"cannot read the sessions folder ({getattr(unreadable, 'reason', unreadable)}); give this user read "
            f"and search permission on it (chmod u+rx {sessions_dir}); nothing was exported and the "
            "previous export is unchanged",
        )
    refused = [FileProblem(file=name, reason=reason) for name, reason in picked.refused]
    error = picked.unavailable.get(STATE_DB)
    if error is not None and not isinstance(error, StateDBNotReadyError):
        db = Path(hermes_home or ".").expanduser() / "state.db"
        refused.append(FileProblem(file=str(db), reason=f"{error}; the JSON snapshots are exported instead"))
    found = sorted(((ref.session_id, ref) for ref in picked.sessions), key=lambda item: item[0])
    return picker, found, refused


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
