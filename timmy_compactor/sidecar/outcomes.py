"""What the sidecar's tasks say about an outcome: the log line of a compaction, one error line for a
view that cannot be written (its retries are debug lines), a reason cut to one line."""

from __future__ import annotations

from timmy_compactor.compactor import Outcome
from timmy_compactor.logs import get_logger
from timmy_compactor.sessions.names import shown_id
from timmy_compactor.sidecar.records import WRITE_FAILED, Record

log = get_logger("timmy_compactor.sidecar.work")  # the logger these lines always had


def one_line(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        target = exc.filename2 or exc.filename  # a rename: the file it was for, not the temp file
        where = f"{target}: " if target else ""
        return f"{where}{exc.strerror}"
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def unavailable_reason(source: str, error: BaseException) -> str:
    """One line for a source that cannot be read now: its name, the cause, the error and what to do."""
    cause, hint = getattr(error, "cause", None), getattr(error, "hint", None)
    said = one_line(error) + (f"; {hint}" if hint and hint not in str(error) else "")
    return f"{source} unavailable" + (f" ({cause})" if cause else "") + f": {said}"


def log_outcome(session_id: str, outcome: Outcome) -> None:
    report = outcome.report
    if report is None:  # asked for (an enqueue, a touched file): said, as the other outcomes are
        log.info("view_current", session_id=shown_id(session_id), view=str(outcome.view_path), action=outcome.action)
        return
    fields = {
        "session_id": shown_id(session_id),
        "action": outcome.action,
        "tokens_before": report.tokens_before,
        "tokens_after": report.tokens_after,
        "ratio": round(report.ratio, 4),
        "usage": round(report.usage_before, 4),
        "pressure_level": report.pressure_level,
        "rules": dict(report.rules),
        "verified": report.verified,
        "elapsed_ms": round(outcome.elapsed_ms, 2),
    }
    if outcome.action == "failed":
        log.error("compaction_failed_closed", reason=outcome.reason, **fields)
    elif outcome.action == "nothing_to_cut":
        log.warning("no_view_nothing_to_cut", reason=outcome.reason, **fields)
    elif outcome.action == "written" and report.tokens_after > report.context_window:  # still too large to send
        log.warning("view_written_above_window", view=str(outcome.view_path), reason=report.note, **fields)
    elif outcome.action == "written":
        note = {"note": report.note} if report.note else {}  # above the budget, and why
        log.info("view_written", view=str(outcome.view_path), **note, **fields)
    else:
        log.info("below_threshold", **fields)


WRITE_HINT = "free disk space or make the sessions dir writable; every sweep tries again"


def log_write_failed(key: str, reason: str, previous: Record | None) -> None:
    """One error line when a view first cannot be written; the retries of every sweep that fail the
    same way are debug lines (a read-only dir must not flood the log), and a success says so."""
    if previous is not None and previous.action == WRITE_FAILED and previous.reason == reason:
        log.debug("view_not_written", path=key, error=reason, hint=WRITE_HINT)
    else:
        log.error("view_not_written", path=key, error=reason, hint=WRITE_HINT)
