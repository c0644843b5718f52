"""`session_export`: training data from the RAW Hermes sessions, never from views.

Reads only `session_*.json` files directly in the sessions dir (never `compacted_*` views, `.*.tmp`
temp files, `sessions.json`, `request_dump_*`, `*.jsonl`, and never a symlink that leaves the
directory) and writes into the export dir:

- `conversations.jsonl`: one record per session — `session_key`, `id`, `model`, `base_url`,
  `platform`, `session_start`, `last_updated`, `system_prompt`, `tools` (schemas), `message_count`,
  `messages` (every message as Hermes wrote it, tool calls and tool results included) and `source`
  (`file`, `sha256`, `bytes`);
- `dpo_pairs.jsonl`: one record per correction found by `timmy_compactor.dpo` — `prompt`, `rejected`,
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
replaced and rewritten last. A crash at any point therefore leaves every file complete and
parseable, and the next run redoes the pending sessions (or the interrupted full export).

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

import argparse
import contextlib
import fcntl
import os
import re
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, Literal, TypeVar

import orjson

from timmy_compactor.config import Config
from timmy_compactor.core.redact import redact_text
from timmy_compactor.dpo import mine_pairs
from timmy_compactor.session_io import Session, SessionError, atomic_write, is_view_name, parse_session, sha256_bytes
from timmy_compactor.statedb import StateDB, StateDBError

CONVERSATIONS = "conversations.jsonl"
PAIRS = "dpo_pairs.jsonl"
MANIFEST = "manifest.json"
LOCK = ".export.lock"
FORMAT_VERSION = 2
OUTPUT_MODE = 0o600  # sessions can hold secrets; so can their export, even redacted
SESSION_PREFIX, SESSION_SUFFIX = "session_", ".json"
EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2
SHARED_CACHE_SIZE = 64

T = TypeVar("T")
Clean = Callable[[Any], Any]


class ExportError(Exception):
    """The export cannot run. `str()` names the file and says what to do."""

    def __init__(self, path: Path | str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = str(path)
        self.problem = problem


@dataclass(frozen=True, kw_only=True)
class FileProblem:
    file: str
    reason: str


@dataclass(frozen=True, kw_only=True)
class ExportSummary:
    """What one export run did. Counts are raw session files unless named otherwise."""

    out_dir: str
    seen: int = 0  # raw session files found
    exported: int = 0  # (re-)exported by this run
    unchanged: int = 0  # same sha256 as in the manifest: not parsed, records kept
    skipped: int = 0  # changed but last updated before --since
    failed: tuple[FileProblem, ...] = ()  # unreadable or not a session: left out, old records kept
    refused: tuple[FileProblem, ...] = ()  # symlinks out of the sessions dir, non-regular files
    pairs: int = 0  # DPO pairs written for the sessions exported by this run
    sessions_total: int = 0  # sessions in the export after the run
    pairs_total: int = 0  # DPO pairs in the export after the run
    bytes_read: int = 0  # raw session bytes read
    bytes_written: int = 0  # bytes of JSONL written (0 when nothing changed)
    elapsed_s: float = 0.0
    rebuilt: bool = False  # the whole export was rebuilt (--full, first run, setting changed...)
    locked: bool = False  # another export held the lock: this run did nothing
    note: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "out_dir": self.out_dir,
            "seen": self.seen,
            "exported": self.exported,
            "unchanged": self.unchanged,
            "skipped": self.skipped,
            "failed": [{"file": p.file, "reason": p.reason} for p in self.failed],
            "refused": [{"file": p.file, "reason": p.reason} for p in self.refused],
            "pairs": self.pairs,
            "sessions_total": self.sessions_total,
            "pairs_total": self.pairs_total,
            "bytes_read": self.bytes_read,
            "bytes_written": self.bytes_written,
            "elapsed_s": round(self.elapsed_s, 3),
            "rebuilt": self.rebuilt,
            "locked": self.locked,
            "note": self.note,
        }


# ---------------------------------------------------------------- records (pure)


def redact_value(value: Any) -> Any:
    """`value` (decoded JSON) with `redact_text` applied to every string in it; keys are kept."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, dict):
        return {k: redact_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [redact_value(v) for v in value]
    return value


def _keep(value: Any) -> Any:
    return value


def conversation_record(
    session: Session, key: str, size: int, clean: Clean = _keep, clean_shared: Clean | None = None
) -> dict[str, Any]:
    """The `conversations.jsonl` record of one raw session; `clean` is applied to the session's data
    (`clean_shared`, if given, to the system prompt and tool schemas, which repeat across sessions)."""
    doc = session.document or {}
    shared = clean_shared or clean
    return {
        "session_key": key,
        "id": clean(doc.get("session_id") if isinstance(doc.get("session_id"), str) else key),
        "model": clean(doc.get("model")),
        "base_url": clean(doc.get("base_url")),
        "platform": clean(doc.get("platform")),
        "session_start": clean(doc.get("session_start")),
        "last_updated": clean(doc.get("last_updated")),
        "system_prompt": shared(doc.get("system_prompt")),
        "tools": shared(doc.get("tools") or []),
        "message_count": len(session.messages),
        "messages": clean(session.messages),
        "source": {"file": session.path.name, "sha256": session.sha256, "bytes": size},
    }


def pair_records(record: dict[str, Any], raw_messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The `dpo_pairs.jsonl` records of one session: mined on the raw messages, built from the
    record's (possibly redacted) messages, which have the same indices."""
    messages = record["messages"]
    out = []
    for pair in mine_pairs(raw_messages):
        out.append(
            {
                "session_key": record["session_key"],
                "session_id": record["id"],
                "rule": pair.rule,
                "prompt": messages[: pair.prompt_end + 1],
                "rejected": [messages[i] for i in pair.rejected],
                "chosen": [messages[i] for i in pair.chosen],
                "correction": messages[pair.correction],
                "system": record["system_prompt"],
                "tools": record["tools"],
                "indices": {
                    "prompt_end": pair.prompt_end,
                    "rejected": list(pair.rejected),
                    "correction": pair.correction,
                    "chosen": list(pair.chosen),
                },
                "source": record["source"],
            }
        )
    return out


def _dumps(record: dict[str, Any]) -> bytes:
    return orjson.dumps(record, default=str)


# ---------------------------------------------------------------- the sessions dir


def session_key(name: str) -> str:
    return name[len(SESSION_PREFIX) : -len(SESSION_SUFFIX)]


def is_raw_session_name(name: str) -> bool:
    return (
        name.startswith(SESSION_PREFIX)
        and name.endswith(SESSION_SUFFIX)
        and len(name) > len(SESSION_PREFIX) + len(SESSION_SUFFIX)
        and not is_view_name(name)
    )


def session_files(sessions_dir: Path) -> tuple[list[tuple[str, Path]], list[FileProblem]]:
    """(key, path) of every raw session file directly in `sessions_dir`, sorted by key, and the
    entries refused. Symlinks are never followed: one that leaves the directory (or points at a view
    or any other file) is refused, one to a raw session here is skipped (that file is read itself)."""
    base = sessions_dir.resolve()
    found: list[tuple[str, Path]] = []
    refused: list[FileProblem] = []
    with os.scandir(base) as entries:
        listed = sorted((entry.name, entry.is_symlink(), entry.is_file()) for entry in entries)
    for name, symlink, regular in listed:
        if not is_raw_session_name(name):
            continue
        path = base / name
        if symlink:
            real = path.resolve()
            if real.parent == base and is_raw_session_name(real.name) and real.is_file():
                reason = f"symlink to {real.name}, which is exported under its own name; skipped"
            else:
                reason = f"symlink to {real}, which is not a raw session in {base}; refused (copy the file in instead)"
            refused.append(FileProblem(file=str(path), reason=reason))
        elif not regular:
            refused.append(FileProblem(file=str(path), reason="not a regular file; refused"))
        else:
            found.append((session_key(name), path))
    found.sort()  # by key: "session_a-b.json" sorts before "session_a.json", but key "a" before "a-b"
    return found, refused


@dataclass(frozen=True)
class DbSource:
    """A session in Hermes' state.db: exported whole (every generation, see `statedb.full_history`)."""

    db: StateDB
    session_id: str

    @property
    def name(self) -> str:
        return f"state.db#{self.session_id}"


Source = Path | DbSource


def db_sources(hermes_home: Path | None) -> tuple[list[tuple[str, DbSource]], list[FileProblem]]:
    """(key, source) of every session in `hermes_home/state.db`, when it is there and readable."""
    if hermes_home is None:
        return [], []
    db = StateDB(Path(hermes_home).expanduser() / "state.db")
    if not db.path.is_file():
        return [], []
    try:
        db.check_schema()
        return [(sid, DbSource(db, sid)) for sid in sorted(db.high_water_marks())], []
    except StateDBError as exc:
        return [], [FileProblem(file=str(db.path), reason=f"{exc}; the JSON snapshots are exported instead")]


def _read_raw(path: Path) -> bytes:
    """The one place raw session bytes are read (tests hook it to prove what is read). O_NOFOLLOW: a
    session replaced by a symlink after the listing is not followed."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as handle:
        return handle.read()


def _updated_at(session: Session, path: Path) -> datetime:
    for field in ("last_updated", "session_start"):
        stamp = (session.document or {}).get(field)
        if isinstance(stamp, str):
            with contextlib.suppress(ValueError):
                return _aware(datetime.fromisoformat(stamp))
    try:
        return datetime.fromtimestamp(path.stat().st_mtime, UTC)
    except OSError:  # gone since it was read: it counts as recent
        return datetime.now(UTC)


def _aware(when: datetime) -> datetime:
    """Naive times (Hermes writes local time without an offset) are taken as local time."""
    return when.astimezone() if when.tzinfo is None else when


# ---------------------------------------------------------------- output files

_KEY_PREFIX = re.compile(rb'\{"session_key":("(?:[^"\\]|\\.)*")')


def _line_key(line: bytes) -> str | None:
    match = _KEY_PREFIX.match(line)
    if match:
        key = orjson.loads(match.group(1))
        return key if isinstance(key, str) else None
    try:
        record = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    key = record.get("session_key") if isinstance(record, dict) else None
    return key if isinstance(key, str) else None


class _OldRecords:
    """The records of a previous export, streamed in session order (the order they are written in)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.handle: IO[bytes] | None = path.open("rb") if path is not None and path.exists() else None
        self.line_no = 0
        self.last_key: str | None = None
        self.head: tuple[str, bytes] | None = None
        self._advance()

    def _corrupt(self, what: str) -> ExportError:
        return ExportError(
            str(self.path), f"line {self.line_no} {what}; rebuild the export with `timmy-compactor export --full`"
        )

    def _advance(self) -> None:
        self.head = None
        if self.handle is None:
            return
        for raw in self.handle:
            self.line_no += 1
            line = raw.rstrip(b"\r\n")
            if not line.strip():
                continue
            key = _line_key(line)
            if key is None:
                raise self._corrupt("is not a record of this export")
            if self.last_key is not None and key < self.last_key:
                raise self._corrupt("is out of session order (the file was edited?)")
            self.last_key = key
            self.head = (key, line)
            return

    def copy_before(self, key: str | None, out: _Output) -> None:
        """Copy every record whose session sorts before `key` (all of them for None)."""
        while self.head is not None and (key is None or self.head[0] < key):
            out.write(self.head[1])
            self._advance()

    def take(self, key: str) -> list[bytes]:
        lines = []
        while self.head is not None and self.head[0] == key:
            lines.append(self.head[1])
            self._advance()
        return lines

    def close(self) -> None:
        if self.handle is not None:
            self.handle.close()


class _Output:
    """A JSONL file being written to a hidden temp file next to its target."""

    def __init__(self, target: Path) -> None:
        self.target = target
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
        self.tmp = Path(tmp)
        self.handle = os.fdopen(fd, "wb", buffering=1 << 20)
        self.bytes = 0

    def write(self, line: bytes) -> None:
        self.handle.write(line)
        self.handle.write(b"\n")
        self.bytes += len(line) + 1

    def finish(self) -> None:
        self.handle.flush()
        os.fsync(self.handle.fileno())
        self.handle.close()
        os.chmod(self.tmp, OUTPUT_MODE)

    def commit(self) -> None:
        os.replace(self.tmp, self.target)

    def discard(self) -> None:
        self.handle.close()
        with contextlib.suppress(FileNotFoundError):
            self.tmp.unlink()


def _encode_manifest(manifest: dict[str, Any]) -> bytes:
    return orjson.dumps(manifest, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n"


def _load_manifest(path: Path) -> dict[str, Any] | None:
    if not path.exists():
        return None
    fix = "rebuild the export with `timmy-compactor export --full`"
    try:
        manifest = orjson.loads(path.read_bytes())
    except orjson.JSONDecodeError as exc:
        raise ExportError(path, f"unreadable manifest ({exc}); {fix}") from None
    if not isinstance(manifest, dict) or not isinstance(manifest.get("sessions"), dict):
        raise ExportError(path, f"not an export manifest (no 'sessions' object); {fix}")
    return manifest


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _remove_stale_temp_files(out_dir: Path) -> None:
    """Temp files of a run that was killed (we hold the lock: no other run is writing them)."""
    for name in (CONVERSATIONS, PAIRS, MANIFEST):
        for tmp in out_dir.glob(f".{name}.*.tmp"):
            with contextlib.suppress(OSError):
                tmp.unlink()


@contextlib.contextmanager
def export_lock(out_dir: Path) -> Iterator[bool]:
    """Yield True holding the export dir's lock, or False at once if another export holds it."""
    fd = os.open(out_dir / LOCK, os.O_RDWR | os.O_CREAT, OUTPUT_MODE)
    with os.fdopen(fd, "r+b") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _progress(items: Sequence[T], progress: bool | None, desc: str) -> Iterable[T]:
    """A tqdm bar on stderr when asked, or by default when stderr is a terminal."""
    if progress is None:
        progress = sys.stderr.isatty()
    if not progress or not items:
        return items
    from tqdm import tqdm

    bar: Iterable[T] = tqdm(items, desc=desc, unit="session", file=sys.stderr, leave=False)
    return bar


# ---------------------------------------------------------------- the export


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
        _remove_stale_temp_files(out_dir)
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
        self.since = _aware(since) if since is not None else None
        self.redact = redact
        self.progress = progress
        self.clean: Clean = redact_value if redact else _keep
        self.manifest_path = out_dir / MANIFEST
        self.manifest = None if full else _load_manifest(self.manifest_path)
        self.rebuild_reason = self._rebuild_reason(full)
        self.old_sessions: dict[str, Any] = {}
        self.pending_keys: set[str] = set()
        if self.manifest is not None and self.rebuild_reason is None:
            self.old_sessions = dict(self.manifest["sessions"])
            self.pending_keys = set((self.manifest.get("pending") or {}).get("keys") or [])
        self.failed: list[FileProblem] = []
        self.bytes_read = 0
        self._shared: dict[bytes, Any] = {}

    def _clean_shared(self, value: Any) -> Any:
        """`clean`, memoised: Hermes sends the same system prompt and tool schemas in every session."""
        key = orjson.dumps(value)
        if key not in self._shared:
            if len(self._shared) >= SHARED_CACHE_SIZE:
                self._shared.clear()
            self._shared[key] = self.clean(value)
        return self._shared[key]

    def _rebuild_reason(self, full: bool) -> str | None:
        manifest = self.manifest
        if full:
            return "full export requested"
        if manifest is None:
            return "first export"
        if manifest.get("version") != FORMAT_VERSION:
            return f"export format changed ({manifest.get('version')} -> {FORMAT_VERSION}); rebuilt"
        if manifest.get("redacted") != self.redact:
            return "export.redact_credentials changed; rebuilt"
        if (manifest.get("pending") or {}).get("full"):
            return "finishing an interrupted full export"
        missing = [name for name in (CONVERSATIONS, PAIRS) if not (self.out_dir / name).exists()]
        if missing:
            return f"{', '.join(missing)} missing; rebuilt"
        return None

    def _read(self, path: Source) -> bytes | None:
        if isinstance(path, DbSource):
            try:
                data = orjson.dumps(path.db.full_history(path.session_id).document())
            except StateDBError as exc:
                self.failed.append(FileProblem(file=path.name, reason=f"{exc} (retried on the next run)"))
                return None
            self.bytes_read += len(data)
            return data
        try:
            data = _read_raw(path)
        except OSError as exc:
            reason = f"cannot read ({exc.strerror}); check the file's permissions (it is retried on the next run)"
            self.failed.append(FileProblem(file=str(path), reason=reason))
            return None
        self.bytes_read += len(data)
        return data

    def execute(self, start: float) -> ExportSummary:
        snapshots, refused = session_files(self.sessions_dir) if self.sessions_dir.is_dir() else ([], [])
        in_db, db_problems = db_sources(self.hermes_home)
        db_keys = {key for key, _ in in_db}
        files: list[tuple[str, Source]] = [(k, p) for k, p in snapshots if k not in db_keys]
        files = sorted([*files, *in_db], key=lambda item: item[0])
        refused = [*refused, *db_problems]
        candidates: list[tuple[str, Source]] = []
        unchanged = 0
        if self.rebuild_reason:
            candidates = files
        else:
            for key, path in _progress(files, self.progress, "scan"):
                data = self._read(path)
                if data is None:
                    continue
                if key not in self.pending_keys and self.old_sessions.get(key, {}).get("sha256") == sha256_bytes(data):
                    unchanged += 1
                else:
                    candidates.append((key, path))
        summary = ExportSummary(
            out_dir=str(self.out_dir),
            seen=len(files),
            unchanged=unchanged,
            refused=tuple(refused),
            rebuilt=self.rebuild_reason is not None,
            note=self.rebuild_reason,
        )
        if candidates or self.rebuild_reason:
            summary = self._rewrite(candidates, summary)
        else:
            summary = self._with_totals(summary, self.old_sessions)
        return replace(
            summary, failed=tuple(self.failed), bytes_read=self.bytes_read, elapsed_s=time.perf_counter() - start
        )

    def _export_one(self, key: str, source: Source) -> _Exported | Literal["failed", "skipped"]:
        """The new JSONL lines of one session and its manifest entry, or why there are none."""
        data = self._read(source)
        if data is None:
            return "failed"
        path = Path(source.name) if isinstance(source, DbSource) else source
        try:
            session = parse_session(path, data)
        except SessionError as exc:
            reason = f"{exc.problem}; left out of the export (its previous records, if any, are kept) until it parses"
            self.failed.append(FileProblem(file=str(path), reason=reason))
            return "failed"
        if self.since is not None and _updated_at(session, path) < self.since:
            return "skipped"
        record = conversation_record(session, key, len(data), self.clean, self._clean_shared)
        pairs = pair_records(record, session.messages)
        entry = {
            "file": path.name,
            "sha256": session.sha256,
            "bytes": len(data),
            "messages": len(session.messages),
            "pairs": len(pairs),
            "exported_at": datetime.now(UTC).isoformat(timespec="seconds"),
        }
        return _Exported(lines=[_dumps(record), *map(_dumps, pairs)], entry=entry)

    def _rewrite(self, candidates: list[tuple[str, Source]], summary: ExportSummary) -> ExportSummary:
        """Stream old records and new ones, in session order, into temp files; commit if anything changed."""
        keep_old = self.rebuild_reason is None
        old_conv = _OldRecords(self.out_dir / CONVERSATIONS if keep_old else None)
        old_pairs = _OldRecords(self.out_dir / PAIRS if keep_old else None)
        outputs: list[_Output] = []
        sessions = dict(self.old_sessions)
        exported: list[str] = []
        skipped = pairs_written = 0
        try:
            conv_out = _Output(self.out_dir / CONVERSATIONS)
            outputs.append(conv_out)
            pairs_out = _Output(self.out_dir / PAIRS)
            outputs.append(pairs_out)
            for key, path in _progress(candidates, self.progress, "export"):
                old_conv.copy_before(key, conv_out)
                old_pairs.copy_before(key, pairs_out)
                previous_conv, previous_pairs = old_conv.take(key), old_pairs.take(key)
                result = self._export_one(key, path)
                if isinstance(result, _Exported):
                    new_conv, new_pairs = result.lines[:1], result.lines[1:]
                    sessions[key] = result.entry
                    exported.append(key)
                    pairs_written += len(new_pairs)
                else:  # failed or skipped: whatever was exported before stays
                    new_conv, new_pairs = previous_conv, previous_pairs
                    skipped += result == "skipped"
                for line in new_conv:
                    conv_out.write(line)
                for line in new_pairs:
                    pairs_out.write(line)
            old_conv.copy_before(None, conv_out)
            old_pairs.copy_before(None, pairs_out)
            changed = bool(exported) or self.rebuild_reason is not None
            if changed:
                conv_out.finish()
                pairs_out.finish()
                self._commit(conv_out, pairs_out, sessions, exported)
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
        return self._with_totals(summary, sessions if changed else self.old_sessions)

    def _commit(self, conv_out: _Output, pairs_out: _Output, sessions: dict[str, Any], exported: list[str]) -> None:
        """Swap the new files in. Until the end the manifest marks the sessions in flux as pending, so a
        crash between the renames makes the next run export them again (or redo the full export)."""
        full = self.rebuild_reason is not None
        if full or self.manifest is None:
            in_flux: dict[str, Any] = {"version": FORMAT_VERSION, "redacted": self.redact, "sessions": {}}
        else:
            in_flux = dict(self.manifest)
        in_flux["pending"] = {"full": full, "keys": sorted(set(exported) | self.pending_keys)}
        atomic_write(self.manifest_path, _encode_manifest(in_flux), OUTPUT_MODE)
        conv_out.commit()
        pairs_out.commit()
        final: dict[str, Any] = {"version": FORMAT_VERSION, "redacted": self.redact}
        still_pending = sorted(self.pending_keys - set(exported)) if not full else []
        if still_pending:  # pending from a crashed run and not exported now (unreadable, --since...)
            final["pending"] = {"full": False, "keys": still_pending}
        final["sessions"] = dict(sorted(sessions.items()))
        atomic_write(self.manifest_path, _encode_manifest(final), OUTPUT_MODE)
        _fsync_dir(self.out_dir)

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


# ---------------------------------------------------------------- command line


def _parse_since(text: str) -> datetime:
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not an ISO 8601 time (e.g. 2026-11-22, 2026-11-22T18:00, 2026-11-22T18:00:00+00:00)"
        ) from None


def _human(summary: ExportSummary) -> str:
    if summary.locked:
        return f"export to {summary.out_dir}: another export is running; nothing done (try again when it finishes)"
    parts = [
        f"{summary.seen} session(s) seen",
        f"{summary.exported} exported",
        f"{summary.unchanged} unchanged",
    ]
    if summary.skipped:
        parts.append(f"{summary.skipped} skipped (before --since)")
    if summary.failed:
        parts.append(f"{len(summary.failed)} failed")
    lines = [
        f"export to {summary.out_dir}: " + ", ".join(parts) + f"; {summary.pairs} DPO pair(s) written; "
        f"{summary.sessions_total} session(s) and {summary.pairs_total} pair(s) in the export; "
        f"{summary.bytes_read / 1e6:.1f} MB read in {summary.elapsed_s:.2f} s"
    ]
    if summary.note:
        lines.append(f"  ({summary.note})")
    return "\n".join(lines)


def cmd_export(args: argparse.Namespace) -> int:
    from timmy_compactor.config import load_config

    config = load_config(args.config)
    out = Path(args.out).expanduser() if args.out else Path(config.export.dir).expanduser()
    try:
        summary = export_sessions(
            config.sessions_dir,
            out,
            since=args.since,
            full=args.full,
            redact=config.export.redact_credentials,
            hermes_home=config.hermes_home,
        )
    except ExportError as exc:
        print(f"timmy-compactor export: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.json:
        sys.stdout.write(orjson.dumps(summary.as_dict()).decode() + "\n")
    else:
        print(_human(summary))
    for problem in summary.refused:
        print(f"timmy-compactor export: warning: {problem.file}: {problem.reason}", file=sys.stderr)
    for problem in summary.failed:
        print(f"timmy-compactor export: error: {problem.file}: {problem.reason}", file=sys.stderr)
    return EXIT_FAILED if summary.failed or summary.locked else EXIT_OK


def register_cli(sub: Any, verb: Any) -> None:
    p = verb("export", "export the raw sessions as SFT conversations and DPO pairs (incremental)")
    p.epilog = (
        "exit status: 0 done, 1 some sessions failed (named on stderr) or another export was running, "
        "2 the export cannot run (missing sessions dir, unusable export dir, corrupt manifest: see the message)"
    )
    p.add_argument("--out", metavar="DIR", help="export dir (default: export.dir in the config)")
    p.add_argument(
        "--since",
        metavar="ISO",
        type=_parse_since,
        help="only sessions last updated at or after this time (naive times are local time)",
    )
    p.add_argument("--full", action="store_true", help="rebuild the whole export from the raw sessions present")
    p.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    p.set_defaults(func=cmd_export)
