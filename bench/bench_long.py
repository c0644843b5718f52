"""A session far longer than any at hand: real runs one after another, replayed as Hermes drives an engine.

The shared corpus runs (and samples) are joined as consecutive tasks of one session -- each run's user
message starts a new turn, its tool steps follow -- until the session holds `--tokens` estimated tokens
(default 1.2M). The replay sends a request before every assistant message and compacts (the `timmy`
engine's way: from its raw log, keeping its readings across compactions) whenever the request reaches
the trigger. Printed per compaction (every `--every`-th row): the session's raw tokens so far, usage
after, the index's share of the window, chunks condensed, and the compaction's CPU time (less skewed by
a busy machine than wall time). Then the targets of issue 20: usage after every compaction <=
target_after, none stuck, the index within index_max_ratio, requests between compactions late in the
run >= half of early, a late compaction <= 2x an early one.

    .venv/bin/python bench/bench_long.py [--tokens 1200000] [--window 65536] [--every 10] [--check]

The digest printed after the compaction count is a sha256 of every view in turn: a change meant to
leave behaviour alone (a speed change) must leave it the same.
`--check` also runs the independent promise checker (`compare/promises.py`) at every compaction (slow:
it reads the whole session each time).
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from timmy_compactor.compare.promises import check
from timmy_compactor.core.fold.index import INDEX_HEADER
from timmy_compactor.core.pipeline import compact
from timmy_compactor.core.readings import Readings
from timmy_compactor.core.tokens import request_tokens
from timmy_compactor.core.types import Settings
from timmy_compactor.sessions.rawlog import RawLog

ROOT = Path(__file__).resolve().parents[1]
SOURCES = [ROOT.parent / "shared" / "corpus", ROOT.parent / "shared" / "samples"]


def runs() -> list[dict[str, Any]]:
    found = [p for d in SOURCES if d.exists() for p in sorted(d.glob("session_*.json"))]
    found = found or sorted((ROOT / "tests" / "data").glob("session_*.json"))
    return [json.loads(p.read_text(encoding="utf-8")) for p in found]


def joined(target: int) -> dict[str, Any]:
    """Runs one after another until `target` tokens; call ids renamed per copy so they stay unique."""
    sources = runs()
    first = sources[0]
    messages: list[dict[str, Any]] = []
    k = 0
    while request_tokens(messages, first.get("system_prompt"), first.get("tools")) < target:
        run = copy.deepcopy(sources[k % len(sources)]["messages"])
        for m in run:
            for c in m.get("tool_calls") or []:
                c["id"] = f"r{k}_{c.get('id')}"
            if m.get("role") == "tool":
                m["tool_call_id"] = f"r{k}_{m.get('tool_call_id')}"
        messages += [m for m in run if m.get("role") != "system"]
        k += 1
    return {"system_prompt": first.get("system_prompt"), "tools": first.get("tools"), "messages": messages, "runs": k}


def index_chars(messages: list[dict[str, Any]]) -> int:
    return next((len(m["content"]) for m in messages if str(m.get("content")).startswith(INDEX_HEADER)), 0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=1_200_000)
    parser.add_argument("--window", type=int, default=65_536)
    parser.add_argument("--every", type=int, default=10)
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    settings = Settings(context_window=args.window)
    data = joined(args.tokens)
    system_prompt, tools, raw_messages = data["system_prompt"], data["tools"], data["messages"]
    trigger = settings.trigger_threshold * args.window
    log, readings = RawLog(), Readings()
    digest = hashlib.sha256()
    context: list[dict[str, Any]] = []
    rows: list[dict[str, Any]] = []
    requests_since = 0
    broken: list[str] = []
    print(f"{len(raw_messages)} messages from {data['runs']} runs, window {args.window:,}")
    print(f"{'#':>4} {'raw tok':>9} {'before':>7} {'after':>6} {'index':>6} {'cond':>5} {'reqs':>5} {'ms':>7} tiers")
    for k, message in enumerate(raw_messages):
        if message.get("role") == "assistant" and context:
            requests_since += 1
            tokens = request_tokens(context, system_prompt, tools)
            if tokens >= trigger:
                start = time.process_time()
                raw = log.absorb(context)
                result = compact(raw, settings, system_prompt=system_prompt, tools=tools, force=True, readings=readings)
                ms = (time.process_time() - start) * 1000  # CPU time: a shared machine does not skew it
                log.answered(result.messages)
                context = list(result.messages)
                digest.update(json.dumps(context, sort_keys=True).encode())
                if not result.compacted:
                    broken.append(f"at #{k}: {result.report.failure}")
                if args.check and not (verdict := check(raw_messages[:k], context)).all_kept:
                    broken.append(f"at #{k}: {verdict.lost[:2]}")
                index = index_chars(context)
                row = {
                    "raw_tokens": request_tokens(raw, system_prompt, tools),
                    "usage_before": tokens / args.window,
                    "usage_after": result.report.usage_after,
                    "index_ratio": index / 4 / args.window,
                    "condensed": sum(str(m.get("content")).count("(condensed)") for m in context),
                    "requests_since": requests_since,
                    "ms": ms,
                    "tiers": _tiers(result.report.rules),
                }
                rows.append(row)
                requests_since = 0
                if len(rows) % args.every == 1 or args.every == 1:
                    print(
                        f"{len(rows):>4} {row['raw_tokens']:>9,} {row['usage_before']:>7.3f} "
                        f"{row['usage_after']:>6.3f} {row['index_ratio']:>6.3f} {row['condensed']:>5} "
                        f"{row['requests_since']:>5} {ms:>7.1f} {row['tiers']}"
                    )
        context.append(message)
    if len(rows) < 8:
        print("too few compactions to compare early and late")
        return 0
    quarter = max(2, len(rows) // 4)
    early, late = rows[1 : 1 + quarter], rows[-quarter:]  # the first compaction reads the whole run so far
    target = settings.target_after or 1.0
    stuck = sum(1 for r in rows if r["usage_after"] >= settings.trigger_threshold)
    print(
        f"\n{len(rows)} compactions over {rows[-1]['raw_tokens']:,} raw tokens ({data['runs']} runs); "
        f"failed or unverified: {len(broken)}; views digest {digest.hexdigest()[:16]}"
    )
    checks = [
        (f"usage after every compaction <= {target}", max(r["usage_after"] for r in rows), target),
        ("stuck compactions (still >= trigger)", stuck, 0),
        (
            f"index <= index_max_ratio {settings.index_max_ratio}",
            max(r["index_ratio"] for r in rows),
            settings.index_max_ratio,
        ),
    ]
    for label, value, bound in checks:
        print(f"  {label}: {value:.4g} {'ok' if value <= bound else 'NOT MET'}")
    over = sorted((r for r in rows if r["usage_after"] > target), key=lambda r: -r["usage_after"])
    if over:
        shown = ", ".join(f"{r['usage_after']:.3f} at {r['raw_tokens']:,}" for r in over[:5])
        print(f"    above {target}: {len(over)} of {len(rows)} compactions ({shown})")
    early_req = statistics.mean(r["requests_since"] for r in early[1:] or early)
    late_req = statistics.mean(r["requests_since"] for r in late)
    print(
        f"  requests between compactions: early {early_req:.1f}, late {late_req:.1f} "
        f"(late/early {late_req / early_req:.2f}, target >= 0.5) {'ok' if late_req >= early_req / 2 else 'NOT MET'}"
    )
    early_ms = statistics.median(r["ms"] for r in early)
    late_ms = statistics.median(r["ms"] for r in late)
    print(
        f"  compaction ms, median: early {early_ms:.1f}, late {late_ms:.1f} "
        f"(late/early {late_ms / early_ms:.2f}, target <= 2) {'ok' if late_ms <= 2 * early_ms else 'NOT MET'}"
    )
    for name in ("tail relief", "users folded"):
        fired = [r for r in rows if name in r["tiers"]]
        in_late = sum(r in late for r in fired)
        print(f"  {name}: {len(fired)} of {len(rows)} compactions, {in_late} of the late {len(late)}")
    for line in broken[:5]:
        print("  " + line)
    return 0


def _tiers(rules: dict[str, int]) -> str:
    """Which promise gave way: tail relief (tier 3) cut outputs of the last steps, tier 4 folded users."""
    named = {"tail_relief": "tail relief", "user_messages_folded": "users folded"}
    return ", ".join(label for key, label in named.items() if rules.get(key)) or "-"


if __name__ == "__main__":
    sys.exit(main())
