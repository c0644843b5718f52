"""The sessions folder as the sidecar lists it: which files are raw sessions, which paths it refuses,
and one clear error (never a traceback) when the folder cannot be read."""

from __future__ import annotations

import os
from pathlib import Path

from timmy_compactor.errors import TimmyError
from timmy_compactor.logs import get_logger
from timmy_compactor.sessions.names import is_session_name
from timmy_compactor.sessions.sources import SessionsDirUnreadableError, SnapshotSource, SourceUnavailableError

log = get_logger(__name__)

__all__ = [  # SessionsDirUnreadableError lives with the snapshot source (`sessions.sources`)
    "RefusedPathError",
    "SessionsDirUnreadableError",
    "list_sessions_dir",
    "resolve_session_path",
    "session_files",
    "warn_sessions_dir_unreadable",
]


class RefusedPathError(TimmyError, ValueError):
    """A path the sidecar will not touch (outside the sessions dir, not a session file...)."""


def list_sessions_dir(sessions_dir: Path) -> list[os.DirEntry[str]]:
    """The entries of the sessions folder ([] when it does not exist yet), or
    SessionsDirUnreadableError naming it when it cannot be read."""
    try:
        with os.scandir(sessions_dir) as entries:
            return list(entries)
    except (FileNotFoundError, NotADirectoryError):
        return []
    except OSError as exc:  # no permission: one line naming the folder
        raise SessionsDirUnreadableError(sessions_dir, exc.strerror or type(exc).__name__) from None


def resolve_session_path(path: str | Path, sessions_dir: Path) -> Path:
    """The real path of a raw session inside `sessions_dir`, or RefusedPathError with the reason."""
    candidate = Path(path).expanduser()
    if not candidate.is_absolute():
        candidate = sessions_dir / candidate
    if not is_session_name(candidate.name):
        raise RefusedPathError(f"{candidate}: not a session file (expected session_<id>.json)")
    base = sessions_dir.expanduser().resolve()
    try:
        real = candidate.resolve()
    except (RuntimeError, OSError):  # Python 3.11 raises RuntimeError for a loop
        raise RefusedPathError(f"{candidate}: a symlink that never ends (a loop) or cannot be followed") from None
    if real.parent != base:
        raise RefusedPathError(f"{candidate}: resolves to {real}, outside the sessions directory {base}")
    if not is_session_name(real.name):
        raise RefusedPathError(f"{candidate}: points at {real.name}, which is not a session file")
    return real


def warn_sessions_dir_unreadable(exc: SessionsDirUnreadableError) -> None:
    """The one warning line for a sessions folder that cannot be listed (no traceback)."""
    log.warning(
        "sessions_dir_unreadable",
        sessions_dir=str(exc.sessions_dir),
        error=exc.reason,
        hint=f"{exc.hint}; its views are kept and state.db sessions are still compacted",
    )


def session_files(sessions_dir: Path) -> list[Path]:
    """Raw session files directly in `sessions_dir`: the snapshot source's listing (`sessions.sources`:
    views, temp files and symlinks out; a symlink to a session here is that session, listed itself).
    SessionsDirUnreadableError when the folder cannot be listed."""
    try:
        listing = SnapshotSource(sessions_dir).listing()
    except SourceUnavailableError as exc:
        raise exc.error from None
    return sorted(r.path for r in listing.refs if r.path is not None)
