"""Where sessions come from: the registry of sources (SOURCES) and THE rule that picks between them.

The interface is `source` (SessionSource, SessionRef, the errors); each source is a module of its own
(`snapshots`, `dbsource`). The sources are registered once, in precedence order (`SOURCES`); when two
hold the same key the first wins — state.db over the snapshot, which Hermes freezes after a
compression, and snapshots only when there is no database. A source that is there but cannot be read
now (state.db locked, upgraded, damaged) is *unavailable* (`Picked.unavailable`): its sessions are
unknown, never deleted, and the others are picked as if it were absent.

Adding a source is one class (in a module of its own) and one line in `SOURCES`.
Nothing here knows of the sidecar (records, queues) or of the export (manifests).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from timmy_compactor.errors import TimmyError
from timmy_compactor.sessions.dbsource import STATE_DB, StateDbSource, key_of
from timmy_compactor.sessions.files import Session
from timmy_compactor.sessions.snapshots import SNAPSHOT, SessionsDirUnreadableError, SnapshotSource
from timmy_compactor.sessions.source import (
    Listing,
    Places,
    SessionRef,
    SessionSource,
    SourceUnavailableError,
    Watched,
)

__all__ = [  # the interface and the sources, for the callers that pick
    "SNAPSHOT",
    "SOURCES",
    "STATE_DB",
    "Listing",
    "Picked",
    "Picker",
    "Places",
    "SessionRef",
    "SessionSource",
    "SessionsDirUnreadableError",
    "SnapshotSource",
    "SourceUnavailableError",
    "StateDbSource",
    "Watched",
    "key_of",
    "open_sources",
    "watched",
]

SOURCES: list[type[SessionSource]] = [StateDbSource, SnapshotSource]
"""Every kind of session source, in precedence order: when two hold a session, the first wins."""


def watched(places: Places) -> list[Watched]:
    """What the watcher watches for this home's sources, in precedence order."""
    return [one for kind in SOURCES for one in kind.watched(places)]


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
    listed: frozenset[str] = frozenset()  # the sources asked (readable or not)

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
        listed = frozenset(s.name for s in self.sources if upto is None or _rank(s.name) <= _rank(upto))
        return Picked(tuple(sessions), unavailable, tuple(refused), frozenset(taken), listed)

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
