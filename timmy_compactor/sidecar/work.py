"""What the sidecar's compaction task does, independent of Huey and of where a session comes from:
find the session of a key (the picker: one look, no listing), read it once from its source, write,
keep or remove its view, and record the outcome under (source, key, mark).

The sweeps that feed it are in `sidecar.sweep`. `sidecar.app` wires both to Huey; the watcher and the
CLI enqueue through it. Everything here logs through structlog and records its outcome in `Records`.
"""

from __future__ import annotations

import contextlib
import hashlib
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from timmy_compactor.atomic import file_lock, private_dir
from timmy_compactor.compactor import Action, compact_to_view, tool_schema_tokens
from timmy_compactor.config import Config
from timmy_compactor.errors import TimmyError
from timmy_compactor.logs import get_logger
from timmy_compactor.sessions.files import Session, SessionError, read_provenance, remove_view
from timmy_compactor.sessions.names import (
    OutsideFolderError,
    id_problem,
    session_id_of,
    shown_id,
    view_path,
)
from timmy_compactor.sessions.source import SessionRef, StateDBError, UnusableSessionError
from timmy_compactor.sessions.sources import Picker
from timmy_compactor.sidecar.dblook import look_at_state_db, picker
from timmy_compactor.sidecar.folder import RefusedPathError, resolve_session_path
from timmy_compactor.sidecar.outcomes import log_outcome, log_write_failed, one_line, unavailable_reason
from timmy_compactor.sidecar.records import SKIPPED_UNTIL_CHANGED, WRITE_FAILED, Record, Records, mark_text, recording

log = get_logger(__name__)

RECENT_WRITE_SECONDS = 5.0
"""A session changed this recently may still be being written: bad JSON is retried, not reported."""


class StillWritingError(TimmyError, RuntimeError):
    """The session looks half-written; the task is retried with backoff."""


@contextlib.contextmanager
def session_lock(state_dir: Path, key: str, timeout: float = 30.0) -> Iterator[None]:
    """An exclusive per-session lock (flock: released by the kernel if a worker dies)."""
    locks = state_dir / "locks"
    path = locks / f"{hashlib.sha256(key.encode()).hexdigest()[:24]}.lock"
    with contextlib.ExitStack() as stack:
        with recording(path):  # an unwritable state dir: one error naming the file, not a traceback
            private_dir(locks)
            held = stack.enter_context(file_lock(path, wait=timeout))
        if not held:
            raise TimeoutError(f"session lock for {key} held for over {timeout:.0f}s")
        yield


@contextlib.contextmanager
def view_lock(config: Config, view: Path) -> Iterator[None]:
    """The lock of the session whose view this is: no other sidecar worker writes the view meanwhile.
    (It lists nothing: what a killed writer left is removed by the sweeps, `remove_stale_temp_files`.)"""
    with session_lock(config.state_dir, str(view)):
        yield


TaskAction = Action | Literal["bad_input", "deferred", "refused", "gone", "known_bad", "write_failed"]
"""What a compaction task did: the compactor's actions, and the sidecar's own (the input is at fault,
its source is unavailable, the path is not ours, the session went, its input failed before, a full disk)."""


@dataclass(frozen=True, kw_only=True)
class TaskResult:
    path: str  # how the session is named: a snapshot's path, `<source>#<key>`, or the key asked for
    action: TaskAction
    reason: str | None = None
    report: dict[str, Any] | None = None


class InputMarks:
    """The mark of what goes into a session's view: its source's mark, and for a session that records
    no tool schemas the tokens of Hermes' enabled ones for its platform (read once per platform)."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self._tools: dict[tuple[str, str | None], int] = {}

    def __call__(self, ref: SessionRef) -> object:
        if not ref.host_tools:
            return ref.mark
        key = (ref.source, ref.platform)
        if key not in self._tools:
            self._tools[key] = tool_schema_tokens(None, ref.source, self.config, ref.platform)
        return [ref.mark, self._tools[key]]


def process_path(path: str | Path, config: Config, records: Records, *, final_attempt: bool = True) -> TaskResult:
    """The task body for a session named by its snapshot's path (the watcher's events, older tasks)."""
    try:
        raw = resolve_session_path(path, config.sessions_dir)
    except RefusedPathError as exc:
        log.warning("session_refused", path=str(path), reason=str(exc))
        return TaskResult(path=str(path), action="refused", reason=str(exc))
    if raw.exists() and not raw.is_file():  # a directory named session_x.json: one line, not "gone"
        reason = f"{raw}: not a regular file; refused"
        log.error("session_unreadable", path=str(raw), error=reason)
        return TaskResult(path=str(raw), action="refused", reason=reason)
    return process(session_id_of(raw), config, records, final_attempt=final_attempt)


def process(key: str, config: Config, records: Records, *, final_attempt: bool = True) -> TaskResult:
    """THE task body: the session of `key`, from the source the picker gives it to, into its view."""
    try:
        view = view_path(config.sessions_dir, key)
    except OutsideFolderError as exc:
        log.error("session_refused", session=shown_id(key), reason=str(exc))
        return TaskResult(path=key, action="refused", reason=str(exc))
    sources = picker(config, look_at_state_db(config, records, marks=False))  # one look, no listing
    ref, unavailable = sources.find(key)
    if ref is None:
        return _gone(key, view, records, unavailable)
    made_from = view_source(view)
    if made_from is not None and made_from != ref.source and made_from in unavailable:
        # its view was made from a source that cannot be read now: another source must not replace it
        reason = f"{unavailable_reason(made_from, unavailable[made_from])}; its view is kept"
        log.debug("session_deferred", session=ref.name, reason=reason)
        return TaskResult(path=ref.name, action="deferred", reason=reason)
    with view_lock(config, view):
        return _process_locked(ref, view, sources, config, records, final_attempt=final_attempt)


def _gone(key: str, view: Path, records: Records, unavailable: Mapping[str, TimmyError]) -> TaskResult:
    """No readable source holds the session: its view goes, unless a source that cannot be read now
    may hold it (unknown is not deleted)."""
    if unavailable:
        reason = "; ".join(unavailable_reason(name, error) for name, error in unavailable.items())
        log.debug("view_kept", session=shown_id(key), reason=reason)
        return TaskResult(path=key, action="deferred", reason=reason)
    if remove_view(view):
        log.info("view_removed", session=shown_id(key), reason="the session was deleted")
    records.forget(key)
    return TaskResult(path=key, action="gone")


def view_source(view: Path) -> str | None:
    """Where a view was made from (a source's name), from its provenance; None if it cannot be read."""
    try:
        _, meta = read_provenance(view)
    except (SessionError, OSError, ValueError, RecursionError):
        return None
    source = meta.get("source") if isinstance(meta, dict) else None
    return source if isinstance(source, str) else None


def _process_locked(
    ref: SessionRef, view: Path, sources: Picker, config: Config, records: Records, *, final_attempt: bool
) -> TaskResult:
    assert ref.key is not None
    mark = InputMarks(config)(ref)
    previous = records.get(ref.source, ref.key)
    if previous and mark_text(previous.mark) == mark_text(mark) and previous.action in SKIPPED_UNTIL_CHANGED:
        return TaskResult(path=ref.name, action="known_bad", reason=previous.reason)
    try:
        session = sources.read(ref)
    except FileNotFoundError:  # gone since it was found
        return _gone(ref.key, view, records, {})
    except UnusableSessionError as exc:
        return _skip_unusable(ref, exc, mark, records)
    except StateDBError as exc:  # unavailable meanwhile (a lock, an upgrade): the next sweep retries
        log.warning("source_read_failed", session=ref.name, source=ref.source, cause=exc.cause, error=str(exc))
        return TaskResult(path=ref.name, action="deferred", reason=str(exc))
    except SessionError as exc:
        if not final_attempt and ref.written_at is not None and time.time() - ref.written_at < RECENT_WRITE_SECONDS:
            raise StillWritingError(str(exc)) from None
        return _skip_unusable(ref, exc, mark, records)
    except OSError as exc:  # a directory named session_x.json, no permission: one line, not a traceback
        reason = one_line(exc)
        log.error("session_unreadable", path=ref.name, error=reason)
        return TaskResult(path=ref.name, action="refused", reason=reason)
    return _compact_and_record(session, ref, mark=mark, config=config, records=records, previous=previous)


def _compact_and_record(
    session: Session, ref: SessionRef, *, mark: object, config: Config, records: Records, previous: Record | None
) -> TaskResult:
    """Write the session's view and record the outcome with the mark of the input read."""
    assert ref.key is not None
    key = ref.key

    def record(action: str, reason: str | None, report: Any = None) -> None:
        before, after = (report.tokens_before, report.tokens_after) if report else (None, None)
        records.put(ref.source, key, mark=mark, name=ref.name, sha256=session.sha256, action=action, reason=reason,
                    tokens_before=before, tokens_after=after)  # fmt: skip

    try:
        outcome = compact_to_view(session, config, skip_if_current=True)  # its view: `view`, named alike
    except SessionError as exc:  # a view that cannot be written for this session (nested too deep to encode)
        reason = one_line(exc)
        record("failed", reason)
        log.error("view_not_written", session=ref.name, error=reason, hint="retried when the session changes")
        return TaskResult(path=ref.name, action="failed", reason=reason)
    except OSError as exc:  # a full or read-only disk: not the session's fault
        reason = one_line(exc)
        log_write_failed(ref.name, reason, previous)
        record(WRITE_FAILED, reason)
        return TaskResult(path=ref.name, action=WRITE_FAILED, reason=reason)
    log_outcome(session.session_id, outcome)
    record(outcome.action, outcome.reason, outcome.report)
    return TaskResult(path=ref.name, action=outcome.action, reason=outcome.reason, report=outcome.as_dict())


SKIP_HINT = "fix or remove the session in Hermes; it is skipped until it changes"
BAD_FILE_HINT = "fix or remove the file; it is skipped until it changes"


def _skip_unusable(ref: SessionRef, exc: TimmyError, mark: object, records: Records) -> TaskResult:
    """A session that cannot be used as it stands: one line naming it (never its content), the first
    time for this mark; recorded, so the sweep skips it until it changes."""
    assert ref.key is not None
    previous = records.get(ref.source, ref.key)
    again = previous is not None and previous.action == "bad_input" and mark_text(previous.mark) == mark_text(mark)
    if isinstance(exc, UnusableSessionError):
        say = log.debug if again else log.warning
        say("session_skipped", session=shown_id(ref.session_id), reason=exc.problem, hint=SKIP_HINT)
    else:
        (log.debug if again else log.error)("session_unreadable", path=ref.name, error=str(exc), hint=BAD_FILE_HINT)
    records.put(ref.source, ref.key, mark=mark, name=ref.name, sha256=None, action="bad_input", reason=str(exc))
    return TaskResult(path=ref.name, action="bad_input", reason=str(exc))


def unnamed_key(ref: SessionRef) -> str:
    """The records' key of a session no file can be named after (`#` is in no file id)."""
    return "#" + hashlib.sha256(ref.session_id.encode("utf-8", "surrogatepass")).hexdigest()[:24]


def refuse_unnamed(ref: SessionRef, config: Config, records: Records) -> TaskResult:
    """A session whose id no file name can stand for (no view can be written): recorded unusable, one
    line the first time for its mark, skipped by the sweeps until it changes. No task: nothing to read."""
    problem = id_problem(ref.session_id) or "no file name can stand for its id"
    unnamed = replace(ref, key=unnamed_key(ref))
    return _skip_unusable(unnamed, UnusableSessionError(ref.session_id, problem), InputMarks(config)(ref), records)
