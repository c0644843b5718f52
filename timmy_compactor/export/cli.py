"""`timmy-compactor export [--out DIR] [--since ISO] [--full] [--json]`."""

from __future__ import annotations

import argparse
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

from timmy_compactor.errors import EXIT_FAILED, EXIT_OK
from timmy_compactor.export.run import export_sessions
from timmy_compactor.export.summary import ExportSummary


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
    summary = export_sessions(  # an ExportError (the export cannot run) is cli.main's one-line error, exit 2
        config.sessions_dir,
        out,
        since=args.since,
        full=args.full,
        redact=config.export.redact_credentials,
        hermes_home=config.hermes_home,
    )
    if args.json:
        sys.stdout.write(orjson.dumps(summary.as_dict()).decode() + "\n")
    else:
        print(_human(summary))
    for problem in summary.noted:
        print(f"timmy-compactor export: note: {problem.file}: {problem.reason}", file=sys.stderr)
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
