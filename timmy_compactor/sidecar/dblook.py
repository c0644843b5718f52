"""The sidecar's look at Hermes' state.db: readable (its sessions and their high-water marks) or
unavailable (why, and what to do), never mistaken for "every session deleted".

A Hermes upgrade changes the schema version, a long write holds a lock, a permission or a damaged
file stops the reads: the database is then *unavailable*, one warning line says why (once per outage,
for every process of the sidecar, through its records) and one info line when it can be read again.
While it is unavailable no view is removed or replaced (`work`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

from timmy_compactor.config import Config
from timmy_compactor.logs import get_logger
from timmy_compactor.sessions.source import StateDBError, StateDBNotReadyError
from timmy_compactor.sessions.sources import (
    STATE_DB,
    Picker,
    Places,
    StateDbSource,
)
from timmy_compactor.sidecar.records import Records

log = get_logger(__name__)

STATE_DB_BUSY_SECONDS = 5.0
"""How long a read of state.db waits for a writer's lock before the database counts as unavailable."""


@dataclass(frozen=True, kw_only=True)
class DbLook:
    """What the sidecar sees of Hermes' state.db at one moment.

    `db` is set when it exists, can be read and has a schema we know; `marks` then holds each
    session's newest message row id. `unavailable` is set when it exists but cannot be read
    (unknown schema, a long lock, no permission, a damaged file, not yet created by Hermes): its
    sessions are then unknown, not deleted, and no view is removed or replaced."""

    db: StateDbSource | None
    marks: dict[str, int]
    unavailable: StateDBError | None = None
    listed: bool = True  # False: `marks` were not read (a look at one session)


def places(config: Config) -> Places:
    return Places(sessions_dir=config.sessions_dir, hermes_home=config.hermes_home, busy_timeout=STATE_DB_BUSY_SECONDS)


def picker(config: Config, look: DbLook) -> Picker:
    """This home's session sources (`sessions.sources`), state.db as `look` saw it: not looked at again."""
    source: StateDbSource | None = None
    if look.db is not None:
        source = replace(look.db, marks=look.marks if look.listed else None)
    elif look.unavailable is not None:
        source = replace(StateDbSource.at(places(config)), unavailable=look.unavailable)
    return Picker.of(places(config), {STATE_DB: source})


_warned_unavailable: set[str] = set()
_AVAILABILITY = "state_db"


def look_at_state_db(
    config: Config, records: Records | None = None, *, marks: bool = True, quiet: bool = False
) -> DbLook:
    """Read state.db's schema version and (with `marks`) every session's high-water mark.

    With `records`, one warning line is logged when the database becomes unavailable (its cause and
    what to do; shared by every process through the records) and one info line when it can be read
    again; without, one warning per process and cause. `quiet`: no line at all (`status` shows it).
    An absent database is neither: snapshots only, nothing to say."""
    db = StateDbSource.at(places(config))
    if not db.path.exists():
        return DbLook(db=None, marks={})
    try:
        db.check()
        found = db.read_marks() if marks else {}
    except StateDBNotReadyError as exc:  # Hermes is creating it: nothing to read yet, nothing to say
        log.debug("state_db_not_ready", error=str(exc))
        return DbLook(db=None, marks={}, unavailable=exc)
    except StateDBError as exc:
        if not quiet:
            _note_availability(records, exc)
        return DbLook(db=None, marks={}, unavailable=exc)
    if not quiet:
        _note_availability(records, None)
    return DbLook(db=db, marks=found, listed=marks)


def _note_availability(records: Records | None, error: StateDBError | None) -> None:
    if records is None:
        if error is not None and f"{error.cause}:{error}" not in _warned_unavailable:
            _warned_unavailable.add(f"{error.cause}:{error}")
            _warn_unavailable(error)
        return
    # one line per outage (and per change of its cause), however many processes see it at once
    if error is None:
        was = records.note_unless(_AVAILABILITY, {"cause": None}, lambda noted: not (noted or {}).get("cause"))
        if was is not None:
            log.info("state_db_available_again", was=was.get("cause"))
        return
    value = {"cause": error.cause, "error": str(error), "since": time.time()}
    if records.note_unless(_AVAILABILITY, value, lambda noted: (noted or {}).get("cause") == error.cause) is not None:
        _warn_unavailable(error)


def _warn_unavailable(error: StateDBError) -> None:
    log.warning(
        "state_db_unavailable",
        cause=error.cause,
        error=str(error),
        hint=f"{error.hint}; views are kept and the next readable sweep catches up",
    )
