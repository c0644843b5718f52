"""The snapshot source: the `session_<id>.json` files Hermes writes into the sessions folder."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from stat import S_ISREG
from typing import ClassVar

from timmy_compactor.errors import TimmyError
from timmy_compactor.sessions.files import Session, read_regular, read_session
from timmy_compactor.sessions.names import SESSION_PREFIX, SESSION_SUFFIX, is_session_name, session_id_of
from timmy_compactor.sessions.source import Listing, Places, SessionRef, SourceUnavailableError, Watched

SNAPSHOT = "file"  # a Session's `source` for a snapshot, and its provenance's


class SessionsDirUnreadableError(TimmyError, PermissionError):
    """The sessions folder exists but cannot be listed (no read or search permission): its snapshot
    files are unknown, not deleted. `str()` names the folder and what to do."""

    def __init__(self, sessions_dir: Path, reason: str) -> None:
        self.sessions_dir, self.reason = sessions_dir, reason
        self.hint = f"give the sidecar's user read and search permission on it (chmod u+rx {sessions_dir})"
        super().__init__(f"{sessions_dir}: the sessions folder cannot be read ({reason}); {self.hint}")


def read_snapshot_bytes(path: Path) -> bytes:
    """The one place a snapshot's bytes are read for the export (tests hook it to prove what is read).
    Not followed if it became a symlink after the listing, and read only if still a regular file."""
    return read_regular(path, follow=False)


@dataclass
class SnapshotSource:
    """The `session_<id>.json` files Hermes writes into the sessions folder (opt-in since 0.19).

    Only regular files directly in the folder: a symlink is refused (one that leaves the folder, or
    points at a view) or skipped (one to a raw session here: that file is listed itself)."""

    name: ClassVar[str] = SNAPSHOT
    sessions_dir: Path

    @classmethod
    def open(cls, places: Places) -> SnapshotSource:
        return cls(Path(places.sessions_dir).expanduser())

    @classmethod
    def watched(cls, places: Places) -> list[Watched]:
        """The sessions folder: a session is written, replaced (Hermes renames its temp file onto it) or deleted."""
        folder = Path(places.sessions_dir).expanduser()
        return [Watched(source=cls.name, folder=folder, events=SNAPSHOT_EVENTS, key_of=_key_of_name, is_home=True)]

    def listing(self) -> Listing:
        if not self.sessions_dir.is_dir():
            return Listing(())
        base = self.sessions_dir.resolve()
        refs: list[SessionRef] = []
        refused: list[tuple[str, str]] = []
        try:
            with os.scandir(base) as entries:
                listed = sorted((entry.name, entry) for entry in entries if is_session_name(entry.name))
        except (FileNotFoundError, NotADirectoryError):
            return Listing(())
        except OSError as exc:  # no permission: unavailable (its snapshots unknown, not deleted)
            error = SessionsDirUnreadableError(self.sessions_dir, exc.strerror or type(exc).__name__)
            raise SourceUnavailableError(self.name, error) from None
        for name, entry in listed:
            path = base / name
            try:
                if entry.is_symlink():
                    refused.append((str(path), _symlink_reason(path, base)))
                    continue
                if not entry.is_file():
                    refused.append((str(path), "not a regular file; refused"))
                    continue
                stat = entry.stat()
            except OSError:  # gone since the folder was listed
                continue
            key = session_id_of(name)
            refs.append(_snapshot_ref(key, path, stat))
        return Listing(tuple(refs), tuple(refused))

    def find(self, key: str) -> SessionRef | None:
        name = f"{SESSION_PREFIX}{key}{SESSION_SUFFIX}"
        if not is_session_name(name) or "/" in key or "\x00" in key or os.sep in key:
            return None
        path = self.sessions_dir.expanduser() / name
        try:
            stat = path.lstat()  # as the listing: a symlink is not a snapshot of its own
        except (OSError, ValueError):
            return None
        return _snapshot_ref(key, path, stat) if S_ISREG(stat.st_mode) else None

    def read(self, ref: SessionRef) -> Session:
        assert ref.path is not None
        return read_session(ref.path)

    def history(self, ref: SessionRef) -> Session:
        return self.read(ref)

    def raw(self, ref: SessionRef) -> bytes:
        assert ref.path is not None
        return read_snapshot_bytes(ref.path)


SNAPSHOT_EVENTS = frozenset({"created", "modified", "closed", "moved", "deleted"})


def _key_of_name(name: str) -> str | None:
    return session_id_of(name) if is_session_name(name) else None


def _snapshot_ref(key: str, path: Path, stat: os.stat_result) -> SessionRef:
    mark = (stat.st_mtime_ns, stat.st_size)
    return SessionRef(source=SNAPSHOT, session_id=key, key=key, mark=mark, path=path, written_at=stat.st_mtime)


def _symlink_reason(path: Path, base: Path) -> str:
    try:
        real = path.resolve()
    except (RuntimeError, OSError):  # Python 3.11 raises RuntimeError for a loop
        return "symlink that never ends (a loop) or cannot be followed; refused"
    if real.parent == base and is_session_name(real.name) and real.is_file():
        return f"symlink to {real.name}, which is exported under its own name; skipped"
    return f"symlink to {real}, which is not a raw session in {base}; refused (copy the file in instead)"
