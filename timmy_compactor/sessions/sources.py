"""Where sessions come from: one small interface, its sources, and the one rule that picks between them.

A **source** lists its sessions, each with a cheap mark that changes whenever the session does (a
snapshot's `(mtime_ns, size)`, a state.db session's high-water mark: "changed since"); finds one
session by its key without listing the others (one change, one look); and reads one session: its
live context (what the compactor compacts), its whole history (what `show --history` numbers) and
the bytes the export hashes and parses.

A session's **key** is its file id (`names.file_id`): the `<id>` its snapshot and its view carry,
the one name two sources agree on. The sources are registered once, in precedence order
(`SOURCES`); when two hold the same key the first wins — state.db over the snapshot, which Hermes
freezes after a compression, and snapshots only when there is no database. A source that is there
but cannot be read now (state.db locked, upgraded, damaged) is *unavailable* (`Picked.unavailable`):
its sessions are unknown, never deleted, and the others are picked as if it were absent.

Adding a source is one class here (or in a module of its own) and one line in `SOURCES`.
Nothing here knows of the sidecar (records, queues) or of the export (manifests).
"""

from __future__ import annotations

import os
import re
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from stat import S_ISREG
from typing import ClassVar, Protocol

import orjson

from timmy_compactor.errors import TimmyError
from timmy_compactor.sessions.files import Session, read_session
from timmy_compactor.sessions.names import (
    SESSION_PREFIX,
    SESSION_SUFFIX,
    UnsafeIdError,
    file_id,
    is_session_name,
    session_id_of,
    shown_id,
)
from timmy_compactor.sessions.statedb import StateDB, StateDBError, db_session, snapshot_path

STATE_DB = "state.db"
SNAPSHOT = "file"  # a Session's `source` for a snapshot, and its provenance's


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


class SessionsDirUnreadableError(TimmyError, PermissionError):
    """The sessions folder exists but cannot be listed (no read or search permission): its snapshot
    files are unknown, not deleted. `str()` names the folder and what to do."""

    def __init__(self, sessions_dir: Path, reason: str) -> None:
        self.sessions_dir, self.reason = sessions_dir, reason
        self.hint = f"give the sidecar's user read and search permission on it (chmod u+rx {sessions_dir})"
        super().__init__(f"{sessions_dir}: the sessions folder cannot be read ({reason}); {self.hint}")


@dataclass(frozen=True)
class Listing:
    """What a source holds: its sessions, and the entries it refused (path or name, and why)."""

    refs: tuple[SessionRef, ...]
    refused: tuple[tuple[str, str], ...] = ()


class SessionSource(Protocol):
    name: ClassVar[str]

    @classmethod
    def open(cls, places: Places) -> SessionSource | None:
        """The source of this home, or None when it has none (no state.db)."""

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


def read_snapshot_bytes(path: Path) -> bytes:
    """The one place a snapshot's bytes are read for the export (tests hook it to prove what is read).
    O_NOFOLLOW: a session replaced by a symlink after the listing is not followed."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as handle:
        return handle.read()


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
            refs.append(_snapshot_ref(key, path, (stat.st_mtime_ns, stat.st_size)))
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
        return _snapshot_ref(key, path, (stat.st_mtime_ns, stat.st_size)) if S_ISREG(stat.st_mode) else None

    def read(self, ref: SessionRef) -> Session:
        assert ref.path is not None
        return read_session(ref.path)

    def history(self, ref: SessionRef) -> Session:
        return self.read(ref)

    def raw(self, ref: SessionRef) -> bytes:
        assert ref.path is not None
        return read_snapshot_bytes(ref.path)


def _snapshot_ref(key: str, path: Path, mark: tuple[int, int]) -> SessionRef:
    return SessionRef(source=SNAPSHOT, session_id=key, key=key, mark=mark, path=path)


def _symlink_reason(path: Path, base: Path) -> str:
    real = path.resolve()
    if real.parent == base and is_session_name(real.name) and real.is_file():
        return f"symlink to {real.name}, which is exported under its own name; skipped"
    return f"symlink to {real}, which is not a raw session in {base}; refused (copy the file in instead)"


_HASHED_ID = re.compile(r"_[0-9a-f]{12}\Z")


@dataclass
class StateDbSource:
    """Hermes' state.db (read-only): every session with rows, its mark the newest row's id.

    `marks` (each session's high-water mark, when the caller already read them) spares a listing;
    `unavailable` (why it cannot be read, when the caller already knows) makes every call say so."""

    name: ClassVar[str] = STATE_DB
    db: StateDB
    sessions_dir: Path
    marks: Mapping[str, int] | None = None
    unavailable: StateDBError | None = None
    checked: bool = False  # its schema is known to be one we read (the caller checked it)

    @classmethod
    def open(cls, places: Places) -> StateDbSource | None:
        if places.hermes_home is None:
            return None
        db = StateDB(Path(places.hermes_home).expanduser() / "state.db", timeout=places.busy_timeout)
        return cls(db, Path(places.sessions_dir).expanduser()) if db.path.is_file() else None

    def _usable(self) -> StateDB:
        if self.unavailable is not None:
            raise SourceUnavailableError(self.name, self.unavailable)
        if not self.checked:
            try:
                self.db.check_schema()
            except StateDBError as exc:
                self.unavailable = exc
                raise SourceUnavailableError(self.name, exc) from None
            self.checked = True
        return self.db

    def listing(self) -> Listing:
        if self.marks is None:
            db = self._usable()
            try:
                self.marks = db.high_water_marks()
            except StateDBError as exc:
                raise SourceUnavailableError(self.name, exc) from None
        return Listing(tuple(self._ref(sid, mark) for sid, mark in sorted(self.marks.items())))

    def find(self, key: str) -> SessionRef | None:
        """One indexed query for an id that is its own file id; a name `file_id` made from another id
        (`…_<12 hex>`) is looked for among the ids of the sessions table, never by listing every
        session's messages."""
        if self.marks is not None:
            return next((r for r in self.listing().refs if r.key == key), None)
        db = self._usable()
        try:
            mark = db.high_water_mark(key)
            if mark is not None:
                return self._ref(key, mark) if _own_file_id(key) else None
            if not _HASHED_ID.search(key):
                return None
            for session_id in db.session_ids():
                if key_of(session_id) == key and (mark := db.high_water_mark(session_id)) is not None:
                    return self._ref(session_id, mark)
        except StateDBError as exc:
            raise SourceUnavailableError(self.name, exc) from None
        return None

    def _ref(self, session_id: str, mark: int) -> SessionRef:
        return SessionRef(source=STATE_DB, session_id=session_id, key=key_of(session_id), mark=mark)

    def read(self, ref: SessionRef) -> Session:
        """Its live rows, as the snapshot reader gives a session (tool schemas from its snapshot)."""
        return db_session(self.db, ref.session_id, snapshot_path(self.sessions_dir, ref.session_id))

    def history(self, ref: SessionRef) -> Session:
        full = self.db.full_history(ref.session_id)
        return replace(self.read(ref), messages=full.messages)

    def raw(self, ref: SessionRef) -> bytes:
        return orjson.dumps(self.db.full_history(ref.session_id).document())


def key_of(session_id: str) -> str | None:
    """A session's key (its file id), or None for an id no file can be named after."""
    try:
        return file_id(session_id)
    except UnsafeIdError:
        return None


def _own_file_id(session_id: str) -> bool:
    return key_of(session_id) == session_id


SOURCES: list[type[SessionSource]] = [StateDbSource, SnapshotSource]
"""Every kind of session source, in precedence order: when two hold a session, the first wins."""


def open_sources(places: Places, given: Mapping[str, SessionSource | None] | None = None) -> list[SessionSource]:
    """This home's sources, in precedence order. `given`: sources the caller has already opened (by
    name; None: the caller knows there is none), used instead of opening them again."""
    given = given or {}
    opened = [given[kind.name] if kind.name in given else kind.open(places) for kind in SOURCES]
    return [source for source in opened if source is not None]


@dataclass(frozen=True)
class Picked:
    """Every session of a home, once, from the source that wins it."""

    sessions: tuple[SessionRef, ...]
    unavailable: Mapping[str, TimmyError]  # source name → why it cannot be read now (its sessions: unknown)
    refused: tuple[tuple[str, str], ...] = ()  # entries a source refused (path or name, why)
    known: frozenset[str] = frozenset()  # the keys any readable source holds, won or not

    def of(self, source: str) -> list[SessionRef]:
        return [ref for ref in self.sessions if ref.source == source]

    def keys_of(self, source: str) -> set[str]:
        return {ref.key for ref in self.sessions if ref.source == source and ref.key is not None}


def _rank(name: str) -> int:
    order = [kind.name for kind in SOURCES]
    return order.index(name) if name in order else len(order)


class Picker:
    """THE rule between sources: a session (its key) belongs to the first source holding it."""

    def __init__(self, sources: Sequence[SessionSource]) -> None:
        self.sources = list(sources)

    @classmethod
    def of(cls, places: Places, given: Mapping[str, SessionSource | None] | None = None) -> Picker:
        return cls(open_sources(places, given))

    def source(self, name: str) -> SessionSource | None:
        return next((s for s in self.sources if s.name == name), None)

    def pick(self, upto: str | None = None) -> Picked:
        """Every session, once. `upto`: only the sources up to this one (what it wins, without listing
        the sources it wins over: a commit to state.db lists no sessions folder)."""
        sessions: list[SessionRef] = []
        unavailable: dict[str, TimmyError] = {}
        refused: list[tuple[str, str]] = []
        taken: set[str] = set()
        for source in self.sources:
            if upto is not None and _rank(source.name) > _rank(upto):
                continue
            try:
                listing = source.listing()
            except SourceUnavailableError as exc:
                unavailable[source.name] = exc.error
                continue
            refused.extend(listing.refused)
            for ref in listing.refs:
                if ref.key is None or ref.key not in taken:  # an id no file names: no other source holds it
                    sessions.append(ref)
                if ref.key is not None:
                    taken.add(ref.key)
        return Picked(tuple(sessions), unavailable, tuple(refused), frozenset(taken))

    def find(self, key: str) -> tuple[SessionRef | None, Mapping[str, TimmyError]]:
        """The winning source's session of this key (None: no readable source holds it), and the
        sources that could not be asked."""
        unavailable: dict[str, TimmyError] = {}
        for source in self.sources:
            try:
                ref = source.find(key)
            except SourceUnavailableError as exc:
                unavailable[source.name] = exc.error
                continue
            if ref is not None:
                return ref, unavailable
        return None, unavailable

    def read(self, ref: SessionRef) -> Session:
        return self._of(ref).read(ref)

    def history(self, ref: SessionRef) -> Session:
        return self._of(ref).history(ref)

    def raw(self, ref: SessionRef) -> bytes:
        return self._of(ref).raw(ref)

    def _of(self, ref: SessionRef) -> SessionSource:
        source = self.source(ref.source)
        if source is None:
            raise KeyError(ref.source)
        return source
