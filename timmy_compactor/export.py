"""`session_export`: training data from the RAW sessions, never from views.

Writes into the export dir:
- `conversations.jsonl`: one record per session (id, model, timestamps, system prompt, tool
  schemas, every message with its tool calls and results, source file and sha256);
- `dpo_pairs.jsonl`: one record per correction found by `timmy_compactor.dpo`;
- `manifest.json`: per session, the sha256 of the raw content exported.

Incremental and idempotent: only sessions whose raw bytes changed are read into new records (their
old records are replaced, never duplicated); with nothing changed no file is touched. Every file is
replaced atomically and the manifest last, so a crash leaves the previous files valid and the
next run converges. Sessions that disappear from Hermes' directory keep their records.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

from timmy_compactor.core.redact import redact_text
from timmy_compactor.dpo import mine_pairs
from timmy_compactor.session_io import SessionError, atomic_write, parse_session, sha256_bytes
from timmy_compactor.sidecar import session_files

CONVERSATIONS = "conversations.jsonl"
PAIRS = "dpo_pairs.jsonl"
MANIFEST = "manifest.json"
FORMAT_VERSION = 1


@dataclass(frozen=True, kw_only=True)
class ExportSummary:
    seen: int = 0
    exported: int = 0
    unchanged: int = 0
    skipped: int = 0
    failed: tuple[tuple[str, str], ...] = ()
    pairs: int = 0
    bytes_read: int = 0
    elapsed_s: float = 0.0
    out_dir: str = ""
    note: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "seen": self.seen,
            "exported": self.exported,
            "unchanged": self.unchanged,
            "skipped": self.skipped,
            "failed": [{"file": f, "reason": r} for f, r in self.failed],
            "pairs": self.pairs,
            "bytes_read": self.bytes_read,
            "elapsed_s": round(self.elapsed_s, 3),
            "out_dir": self.out_dir,
            "note": self.note,
        }


@dataclass
class _Run:
    changed: dict[str, list[bytes]] = field(default_factory=dict)  # session key -> conversation lines
    pairs: dict[str, list[bytes]] = field(default_factory=dict)  # session key -> pair lines
    manifest: dict[str, Any] = field(default_factory=dict)


def _redactor(enabled: bool) -> Any:
    def walk(value: Any) -> Any:
        if isinstance(value, str):
            return redact_text(value)
        if isinstance(value, dict):
            return {k: walk(v) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v) for v in value]
        return value

    return walk if enabled else (lambda value: value)


def conversation_record(
    doc: dict[str, Any] | None, messages: list[Any], key: str, source: Path, sha: str
) -> dict[str, Any]:
    doc = doc or {}
    return {
        "id": doc.get("session_id") or key,
        "model": doc.get("model"),
        "base_url": doc.get("base_url"),
        "platform": doc.get("platform"),
        "session_start": doc.get("session_start"),
        "last_updated": doc.get("last_updated"),
        "system_prompt": doc.get("system_prompt"),
        "tools": doc.get("tools") or [],
        "messages": messages,
        "source": {"file": source.name, "sha256": sha},
    }


def pair_records(record: dict[str, Any], key: str) -> list[dict[str, Any]]:
    messages = record["messages"]
    out = []
    for pair in mine_pairs(messages):
        out.append(
            {
                "session_id": record["id"],
                "rule": pair.rule,
                "system": record["system_prompt"],
                "prompt": messages[: pair.prompt_end + 1],
                "rejected": messages[pair.rejected],
                "chosen": messages[pair.chosen],
                "correction": messages[pair.correction],
                "indices": {
                    "prompt_end": pair.prompt_end,
                    "rejected": pair.rejected,
                    "correction": pair.correction,
                    "chosen": pair.chosen,
                },
                "source": record["source"],
            }
        )
    return out


def _read_jsonl_by_session(path: Path) -> Iterator[tuple[str, bytes]]:
    if not path.exists():
        return
    with path.open("rb") as handle:
        for line in handle:
            if line.strip():
                yield orjson.loads(line)["_session"], line.rstrip(b"\n")


def _session_key(path: Path) -> str:
    return path.stem.removeprefix("session_")


def _line(record: dict[str, Any], key: str) -> bytes:
    return orjson.dumps({"_session": key, **record}, default=str)


def _modified_since(doc: dict[str, Any] | None, path: Path, since: datetime | None) -> bool:
    if since is None:
        return True
    stamp = (doc or {}).get("last_updated")
    try:
        when = datetime.fromisoformat(stamp) if isinstance(stamp, str) else None
    except ValueError:
        when = None
    if when is None:
        when = datetime.fromtimestamp(path.stat().st_mtime)
    if when.tzinfo is None and since.tzinfo is not None:
        when = when.replace(tzinfo=since.tzinfo)
    return when >= since


def export_sessions(
    sessions_dir: Path,
    out_dir: Path,
    *,
    since: datetime | None = None,
    full: bool = False,
    redact: bool = True,
    progress: bool | None = None,
) -> ExportSummary:
    start = time.perf_counter()
    out_dir.mkdir(parents=True, exist_ok=True)
    with _export_lock(out_dir) as locked:
        if not locked:
            return ExportSummary(out_dir=str(out_dir), note="another export is running; skipped")
        return _export(sessions_dir, out_dir, since=since, full=full, redact=redact, progress=progress, start=start)


@contextlib.contextmanager
def _export_lock(out_dir: Path) -> Iterator[bool]:
    with open(out_dir / ".export.lock", "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _export(
    sessions_dir: Path,
    out_dir: Path,
    *,
    since: datetime | None,
    full: bool,
    redact: bool,
    progress: bool | None,
    start: float,
) -> ExportSummary:
    manifest_path = out_dir / MANIFEST
    old = orjson.loads(manifest_path.read_bytes()) if manifest_path.exists() and not full else {}
    old_sessions: dict[str, Any] = old.get("sessions", {}) if old.get("redacted") == redact else {}
    clean = _redactor(redact)
    run = _Run(manifest=dict(old_sessions))
    files = session_files(sessions_dir)
    seen = unchanged = skipped = read = 0
    failed: list[tuple[str, str]] = []
    for path in _progress(files, progress):
        seen += 1
        key = _session_key(path)
        try:
            data = path.read_bytes()
        except OSError as exc:
            failed.append((str(path), f"cannot read ({exc.strerror})"))
            continue
        read += len(data)
        sha = sha256_bytes(data)
        if old_sessions.get(key, {}).get("sha256") == sha:
            unchanged += 1
            continue
        try:
            session = parse_session(path, data)
        except SessionError as exc:
            failed.append((str(path), f"{exc.problem}; it is exported once it parses"))
            continue
        if not _modified_since(session.document, path, since):
            skipped += 1
            continue
        record = conversation_record(session.document, clean(session.messages), key, path, sha)
        record["system_prompt"] = clean(record["system_prompt"])  # tool schemas are not user data
        pairs = pair_records(record, key)
        run.changed[key] = [_line(record, key)]
        run.pairs[key] = [_line(p, key) for p in pairs]
        run.manifest[key] = {"sha256": sha, "file": path.name, "pairs": len(pairs), "exported_at": time.time()}
    if run.changed or full or not manifest_path.exists():
        _write(out_dir, run, redact, keep_old=not full)
    total_pairs = sum(len(v) for v in run.pairs.values())
    return ExportSummary(
        seen=seen,
        exported=len(run.changed),
        unchanged=unchanged,
        skipped=skipped,
        failed=tuple(failed),
        pairs=total_pairs,
        bytes_read=read,
        elapsed_s=time.perf_counter() - start,
        out_dir=str(out_dir),
    )


def _write(out_dir: Path, run: _Run, redact: bool, keep_old: bool) -> None:
    for name, fresh in ((CONVERSATIONS, run.changed), (PAIRS, run.pairs)):
        lines = []
        if keep_old:
            lines = [line for key, line in _read_jsonl_by_session(out_dir / name) if key not in run.changed]
        for key in sorted(fresh):
            lines.extend(fresh[key])
        atomic_write(out_dir / name, b"".join(line + b"\n" for line in lines), 0o600)
    manifest = {"version": FORMAT_VERSION, "redacted": redact, "sessions": dict(sorted(run.manifest.items()))}
    atomic_write(out_dir / MANIFEST, orjson.dumps(manifest, option=orjson.OPT_INDENT_2) + b"\n", 0o600)


def _progress(items: list[Path], progress: bool | None) -> Any:
    if progress is None:
        progress = sys.stderr.isatty()
    if not progress:
        return items
    from tqdm import tqdm

    return tqdm(items, desc="export", unit="session", file=sys.stderr, leave=False)


def run_export_task(config: Any) -> ExportSummary:
    """What the periodic Huey task runs."""
    return export_sessions(
        config.sessions_dir,
        Path(config.export.dir).expanduser(),
        redact=config.export.redact_credentials,
        progress=False,
    )


def cmd_export(args: argparse.Namespace) -> int:
    from timmy_compactor.config import load_config

    config = load_config(args.config)
    since = datetime.fromisoformat(args.since) if args.since else None
    out = Path(args.out).expanduser() if args.out else Path(config.export.dir).expanduser()
    summary = export_sessions(
        config.sessions_dir, out, since=since, full=args.full, redact=config.export.redact_credentials
    )
    if args.json:
        print(orjson.dumps(summary.as_dict()).decode())
    else:
        print(
            f"export to {out}: {summary.seen} session(s) seen, {summary.exported} exported, "
            f"{summary.unchanged} unchanged, {summary.skipped} skipped, {summary.pairs} DPO pair(s) from the "
            f"exported ones, {summary.elapsed_s:.2f} s" + (f" — {summary.note}" if summary.note else "")
        )
        for file, reason in summary.failed:
            print(f"  {file}: {reason}", file=sys.stderr)
    return 1 if summary.failed else 0


def register_cli(sub: Any, verb: Any) -> None:
    p = verb("export", "export raw sessions as SFT conversations and DPO pairs (incremental)")
    p.add_argument("--out", metavar="DIR", help="export dir (default: config export.dir)")
    p.add_argument("--since", metavar="ISO", help="only sessions updated at or after this time")
    p.add_argument("--full", action="store_true", help="re-export everything")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_export)
