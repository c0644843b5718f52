"""`session_export`: training data from the RAW Hermes sessions, never from views.

Reads only `session_*.json` files directly in the sessions dir (never `compacted_*` views, `.*.tmp`
temp files, `sessions.json`, `request_dump_*`, `*.jsonl`, and never a symlink that leaves the
directory) and writes into the export dir:

- `conversations.jsonl`: one record per session — `session_key`, `id`, `model`, `base_url`,
  `platform`, `session_start`, `last_updated`, `system_prompt`, `tools` (schemas), `message_count`,
  `messages` (every message, tool calls and tool results included, with the keys a trainer reads:
  see `records`), `integers_as_strings` (only when there were some) and `source`
  (`file`, `sha256`, `bytes`);
- `dpo_pairs.jsonl`: one record per correction found by `timmy_compactor.export.dpo` — `prompt`, `rejected`,
  `chosen` (lists of messages, the conversational preference format of TRL and similar tools),
  `correction`, `rule`, `system`, `tools`, `indices` (raw message indices) and `source`;
- `manifest.json`: per session, the sha256 of the raw bytes exported (plus sizes and counts).

Both JSONL files are sorted by `session_key` (the raw file name without `session_` and `.json`), so
the export depends only on the raw files, not on the order or history of runs.

Incremental and idempotent: each run hashes every raw file; only sessions whose sha256 differs from
the manifest are parsed and exported again, and their old records are replaced, never duplicated.
A run with nothing to change writes nothing. When something changed, both JSONL files are rewritten
once, streaming (old records copied, changed ones swapped in, in session order), to hidden temp files
that are fsynced and `os.replace`d; the manifest is first marked *pending* for the sessions being
replaced and rewritten last (`export.manifest`). A crash at any point therefore leaves every file
complete and parseable, and the next run redoes the pending sessions (or the interrupted full export).

Records of sessions whose raw file was deleted are kept (Hermes may prune old snapshots; the
training data stays) until `--full`, which rebuilds the export from the raw files present. A change
of `export.redact_credentials` or of the export format triggers a full rebuild, so no record written
under the old setting survives.

Every string taken from a session (messages, system prompt, tool schemas, model, base URL...) goes
through `timmy_compactor.core.redact.redact_text` when redaction is on (the default); only the
provenance written by the exporter itself (`session_key`, `source`) is left as is.

Two exports never run at once on one export dir: an `fcntl.flock` on `.export.lock`, non-blocking;
the loser returns a summary with `locked=True`.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import orjson

from timmy_compactor.atomic import file_lock
from timmy_compactor.config import Config
from timmy_compactor.core.redact import redact_value
from timmy_compactor.export.jsonl import CONVERSATIONS, OUTPUT_MODE, PAIRS, OldRecords, Output, remove_stale_temp_files
from timmy_compactor.export.manifest import FIRST_EXPORT, Manifest
from timmy_compactor.export.records import Clean, big_int_note, conversation_record, dumps, keep, pair_records
from timmy_compactor.export.sources import aware, sessions_to_export, updated_at
from timmy_compactor.export.summary import ExportError, ExportSummary, FileProblem
from timmy_compactor.logs import progress as show_progress
from timmy_compactor.sessions.files import SessionError, parse_session, sha256_bytes
from timmy_compactor.sessions.source import StateDBError
from timmy_compactor.sessions.sources import Picker, SessionRef

LOCK = ".export.lock"
SHARED_CACHE_SIZE = 64


@contextlib.contextmanager
def export_lock(out_dir: Path) -> Iterator[bool]:
    """Yield True holding the export dir's lock, or False at once if another export holds it."""
    with file_lock(out_dir / LOCK, mode=OUTPUT_MODE) as held:
        yield held


def export_sessions(
    sessions_dir: Path,
    out_dir: Path,
    *,
    since: datetime | None = None,
    full: bool = False,
    redact: bool = True,
    progress: bool | None = None,
    hermes_home: Path | None = None,
) -> ExportSummary:
    """Export the raw sessions of `sessions_dir` into `out_dir` (see the module docstring).

    With `hermes_home`, the sessions in its `state.db` are exported from there, whole across
    Hermes' compressions; a snapshot file of the same session is then left out (the database wins).

    `since`: sessions whose `last_updated` (else `session_start`, else file mtime) is earlier are not
    exported (naive times are local time). `full`: rebuild the whole export. `redact`: pass every
    session string through `redact_text`. Raises ExportError when the export cannot run at all.
    """
    start = time.perf_counter()
    sessions_dir, out_dir = Path(sessions_dir).expanduser(), Path(out_dir).expanduser()
    if not sessions_dir.is_dir() and not (hermes_home and (Path(hermes_home).expanduser() / "state.db").is_file()):
        raise ExportError(
            sessions_dir,
            "sessions directory not found; set sessions.dir in the config (Hermes writes session_*.json "
            "there only with `sessions: write_json_snapshots: true` in its config.yaml)",
        )
    if out_dir.resolve() == sessions_dir.resolve():
        raise ExportError(out_dir, "the export dir is the sessions dir; choose another (--out DIR or export.dir)")
    try:
        out_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        (out_dir / LOCK).touch(mode=OUTPUT_MODE, exist_ok=True)
    except OSError as exc:
        raise ExportError(
            out_dir, f"cannot use the export dir ({exc.strerror}); pass --out DIR or set export.dir"
        ) from None
    with export_lock(out_dir) as acquired:
        if not acquired:
            return ExportSummary(out_dir=str(out_dir), locked=True, note="another export is running; skipped")
        remove_stale_temp_files(out_dir)
        run = _Run(
            sessions_dir, out_dir, since=since, full=full, redact=redact, progress=progress, hermes_home=hermes_home
        )
        try:
            return run.execute(start)
        except OSError as exc:  # reading a session is handled per file: this is the export dir
            raise ExportError(
                exc.filename or out_dir,
                f"{exc.strerror or exc} while writing the export; the previous export is unchanged and valid, "
                "and the next run retries (free some space or fix the permissions, or pass --out DIR)",
            ) from exc


@dataclass(frozen=True)
class _Exported:
    lines: list[bytes]  # the conversation record, then its pairs
    entry: dict[str, Any]  # its manifest entry


class _Run:
    """One export run, under the lock."""

    def __init__(
        self,
        sessions_dir: Path,
        out_dir: Path,
        *,
        since: datetime | None,
        full: bool,
        redact: bool,
        progress: bool | None,
        hermes_home: Path | None = None,
    ) -> None:
        self.sessions_dir = sessions_dir
        self.hermes_home = hermes_home
        self.out_dir = out_dir
        self.since = aware(since) if since is not None else None
        self.progress = progress
        self.clean: Clean = redact_value if redact else keep
        self.manifest = Manifest.read(out_dir, full=full, redact=redact)
        self.failed: list[FileProblem] = []
        self.noted: list[FileProblem] = []  # exported, with something to say (big integers)
        self.bytes_read = 0
        self._shared: dict[bytes, Any] = {}
        self.picker = Picker([])  # this home's session sources, opened by `execute`

    def _clean_shared(self, value: Any) -> Any:
        """`clean`, memoised: Hermes sends the same system prompt and tool schemas in every session."""
        key = orjson.dumps(value)
        if key not in self._shared:
            if len(self._shared) >= SHARED_CACHE_SIZE:
                self._shared.clear()
            self._shared[key] = self.clean(value)
        return self._shared[key]

    def _read(self, ref: SessionRef) -> bytes | None:
        """The session's bytes, from its source (`sessions.sources`: a snapshot's file, state.db's rows)."""
        try:
            data = self.picker.raw(ref)
        except StateDBError as exc:
            self.failed.append(FileProblem(file=ref.name, reason=f"{exc} (retried on the next run)"))
            return None
        except OSError as exc:
            reason = f"cannot read ({exc.strerror}); check the file's permissions (it is retried on the next run)"
            self.failed.append(FileProblem(file=ref.name, reason=reason))
            return None
        self.bytes_read += len(data)
        return data

    def execute(self, start: float) -> ExportSummary:
        self.picker, files, refused = sessions_to_export(self.sessions_dir, self.hermes_home)
        candidates: list[tuple[str, SessionRef]] = []
        unchanged = 0
        if self.manifest.rebuild_reason:
            candidates = files
        else:
            for key, path in show_progress(files, "scan", enabled=self.progress):
                data = self._read(path)
                if data is None:
                    continue
                old = self.manifest.sessions.get(key, {})
                if key not in self.manifest.pending_keys and old.get("sha256") == sha256_bytes(data):
                    unchanged += 1
                else:
                    candidates.append((key, path))
        summary = ExportSummary(
            out_dir=str(self.out_dir),
            seen=len(files),
            unchanged=unchanged,
            refused=tuple(refused),
            rebuilt=self.manifest.rebuild_reason is not None,
            note=self.manifest.rebuild_reason,
        )
        if candidates or self.manifest.rebuild_reason:
            summary = self._rewrite(candidates, summary)
        else:
            summary = self._with_totals(summary, self.manifest.sessions)
        return replace(
            summary,
            failed=tuple(self.failed),
            noted=tuple(self.noted),
            bytes_read=self.bytes_read,
            elapsed_s=time.perf_counter() - start,
        )

    def _export_one(self, key: str, ref: SessionRef) -> _Exported | Literal["failed", "skipped"]:
        """The new JSONL lines of one session and its manifest entry, or why there are none."""
        data = self._read(ref)
        if data is None:
            return "failed"
        path = ref.path or Path(ref.name)
        try:
            session = parse_session(path, data)
        except SessionError as exc:
            reason = f"{exc.problem}; left out of the export ({self._previous_note()}) until it parses"
            self.failed.append(FileProblem(file=str(path), reason=reason))
            return "failed"
        if self.since is not None and updated_at(session, path) < self.since:
            return "skipped"
        try:
            record = conversation_record(session, key, len(data), self.clean, self._clean_shared)
            pairs = pair_records(record, session.messages)
            lines = [dumps(record), *map(dumps, pairs)]
        except (TypeError, ValueError, RecursionError) as exc:  # nested deeper than the encoder goes
            problem = "nested too deep" if "ecursion" in f"{type(exc).__name__}{exc}" else type(exc).__name__
            reason = f"cannot be exported ({problem}); left out ({self._previous_note()}) until it changes"
            self.failed.append(FileProblem(file=str(path), reason=reason))
            return "failed"
        entry = {
            "file": path.name,
            "sha256": session.sha256,
            "bytes": len(data),
            "messages": len(session.messages),
            "pairs": len(pairs),
            "exported_at": datetime.now(UTC).isoformat(timespec="seconds"),
        }
        if note := big_int_note(record):
            self.noted.append(FileProblem(file=str(path), reason=note))
        return _Exported(lines=lines, entry=entry)

    def _previous_note(self) -> str:
        if self.manifest.rebuild_reason == FIRST_EXPORT:
            return "a first export: nothing of it was exported before"
        if self.manifest.rebuild_reason is None or self.manifest.carried is not None:
            return "its previous records, if any, are kept"
        return "this rebuild drops its previous records"

    def _rewrite(self, candidates: list[tuple[str, SessionRef]], summary: ExportSummary) -> ExportSummary:
        """Stream old records and new ones, in session order, into temp files; commit if anything changed."""
        keep_old = self.manifest.rebuild_reason is None or self.manifest.carried is not None
        old_conv = OldRecords(self.out_dir / CONVERSATIONS if keep_old else None)
        old_pairs = OldRecords(self.out_dir / PAIRS if keep_old else None)
        outputs: list[Output] = []
        sessions = dict(self.manifest.sessions)
        exported: list[str] = []
        skipped = pairs_written = 0
        try:
            conv_out = Output(self.out_dir / CONVERSATIONS)
            outputs.append(conv_out)
            pairs_out = Output(self.out_dir / PAIRS)
            outputs.append(pairs_out)
            for key, path in show_progress(candidates, "export", enabled=self.progress):
                self._before(old_conv, key, conv_out)
                self._before(old_pairs, key, pairs_out)
                previous_conv, previous_pairs = old_conv.take(key), old_pairs.take(key)
                result = self._export_one(key, path)
                if isinstance(result, _Exported):
                    new_conv, new_pairs = result.lines[:1], result.lines[1:]
                    sessions[key] = result.entry
                    exported.append(key)
                    pairs_written += len(new_pairs)
                else:  # failed or skipped: whatever was exported before stays
                    new_conv, new_pairs = previous_conv, previous_pairs
                    if self.manifest.carried is not None and key in self.manifest.carried and previous_conv:
                        sessions[key] = self.manifest.carried[key]
                    skipped += result == "skipped"
                for line in new_conv:
                    conv_out.write(line)
                for line in new_pairs:
                    pairs_out.write(line)
            self._before(old_conv, None, conv_out)
            self._before(old_pairs, None, pairs_out)
            changed = bool(exported) or self.manifest.rebuild_reason is not None
            if changed:
                conv_out.finish()
                pairs_out.finish()
                self.manifest.commit((conv_out, pairs_out), sessions, exported)
            else:  # nothing exported (failures, --since): the export stays as it is, byte for byte
                conv_out.discard()
                pairs_out.discard()
        except BaseException:
            for out in outputs:
                out.discard()
            raise
        finally:
            old_conv.close()
            old_pairs.close()
        summary = replace(
            summary,
            exported=len(exported),
            skipped=skipped,
            pairs=pairs_written,
            bytes_written=conv_out.bytes + pairs_out.bytes if changed else 0,
        )
        return self._with_totals(summary, sessions if changed else self.manifest.sessions)

    def _before(self, old: OldRecords, key: str | None, out: Output) -> None:
        """Records of sessions that are not candidates: kept by an update, dropped by a rebuild."""
        if self.manifest.rebuild_reason is None:
            old.copy_before(key, out)
        else:
            old.drop_before(key)

    @staticmethod
    def _with_totals(summary: ExportSummary, sessions: dict[str, Any]) -> ExportSummary:
        pairs = sum(int(entry.get("pairs", 0)) for entry in sessions.values() if isinstance(entry, dict))
        return replace(summary, sessions_total=len(sessions), pairs_total=pairs)


def run_export_task(config: Config) -> ExportSummary:
    """What the periodic Huey task runs: export `config.sessions_dir` into `config.export.dir`.

    Safe when runs overlap (the second returns at once with `locked=True`); an export that cannot
    run at all (missing sessions dir, corrupt manifest...) is reported as a failed summary, not raised.
    """
    out_dir = Path(config.export.dir).expanduser()
    try:
        return export_sessions(
            config.sessions_dir,
            out_dir,
            redact=config.export.redact_credentials,
            progress=False,
            hermes_home=config.hermes_home,
        )
    except ExportError as exc:
        return ExportSummary(
            out_dir=str(out_dir), failed=(FileProblem(file=exc.path, reason=exc.problem),), note="export not run"
        )
