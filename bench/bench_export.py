"""Export throughput on 1,000 sessions: a full export, then a no-change incremental run.

    .venv/bin/python bench/bench_export.py [--sessions 1000] [--repeat 3]

The sessions are the Hermes sample with distinct ids and first messages (~200 KB each). Prints
median sessions/s and MB/s of raw input for each mode.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
from pathlib import Path

from timmy_compactor.export import export_sessions

SAMPLE = Path(__file__).resolve().parents[2] / "shared" / "samples" / "session_sample.json"
FALLBACK = Path(__file__).resolve().parents[1] / "tests" / "data" / "session_sample.json"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    base = json.loads((SAMPLE if SAMPLE.exists() else FALLBACK).read_bytes())
    with tempfile.TemporaryDirectory() as tmp:
        sessions = Path(tmp) / "sessions"
        sessions.mkdir()
        for i in range(args.sessions):
            base["session_id"] = f"bench_{i}"
            base["messages"][0]["content"] = f"[{i}] " + base["messages"][0]["content"][-300:]
            (sessions / f"session_bench_{i:05d}.json").write_text(json.dumps(base, indent=2))
        total_mb = sum(p.stat().st_size for p in sessions.iterdir()) / 1e6
        full, incremental = [], []
        for k in range(args.repeat):
            out = Path(tmp) / f"out{k}"
            full.append(export_sessions(sessions, out, progress=False).elapsed_s)
            incremental.append(export_sessions(sessions, out, progress=False).elapsed_s)
            shutil.rmtree(out)
    for name, times in (("full", full), ("incremental, nothing changed", incremental)):
        median = statistics.median(times)
        print(
            f"{name:30} {args.sessions} sessions, {total_mb:.0f} MB: {median:.2f} s "
            f"({args.sessions / median:.0f} sessions/s, {total_mb / median:.0f} MB/s)"
        )


if __name__ == "__main__":
    main()
