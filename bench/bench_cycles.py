"""Replay each run as Hermes drives a context engine, compacting whenever a request crosses the trigger.

Method of Hermes' own `evals/compaction/scripts/jev_cycles.py`, without its LLM: a request before every
assistant message (system prompt + tool schemas + the messages held), `compress()` when it reaches
`trigger_threshold` × window, and the conversation goes on from the returned list. Printed per run, for
the packaged defaults (`timmy`) and for the rules alone (`target_after: null`, the "keep all text"
design that ratchets): compactions, usage after each (min/max), share freed per compaction (mean/min),
stuck compactions (still at or above the trigger after), requests above the window, prompt-cache reuse
of request tokens, prefix breaks outside compactions, compactions per 100k tokens of session, prefill
over the never-compacting floor (`pf/flr`: what a prefix cache misses over the whole replay, divided by
the new messages alone), and whether every promise held at every compaction (the independent checker,
against the raw messages so far).

    .venv/bin/python bench/bench_cycles.py [--window 65536] [--json] [FILES_OR_DIRS...]

Default inputs: ../shared/corpus and ../shared/samples when present, else tests/data.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path
from typing import Any

from timmy_compactor.compare.cycles import CycleReport, replay
from timmy_compactor.core.pipeline import compact
from timmy_compactor.core.readings import Readings
from timmy_compactor.core.types import Settings
from timmy_compactor.sessions.rawlog import RawLog

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sessions import make_session, session_files

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_INPUTS = [ROOT.parent / "shared" / "corpus", ROOT.parent / "shared" / "samples"]


def sessions(inputs: list[Path]) -> list[Path]:
    return session_files(inputs) or sorted((ROOT / "tests" / "data").glob("session_*.json"))


def run(data: dict[str, Any], settings: Settings) -> tuple[CycleReport, float]:
    system_prompt, tools = data.get("system_prompt"), data.get("tools")
    spent = 0.0
    raw = RawLog()  # as the `timmy` engine does: compact from the raw messages behind Hermes' list
    readings = Readings()  # ... and keeps what it read of them across compactions

    def compress(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        nonlocal spent
        start = time.perf_counter()
        result = compact(
            raw.absorb(messages), settings, system_prompt=system_prompt, tools=tools, force=True, readings=readings
        )
        raw.answered(result.messages)
        spent += time.perf_counter() - start
        return result.messages

    report = replay(
        data["messages"],
        compress,
        window=settings.context_window,
        trigger=settings.trigger_threshold,
        system_prompt=system_prompt,
        tools=tools,
    )
    return report, spent * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("inputs", nargs="*", type=Path)
    parser.add_argument("--window", type=int, default=65_536)
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--generated",
        default="250000,1000000",
        help="also replay generated sessions of these token sizes ('' for none)",
    )
    args = parser.parse_args()
    base = Settings(context_window=args.window)
    engines = {"timmy": base, "rules_only": dataclasses.replace(base, target_after=None)}
    rows = []
    runs = [
        (path.stem.removeprefix("session_"), json.loads(path.read_text(encoding="utf-8")))
        for path in sessions(args.inputs or [p for p in DEFAULT_INPUTS if p.exists()])
    ]
    runs += [(f"generated_{int(size) // 1000}k", make_session(int(size))) for size in args.generated.split(",") if size]
    for label, data in runs:
        for name, settings in engines.items():
            report, ms = run(data, settings)
            rows.append({"session": label, "engine": name, "ms": round(ms, 1)} | report.as_dict())
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    head = f"{'session':34} {'engine':10} {'req':>4} {'cmp':>4} {'after min-max':>13} {'freed':>6} {'stuck':>5} "
    head += f"{'>win':>4} {'reuse':>6} {'ceil':>6} {'brk':>4} {'/100k':>5} {'pf/flr':>6} {'promises':>8} {'ms':>7}"
    print(head, file=sys.stdout)
    for r in rows:
        after = f"{r['usage_after_min']:.2f}-{r['usage_after_max']:.2f}" if r["compactions"] else "-"
        freed = f"{r['freed_mean']:.0%}" if r["freed_mean"] is not None else "-"
        kept = f"{r['compactions_keeping_every_promise']}/{r['compactions']}"
        print(
            f"{r['session'][:34]:34} {r['engine']:10} {r['requests']:>4} {r['compactions']:>4} {after:>13} {freed:>6} "
            f"{r['stuck']:>5} {r['above_window']:>4} {r['cache_reuse']:>6.1%} {r['cache_reuse_ceiling']:>6.1%} "
            f"{r['prefix_breaks_between_compactions']:>4} {r['compactions_per_100k']:>5} {r['prefill_vs_floor']:>6.2f} "
            f"{kept:>8} {r['ms']:>7}"
        )
    for engine in engines:
        mine = [r for r in rows if r["engine"] == engine]
        if not mine:
            continue
        total_cmp = sum(r["compactions"] for r in mine)
        print(
            f"{engine}: {len(mine)} runs, {total_cmp} compactions, stuck {sum(r['stuck'] for r in mine)}, "
            f"max usage after {max((r['usage_after_max'] or 0) for r in mine):.3f}, "
            f"above window {sum(r['above_window'] for r in mine)}, "
            f"mean cache reuse {sum(r['cache_reuse'] for r in mine) / len(mine):.1%} "
            f"(never compacting: {sum(r['cache_reuse_ceiling'] for r in mine) / len(mine):.1%}), "
            f"promises kept at {sum(r['compactions_keeping_every_promise'] for r in mine)}/{total_cmp} compactions"
        )
        compacted = [r for r in mine if r["compactions"]]
        real = [r for r in compacted if not r["session"].startswith("generated_")]
        for label, above in (("runs that compacted", compacted), ("real runs that compacted", real)):
            if not above:
                continue
            prefill = sum(r["prefill_tokens"] for r in above)
            floor = sum(r["prefill_tokens"] / r["prefill_vs_floor"] for r in above)
            print(
                f"  {engine}, {label} ({len(above)}): prefill {prefill:,.0f} tokens, "
                f"{prefill / floor:.2f}x never compacting; "
                f"{sum(r['compactions_per_100k'] for r in above) / len(above):.2f} compactions per 100k tokens (mean)"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
