"""Export throughput on 1,000 realistic sessions: full export, no-change incremental, 1 % changed.

    .venv/bin/python bench/bench_export.py [--sessions 1000] [--repeat 3] [--redact both|on|off]

The sessions are copies of the real Hermes samples and the agent corpus in ../shared (`$TIMMY_SHARED`;
without it, as in a public clone, the two samples and two corpus runs shipped under tests/data),
cycled, each with its own session id and a distinct first
user message; a third of them get a compacted view next to them, as the sidecar would write (the
export must skip those). Prints, per mode, the median over `--repeat` runs of: a full export into
an empty dir, an incremental run with nothing changed, and an incremental run after 1 % of the
sessions changed (which rewrites both JSONL files once) — as seconds, sessions/s and MB/s of raw
session input.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from timmy_compactor.export import ExportSummary, export_sessions

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("TIMMY_SHARED", ROOT.parent / "shared"))  # optional, as in tests/support.py
DATA = ROOT / "tests" / "data"  # two Hermes samples and two corpus runs, shipped for public clones


def template_paths() -> tuple[list[Path], Path]:
    """The session files to copy, and where they come from: ../shared when present, else tests/data."""
    for base in (SHARED, DATA):
        samples = base / "samples" if base == SHARED else base
        paths = sorted(samples.glob("session_*.json")) + sorted((base / "corpus").glob("session_*.json"))
        if paths:
            return paths, base
    raise SystemExit(f"no sessions to copy: neither {SHARED} nor {DATA} holds any")


def templates() -> list[dict[str, Any]]:
    return [json.loads(p.read_bytes()) for p in template_paths()[0]]


def variant(template: dict[str, Any], i: int, tag: str = "") -> dict[str, Any]:
    doc = json.loads(json.dumps(template))
    doc["session_id"] = f"bench_{i:05d}"
    first = next(m for m in doc["messages"] if m.get("role") == "user")
    first["content"] = f"[bench {i}{tag}] {first['content']}"
    doc["message_count"] = len(doc["messages"])
    return doc


def write(path: Path, doc: dict[str, Any]) -> None:
    path.write_text(json.dumps(doc, indent=2, ensure_ascii=False), encoding="utf-8")


def make_sessions(directory: Path, n: int) -> float:
    bases = templates()
    for i in range(n):
        doc = variant(bases[i % len(bases)], i)
        write(directory / f"session_bench_{i:05d}.json", doc)
        if i % 3 == 0:
            write(directory / f"compacted_session_bench_{i:05d}.json", doc)
    return sum(p.stat().st_size for p in directory.glob("session_*.json")) / 1e6


def timed(sessions: Path, out: Path, redact: bool) -> tuple[float, ExportSummary]:
    start = time.perf_counter()
    summary = export_sessions(sessions, out, redact=redact, progress=False)
    return time.perf_counter() - start, summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--redact", choices=("both", "on", "off"), default="both")
    args = parser.parse_args()
    modes = {"both": (True, False), "on": (True,), "off": (False,)}[args.redact]
    changed = max(1, args.sessions // 100)
    bases = templates()
    with tempfile.TemporaryDirectory() as tmp:
        sessions = Path(tmp) / "sessions"
        sessions.mkdir()
        total_mb = make_sessions(sessions, args.sessions)
        print(
            f"{args.sessions} sessions, {total_mb:.0f} MB of raw JSON ({len(bases)} templates from "
            f"{template_paths()[1]}); median of {args.repeat}"
        )
        for redact in modes:
            results: dict[str, list[float]] = {"full": [], "no change": [], f"{changed} changed": []}
            for k in range(args.repeat):
                out = Path(tmp) / f"out{k}"
                seconds, summary = timed(sessions, out, redact)
                assert summary.exported == args.sessions and not summary.failed, summary
                results["full"].append(seconds)
                seconds, summary = timed(sessions, out, redact)
                assert summary.unchanged == args.sessions and summary.bytes_written == 0, summary
                results["no change"].append(seconds)
                for i in range(0, args.sessions, args.sessions // changed)[:changed]:
                    write(
                        sessions / f"session_bench_{i:05d}.json", variant(bases[i % len(bases)], i, f" {redact}-r{k}")
                    )
                seconds, summary = timed(sessions, out, redact)
                assert summary.exported == changed, summary
                results[f"{changed} changed"].append(seconds)
                out_mb = sum(p.stat().st_size for p in out.glob("*.jsonl")) / 1e6
                shutil.rmtree(out)
            print(f"redaction {'on' if redact else 'off'} (export: {out_mb:.0f} MB of JSONL):")
            for name, times in results.items():
                median = statistics.median(times)
                print(
                    f"  {name:12} {median:7.2f} s  {args.sessions / median:8.0f} sessions/s  "
                    f"{total_mb / median:7.1f} MB/s"
                )


if __name__ == "__main__":
    main()
