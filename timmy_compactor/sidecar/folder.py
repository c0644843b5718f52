"""The sessions folder as the sidecar lists it: which files are raw sessions, which paths it refuses,
and one clear error (never a traceback) when the folder cannot be read."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from timmy_compactor.errors import TimmyError
from timmy_compactor.logs import get_logger
from timmy_compactor.sessions.names import is_session_name

log = get_logger(__name__)


class RefusedPathError(TimmyError, ValueError):
    """A path the sidecar will not touch (outside the sessions dir, not a session file...)."""


class SessionsDirUnreadableError(TimmyError, PermissionError):
    """The sessions folder exists but cannot be listed (no read or search permission): its snapshot
    files are unknown, not deleted. `str()` names the folder and what to do."""

    def __init__(self, sessions_dir: Path, reason: str) -> None:
        self.sessions_dir, self.reason = sessions_dir, reason
        self.hint = f"give the sidecar's user read and search permission on it (chmod u+rx {sessions_dir})"
        super().__init__(f"{sessions_dir}: the sessions folder cannot be read ({reason}); {self.hint}")


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
    real = candidate.resolve()
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
    """Raw session files directly in `sessions_dir` (views, temp files and symlinks out excluded).
    SessionsDirUnreadableError when the folder cannot be listed."""
    found = []
    base = sessions_dir.expanduser().resolve()  # once: a regular file listed in it is base/name already
    for entry in list_sessions_dir(base):
        if not is_session_name(entry.name):
            continue
        with contextlib.suppress(RefusedPathError, OSError):
            if not entry.is_symlink():
                if entry.is_file(follow_symlinks=False):
                    found.append(base / entry.name)
            elif Path(entry.path).is_file():  # a symlink: where it leads must be a session here too
                found.append(resolve_session_path(entry.path, sessions_dir))
    return sorted(set(found))
