"""The imperative shell around the pure core: file → session → compact → verify → view.

Used by the CLI and by the Huey task alike. Timing, hashing and writing happen here; the
decision what the view holds happens in `timmy_compactor.core`.
"""

from __future__ import annotations

import dataclasses
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from timmy_compactor import ENGINE_VERSION
from timmy_compactor.config import Config, make_counter
from timmy_compactor.core.accounting import Accounting
from timmy_compactor.core.readings import Readings
from timmy_compactor.core.tokens import TextCounter, pressure_level, request_tokens
from timmy_compactor.core.types import Report, Result, Settings, not_messages
from timmy_compactor.host.tools import request_extras
from timmy_compactor.sessions.files import Session, SessionError, read_provenance, read_session, remove_view, write_view
from timmy_compactor.sessions.names import (
    UnsafeIdError,
    file_id,
    is_view_name,
    raw_path_of,
    session_id_of,
    shown_id,
    snapshot_path,
    view_key,
    view_path_for,
)
from timmy_compactor.sessions.source import StateDBError, UnusableSessionError
from timmy_compactor.sessions.sources import SNAPSHOT, STATE_DB, Picker, Places, SourceUnavailableError, key_of

Action = Literal["written", "unchanged", "below_threshold", "removed_stale", "failed", "printed", "nothing_to_cut"]


@dataclass(frozen=True, kw_only=True)
class Outcome:
    path: Path
    action: Action
    report: Report | None = None
    view_path: Path | None = None
    elapsed_ms: float = 0.0
    reason: str | None = None

    def as_dict(self) -> dict[str, Any]:
        base: dict[str, Any] = {"path": str(self.path), "action": self.action}
        if self.report is not None:
            base |= self.report.as_dict()
        else:  # "unchanged": its view is current, and a view is written only verified
            base |= dict.fromkeys(("triggered", "verified"), self.action == "unchanged")
        base |= {
            "view": str(self.view_path) if self.view_path else None,
            "elapsed_ms": round(self.elapsed_ms, 3),
            "reason": self.reason,
        }
        return base


def view_meta(config: Config, tool_schema_tokens: int) -> dict[str, Any]:
    """What a view records of how it was made; `view_is_current` compares all of it."""
    return {
        "engine_version": ENGINE_VERSION,
        "config_fingerprint": config.fingerprint(),
        "tool_schema_tokens": tool_schema_tokens,
    }


def tool_schema_tokens(
    session_tools: list[Any] | None, source: str, config: Config, platform: str | None = None
) -> int:
    """Tokens of the tool schemas a request for this session carries: its own (a snapshot records
    them), or for a state.db session those of Hermes' enabled toolsets (or the estimate). A change
    of enabled toolsets changes this, and with it whether a view is current."""
    tools, fixed = request_extras(session_tools, source, config.hermes_home, platform)
    return request_tokens([], None, tools, make_counter(config)) + fixed


@dataclass(frozen=True, kw_only=True)
class Prepared:
    """What compacting or measuring a session needs besides its messages, worked out once per
    compaction: the settings for its model's window, the token counter, and what its request carries
    besides messages and system prompt (a state.db session records no tool schemas; Hermes sends them)."""

    settings: Settings
    counter: TextCounter | None
    tools: list[Any] | None
    fixed_tokens: int  # tokens known only as an estimate

    @property
    def tool_schema_tokens(self) -> int:
        """`tool_schema_tokens` of the session (what a view records and `view_is_current` compares)."""
        return request_tokens([], None, self.tools, self.counter) + self.fixed_tokens


def prepare(session: Session, config: Config) -> Prepared:
    tools, fixed = request_extras(session.tools, session.source, config.hermes_home, session.platform)
    return Prepared(
        settings=config.settings_for(session.model, session.base_url),
        counter=make_counter(config),
        tools=tools,
        fixed_tokens=fixed,
    )


@dataclass(frozen=True, kw_only=True)
class Usage:
    """How full a session's context is: the one place usage and the threshold are computed."""

    tokens: int
    context_window: int
    trigger_threshold: float

    @property
    def usage(self) -> float:
        return self.tokens / self.context_window

    @property
    def above_threshold(self) -> bool:
        return self.usage >= self.trigger_threshold

    @property
    def pressure_level(self) -> int:
        return pressure_level(self.usage)


def measure(session: Session, config: Config, prepared: Prepared | None = None) -> Usage:
    """The request tokens of `session` against its model's window and the trigger threshold."""
    p = prepared or prepare(session, config)
    tokens = request_tokens(session.messages, session.system_prompt, p.tools, p.counter) + p.fixed_tokens
    return Usage(
        tokens=tokens, context_window=p.settings.context_window, trigger_threshold=p.settings.trigger_threshold
    )


def compact_session(
    session: Session, config: Config, *, force: bool = False, prepared: Prepared | None = None
) -> tuple[Result, float]:
    """Run the engine on a parsed session; returns the result and the elapsed milliseconds."""
    p = prepared or prepare(session, config)
    start = time.perf_counter()
    request: dict[str, Any] = {  # what the request carries besides the messages; the sizes read here, once
        "system_prompt": session.system_prompt,
        "tools": p.tools,
        "force": force,
        "counter": p.counter,
        "fixed_tokens": p.fixed_tokens,
        "readings": Readings(),
    }
    accounting = Accounting.start(session.messages, p.settings, **request)
    if not accounting.triggered:  # compiling the rules' patterns costs more than a small session's command
        return accounting.unchanged(verified=True), (time.perf_counter() - start) * 1000
    from timmy_compactor.core.pipeline import compact

    result = compact(session.messages, p.settings, **request)
    return result, (time.perf_counter() - start) * 1000


def view_is_current(view: Path, session: Session, config: Config, tools_tokens: int | None = None) -> bool:
    """True when the existing view was made from these exact raw bytes with this config and tool
    schemas of this size (`tools_tokens`: `tool_schema_tokens` of the session, computed if None)."""
    try:
        _, meta = read_provenance(view)
    except (SessionError, OSError, ValueError):
        return False
    if tools_tokens is None:
        tools_tokens = tool_schema_tokens(session.tools, session.source, config, session.platform)
    return (
        meta.get("raw_sha256") == session.sha256
        and meta.get("config_fingerprint") == config.fingerprint()
        and meta.get("engine_version") == ENGINE_VERSION
        and meta.get("tool_schema_tokens") == tools_tokens
    )


def _view_owner(view: Path, session_id: str) -> str | None:
    """The state.db id an existing view was made from, if it is another id with the name of `session_id`
    (a hash collision: the later session is refused); None for a view any other (a stale one, a snapshot's)."""
    try:
        document, meta = read_provenance(view)
    except (SessionError, OSError, ValueError):
        return None
    owner = document.get("session_id") if isinstance(document, dict) and meta.get("source") == STATE_DB else None
    return owner if isinstance(owner, str) and key_of(owner) == key_of(session_id) else None


def read_compactable(raw: Path) -> Session:
    """Read a raw session for compaction; a message the engine cannot handle is bad input (SessionError).

    The engine itself fails closed on such a message (no view, reason reported); a command naming
    one file says so as a one-line error instead.
    """
    session = read_session(raw)
    problem = not_messages(session.messages)
    if problem:
        raise SessionError(raw, problem)
    return session


def compact_file(
    raw: Path,
    config: Config,
    *,
    force: bool = False,
    out: Path | None = None,
    skip_if_current: bool = False,
    remove_stale: bool = True,
) -> Outcome:
    """Compact one raw session file into its view. Raises SessionError for unusable input."""
    return compact_to_view(
        read_compactable(raw), config, force=force, out=out, skip_if_current=skip_if_current, remove_stale=remove_stale
    )


def compact_to_view(
    session: Session,
    config: Config,
    *,
    force: bool = False,
    out: Path | None = None,
    skip_if_current: bool = False,
    remove_stale: bool = True,
) -> Outcome:
    """Compact a parsed raw session and write, keep or remove its view."""
    raw = session.path
    target = out or view_path_for(raw)
    if out is None and session.source == STATE_DB and file_id(session.session_id) != session.session_id:
        _belongs(target, _view_owner(target, session.session_id), session.session_id)  # a hash collision: refused
    prepared = prepare(session, config)
    tools_tokens = prepared.tool_schema_tokens
    if skip_if_current and not force and view_is_current(target, session, config, tools_tokens):
        return Outcome(path=raw, action="unchanged", view_path=target)
    result, elapsed = compact_session(session, config, force=force, prepared=prepared)
    report = result.report
    if not report.triggered:
        removed = remove_stale and out is None and remove_view(target)
        return Outcome(
            path=raw,
            action="removed_stale" if removed else "below_threshold",
            report=report,
            elapsed_ms=elapsed,
        )
    if not report.verified:
        return Outcome(path=raw, action="failed", report=report, elapsed_ms=elapsed, reason=report.failure)
    if report.tokens_after >= report.tokens_before:  # a view as large as the raw would only cost disk
        if out is None:
            remove_view(target)
        reason = "nothing could be cut: " + (report.note or "every message is one the engine keeps whole")
        return Outcome(path=raw, action="nothing_to_cut", report=report, elapsed_ms=elapsed, reason=reason)
    write_view(session, result, view_meta(config, tools_tokens), target, redact=prepared.settings.redact_credentials)
    return Outcome(path=raw, action="written", report=report, view_path=target, elapsed_ms=elapsed, reason=report.note)


def restore_file(view: Path, config: Config) -> tuple[Any, Session]:
    """The raw document a view stands for, rebuilt from the raw file and checked by hash.

    A view made from Hermes' state.db is restored from `<sessions.hermes_home>/state.db`.
    """
    _document, meta = read_provenance(view)
    raw_name = meta.get("raw_file")
    if not isinstance(raw_name, str) or "/" in raw_name:
        raise SessionError(view, "provenance record names no raw file")
    raw_path = raw_path_of(view, raw_name)
    if meta.get("source") == STATE_DB:
        session = _read_from_state_db(view, _owner(view, _document, raw_path), config)
    else:
        session = read_session(raw_path)
    if session.sha256 != meta.get("raw_sha256"):
        raise SessionError(
            raw_path,
            "raw file changed since the view was made (sha256 mismatch); compact it again to get a matching view",
        )
    from timmy_compactor.core.types import restore

    messages = restore(meta.get("sources", []), session.messages)
    if session.shape == "array":
        return messages, session
    assert session.document is not None
    return {**session.document, "messages": messages}, session


def _places(config: Config) -> Places:
    return Places(sessions_dir=config.sessions_dir, hermes_home=config.hermes_home)


def _read_from_state_db(view: Path, session_id: str, config: Config) -> Session:
    """The live rows of the state.db session a view was made from, read through its session source."""
    source = Picker.of(_places(config)).source(STATE_DB)
    if source is None:
        raise SessionError(view, f"made from state.db, and there is no {config.hermes_home / 'state.db'}")
    try:
        ref = source.find(file_id(session_id))
        if ref is not None:
            _belongs(view, ref.session_id, session_id)
            return source.read(ref)
    except (SourceUnavailableError, StateDBError, UnsafeIdError) as exc:
        raise SessionError(view, f"cannot read its source in state.db: {exc}") from None
    raise SessionError(view, "its session is no longer in state.db (deleted in Hermes)")


def db_id_of(view_document: Any, raw_path: Path) -> str:
    """The state.db id of the session a view was made from: the `session_id` its document carries
    (a file name holds only the id's file id, `names.file_id`), else the one in the raw file's name."""
    if isinstance(view_document, dict) and isinstance(view_document.get("session_id"), str):
        return str(view_document["session_id"])
    return session_id_of(raw_path)


def _owner(view: Path, document: Any, raw_path: Path) -> str:
    """The state.db id a view's provenance records, checked to be the id the view's name stands for
    (`names.file_id`): a view never answers for another session (SessionError, one line)."""
    session_id = db_id_of(document, raw_path)
    if key_of(session_id) != view_key(view.name):
        raise SessionError(
            view,
            f"its provenance names session {shown_id(session_id)}, not the one this name stands "
            "for; refusing (`timmy-compactor sweep --now` rebuilds the views)",
        )
    return session_id


def _belongs(path: Path, owner: str | None, asked: str | None) -> None:
    """Checks that `owner` (a session's id, or the id a view was made from) is the session asked for, not
    another one under the same name: SessionError (one line) otherwise."""
    if asked is not None and owner is not None and owner != asked:
        raise SessionError(path, f"belongs to session {shown_id(owner)}, not {shown_id(asked)}; refusing")


def recall_source(target: str, config: Config, *, history: bool = False, engine: bool = False) -> Session:
    """The raw messages whose indices a view's refs name: SESSION is a session id, a raw file or a
    view. Read from the raw store the view was made from (state.db or the snapshot), never a view.
    With `engine`, SESSION is a Hermes session id and the refs are the ones the `timmy` engine showed
    inside Hermes: its raw log for that session."""
    if engine:
        from timmy_compactor.sessions.rawstore import RawStore

        store = RawStore(config.engine_raw_dir)
        log = store.load(target)
        if log is None:
            raise SessionError(
                store.directory(target), "no raw log of the timmy engine for this session id (is the engine enabled?)"
            )
        return Session(
            path=store.directory(target),
            shape="object",
            document={"session_id": target},
            messages=log.messages,
            sha256="",
            source="timmy engine",
        )
    path = Path(target).expanduser()
    if path.exists() and is_view_name(path.name):
        document, meta = read_provenance(path)
        raw_name = meta.get("raw_file")
        if not isinstance(raw_name, str) or "/" in raw_name:
            raise SessionError(path, "provenance record names no raw file")
        from_db, raw = meta.get("source") == "state.db", raw_path_of(path, raw_name)
        asked = _owner(path, document, raw) if from_db else db_id_of(document, raw)
        return _read_recalled(raw, view_key(path.name), asked, config, from_db=from_db, history=history)
    if path.exists():
        return _read_recalled(path, session_id_of(path), None, config, from_db=False, history=history)
    try:
        path, key = snapshot_path(config.sessions_dir, target), file_id(target)
    except UnsafeIdError as exc:
        raise SessionError(Path(target[:200]), str(exc)) from None
    literal = config.sessions_dir / f"session_{target}.json"  # Hermes names a snapshot after an id it keeps plain
    if not path.exists() and re.fullmatch(r"[\w-]+", target) and literal.is_file():
        path = literal
    return _read_recalled(path, key, target, config, from_db=True, history=history)


def _read_recalled(
    path: Path, key: str | None, asked: str | None, config: Config, *, from_db: bool, history: bool
) -> Session:
    """The session of `key` from the source the picker gives it to (state.db wins over the snapshot);
    else the raw file itself. `asked`: the id it must be (named by id, or the id a view records), else
    one line refuses it. `from_db`: its view was made from state.db (or it was named by id)."""
    picker = Picker.of(_places(config))
    winner, unavailable = picker.find(key) if key else (None, {})
    why = unavailable.get(STATE_DB) or f"state.db holds no session {shown_id(asked or key)}"
    if winner is not None and winner.source != SNAPSHOT:
        try:  # history: every row Hermes ever had for the session, archived ones included, once each
            _belongs(path, winner.session_id, asked)
            session = picker.history(winner) if history else picker.read(winner)
            return dataclasses.replace(session, path=path)
        except UnusableSessionError as exc:  # its rows cannot be used: say so, not "not in state.db"
            raise SessionError(path, f"cannot be read from state.db: {exc.problem}") from None
        except StateDBError as exc:
            why = str(exc)
    if from_db and not path.exists():
        raise SessionError(path, f"not in state.db and no snapshot ({why})") from None
    session = read_session(path)
    recorded = (session.document or {}).get("session_id")
    _belongs(path, recorded if isinstance(recorded, str) else None, asked)
    return session
