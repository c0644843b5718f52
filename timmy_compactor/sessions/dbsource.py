"""The state.db source: Hermes' canonical store, read through `statedb` (the one module that opens it)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import ClassVar

import orjson

from timmy_compactor.sessions.files import Session
from timmy_compactor.sessions.names import file_id, id_problem, snapshot_path
from timmy_compactor.sessions.source import (
    Listing,
    Places,
    SessionRef,
    SourceUnavailableError,
    StateDBError,
    Watched,
)
from timmy_compactor.sessions.statedb import StateDB, db_session

STATE_DB = "state.db"
STATE_DB_FILES = frozenset({"state.db", "state.db-wal"})

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
    _platforms: dict[str, str | None] | None = None  # each session's, read once

    @classmethod
    def open(cls, places: Places) -> StateDbSource | None:
        if places.hermes_home is None:
            return None
        source = cls.at(places)
        return source if source.path.is_file() else None

    @classmethod
    def watched(cls, places: Places) -> list[Watched]:
        """state.db and its WAL in Hermes' home: a commit writes one of them (a sweep of state.db finds
        which sessions it moved). Only a write modifies them; our own read-only opens create, open and
        close the WAL and shm files (sqlite opens them read-write): reacting to those would make every
        sweep trigger the next one."""
        if places.hermes_home is None:
            return []
        home = Path(places.hermes_home).expanduser()
        return [Watched(source=cls.name, folder=home, events=frozenset({"modified"}), names=STATE_DB_FILES)]

    @classmethod
    def at(cls, places: Places) -> StateDbSource:
        """This home's state.db, there or not (`open`: None when it is not)."""
        assert places.hermes_home is not None
        db = StateDB(Path(places.hermes_home).expanduser() / "state.db", timeout=places.busy_timeout)
        return cls(db, Path(places.sessions_dir).expanduser())

    @property
    def path(self) -> Path:
        return self.db.path

    def check(self) -> None:
        """Raises StateDBError (StateDBNotReadyError: Hermes is creating it) unless its schema is one we read."""
        self.db.check_schema()
        self.checked = True

    def read_marks(self) -> dict[str, int]:
        """Every session's high-water mark, read now (StateDBError)."""
        return self.db.high_water_marks()

    def mark(self, session_id: str) -> int | None:
        """One session's high-water mark (None: no rows), read now (StateDBError)."""
        return self.db.high_water_mark(session_id)

    def platforms(self) -> dict[str, str | None]:
        """Each session's platform (cli, telegram, …: it decides the toolsets Hermes sends)."""
        return self.db.platforms()

    def live(self, session_id: str) -> Session:
        """Its live rows, as the snapshot reader gives a session (tool schemas from its snapshot)."""
        return db_session(self.db, session_id, snapshot_path(self.sessions_dir, session_id))

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
            mark = db.high_water_mark(key) if _own_file_id(key) else None
            if mark is not None:
                return self._ref(key, mark)
            if not _HASHED_ID.search(key):
                return None
            for session_id in db.session_ids():
                if key_of(session_id) == key and (mark := db.high_water_mark(session_id)) is not None:
                    return self._ref(session_id, mark)
        except StateDBError as exc:
            raise SourceUnavailableError(self.name, exc) from None
        return None

    def _ref(self, session_id: str, mark: int) -> SessionRef:
        if self._platforms is None:
            try:
                self._platforms = self.db.platforms()
            except StateDBError as exc:
                raise SourceUnavailableError(self.name, exc) from None
        platform = self._platforms.get(session_id)
        key = key_of(session_id)
        return SessionRef(
            source=STATE_DB, session_id=session_id, key=key, mark=mark, platform=platform, host_tools=True
        )

    def read(self, ref: SessionRef) -> Session:
        return self.live(ref.session_id)

    def history(self, ref: SessionRef) -> Session:
        full = self.db.full_history(ref.session_id)
        return replace(self.read(ref), messages=full.messages)

    def raw(self, ref: SessionRef) -> bytes:
        return orjson.dumps(self.db.full_history(ref.session_id).document())


def key_of(session_id: str) -> str | None:
    """A session's key (its file id), or None for an id no file can be named after (`names.id_problem`)."""
    return None if id_problem(session_id) is not None else file_id(session_id)


def _own_file_id(session_id: str) -> bool:
    return key_of(session_id) == session_id
