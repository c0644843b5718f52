"""`timmy-compactor eval PATH… [--strategies a,b,…] [--out DIR] [--json] [--window N]`."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path
from typing import Any

from timmy_compactor.sessions.names import is_session_name

DEFAULT = "rules,ledger,hermes_prepass,clear_tool_uses,swe_last5,trim_messages,hot_tail_only"


def _session_paths(args: list[str], default: Path) -> list[Path]:
    paths: list[Path] = []
    for item in [Path(a).expanduser() for a in args] or [default]:
        if item.is_dir():
            paths += sorted(p for p in item.iterdir() if is_session_name(p.name))
        else:
            paths.append(item)
    return paths


def cmd_eval(args: argparse.Namespace) -> int:
    from timmy_compactor.compare.report import evaluate, html, markdown, plots, summary
    from timmy_compactor.config import load_config

    config = load_config(args.config)
    names = [n.strip() for n in args.strategies.split(",") if n.strip()]
    paths = _session_paths(args.paths, config.sessions_dir)
    if not paths:
        print("timmy-compactor eval: error: no session files found (give files or directories)", file=sys.stderr)
        return 2
    start = time.perf_counter()
    rows, unavailable = evaluate(paths, names, config, args.checkpoints, args.window)
    table = summary(rows, names)
    elapsed = time.perf_counter() - start
    out = Path(args.out or f"timmy-eval-{time.strftime('%Y%m%d-%H%M%S')}")
    out.mkdir(parents=True, exist_ok=True)
    md = markdown(table)
    data: dict[str, Any] = {
        "summary": table,
        "sessions": [dataclasses.asdict(r) | {"cut": r.cut} for r in rows],
        "unavailable": unavailable,
        "elapsed_s": round(elapsed, 2),
    }
    (out / "report.json").write_text(json.dumps(data, indent=2), encoding="utf-8")
    (out / "report.md").write_text(md + "\n", encoding="utf-8")
    try:
        images = plots(rows, table, out)
        hint = None
    except ImportError:  # the `eval` extra is not installed: the table and the report, without plots
        images = []
        hint = "timmy-compactor eval: no plots: matplotlib is missing (pip install 'timmy-compactor[eval]')"
    page = html(md, images, out, elapsed)
    if hint:
        print(hint, file=sys.stderr)
    if args.json:
        print(json.dumps(data))
    else:
        print(md)
        if unavailable:
            print(f"\nunavailable here: {', '.join(unavailable)} (install the 'eval' / 'hermes' extras)")
        print(f"\n{len(paths)} session(s) in {elapsed:.1f} s; report: {page}")
    return 0


def register_cli(sub: Any, verb: Any) -> None:
    p = verb("eval", "compare compaction strategies on session files (nothing is written next to them)")
    p.add_argument("paths", nargs="*", metavar="PATH", help="session files or directories (default: sessions dir)")
    p.add_argument("--strategies", default=DEFAULT, help=f"comma-separated (default: {DEFAULT})")
    p.add_argument("--out", metavar="DIR", help="report dir (default: ./timmy-eval-<time>)")
    p.add_argument("--json", action="store_true", help="print the results as JSON instead of the table")
    p.add_argument("--window", type=int, help="context window for every session (default: config)")
    p.add_argument("--checkpoints", type=int, default=12, help="replay checkpoints per session for prefix reuse")
    p.set_defaults(func=cmd_eval)
