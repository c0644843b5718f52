"""The export's manifest (`manifest.json`): per session, the sha256 of the raw bytes exported; what it
tells the next run.

A run reads it to know how much it must redo (`Manifest.read`: everything, with the reason, or only
the sessions whose raw bytes changed and those a crashed run left pending) and rewrites it around the
swap of the JSONL files (`Manifest.commit`): first marking the sessions in flux as pending, last with
their new entries, so a crash between the renames makes the next run export them again.
"""

from __future__ import annotations

import contextlib
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from timmy_compactor.atomic import atomic_write, fsync_dir
from timmy_compactor.export.jsonl import CONVERSATIONS, MANIFEST, OUTPUT_MODE, PAIRS, Output
from timmy_compactor.export.summary import ExportError

FORMAT_VERSION = 3  # 3: messages keep only what a trainer reads
FULL_REQUESTED = "full export requested"
FIRST_EXPORT = "first export"


def encode_manifest(manifest: dict[str, Any]) -> bytes:
    return orjson.dumps(manifest, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n"


def load_manifest(path: Path) -> dict[str, Any] | None:
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


@dataclass(frozen=True)
class Manifest:
    """The manifest as this run found it in the export dir."""

    path: Path
    redact: bool
    found: dict[str, Any] | None  # None: no manifest yet, or a full export, which does not read it
    rebuild_reason: str | None  # why every session is exported again; None: an update
    sessions: dict[str, Any]  # the entries an update starts from (none for a rebuild)
    pending_keys: frozenset[str]  # sessions a crashed update left in flux: exported again
    carried: dict[str, Any] | None  # a full export's: what a session that fails now had, if still valid

    @classmethod
    def read(cls, out_dir: Path, *, full: bool, redact: bool) -> Manifest:
        path = out_dir / MANIFEST
        found = None if full else load_manifest(path)
        reason = _rebuild_reason(found, out_dir, full=full, redact=redact)
        sessions: dict[str, Any] = {}
        pending: frozenset[str] = frozenset()
        if found is not None and reason is None:
            sessions = dict(found["sessions"])
            pending = frozenset((found.get("pending") or {}).get("keys") or [])
        carried = _still_valid_sessions(out_dir, redact) if reason == FULL_REQUESTED else None
        return cls(path, redact, found, reason, sessions, pending, carried)

    def commit(self, outputs: Collection[Output], sessions: dict[str, Any], exported: list[str]) -> None:
        """Swap the new files in between two writes of the manifest: until the last one, it marks the
        sessions in flux as pending (or the whole export, for a rebuild)."""
        full = self.rebuild_reason is not None
        if full or self.found is None:
            in_flux: dict[str, Any] = {"version": FORMAT_VERSION, "redacted": self.redact, "sessions": {}}
        else:
            in_flux = dict(self.found)
        in_flux["pending"] = {"full": full, "keys": sorted(set(exported) | self.pending_keys)}
        atomic_write(self.path, encode_manifest(in_flux), OUTPUT_MODE)
        for out in outputs:
            out.commit()
        final: dict[str, Any] = {"version": FORMAT_VERSION, "redacted": self.redact}
        still_pending = sorted(self.pending_keys - set(exported)) if not full else []
        if still_pending:  # pending from a crashed run and not exported now (unreadable, --since...)
            final["pending"] = {"full": False, "keys": still_pending}
        final["sessions"] = dict(sorted(sessions.items()))
        atomic_write(self.path, encode_manifest(final), OUTPUT_MODE)
        fsync_dir(self.path.parent)


def _rebuild_reason(manifest: dict[str, Any] | None, out_dir: Path, *, full: bool, redact: bool) -> str | None:
    if full:
        return FULL_REQUESTED
    if manifest is None:
        return FIRST_EXPORT
    if manifest.get("version") != FORMAT_VERSION:
        return f"export format changed ({manifest.get('version')} -> {FORMAT_VERSION}); rebuilt"
    if manifest.get("redacted") != redact:
        return "export.redact_credentials changed; rebuilt"
    if (manifest.get("pending") or {}).get("full"):
        return "finishing an interrupted full export"
    missing = [name for name in (CONVERSATIONS, PAIRS) if not (out_dir / name).exists()]
    if missing:
        return f"{', '.join(missing)} missing; rebuilt"
    return None


def _still_valid_sessions(out_dir: Path, redact: bool) -> dict[str, Any] | None:
    """The entries of a manifest a full export may keep for a session that fails now: same format and
    redaction, no interrupted full export, both JSONL files there."""
    with contextlib.suppress(ExportError):
        prior = load_manifest(out_dir / MANIFEST)
        if prior is not None and _rebuild_reason(prior, out_dir, full=False, redact=redact) is None:
            return dict(prior["sessions"])
    return None
