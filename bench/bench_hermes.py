"""Hermes as its users run it: the same scripts under Hermes' compressor, `timmy` and never compacting.

    .venv/bin/python bench/bench_hermes.py [--turns 14] [--long-calls 60] [--trigger 0.6,0.75,0.85/0.5/0.2]
        [--arms compressor,timmy,never] [--scenarios conversation,long] [--json] [--dump DIR]
        [--prefill-tps 600] [--decode-tps 23] [--summary-tokens 1200] [--time-scale 0]

Real hermes-agent 0.19.0, one process per arm and script, talks to a scripted OpenAI-compatible server
on 127.0.0.1 (`tests/fake_llm.py`) with a 64,000-token window and the toolsets its CLI sends
(`platform_toolsets` of `cli`: 17 schemas, 9.5k tokens by Hermes' estimate, 11.2k with the system
prompt; with `timmy` enabled the CLI adds the `context_engine` toolset, so `timmy_recall` is the
18th). The scripts (`tests/hermes_scenario.py`):
`conversation`, `--turns` user turns of three ~12k–17k-character tool outputs each; `long`, one user
message whose `--long-calls` tool outputs total ≥ 3× the window. Both print key error lines: a Python
traceback (exit 1), a failing command (exit 2), an `ERROR` line in a log that exits 0, a command
Hermes' terminal tool times out (exit 124). Hermes' compressor gets summaries of `--summary-tokens`.

Arms: `compressor` (Hermes' own), `timmy` (the packaged defaults), `timmy T[/A[/R]]` for each `--trigger`
value (trigger_threshold T and, if given, target_after A and max_tail_ratio R, through a
TIMMY_COMPACTOR_CONFIG file; an empty A keeps its default: `0.6//0.2`), and
`never` (`compression.enabled: false`, the same window: when it goes above the window, its figures
are what it would prefill; a real server would refuse those requests).

Every figure is read from the requests the scripted server received. A request is read as a model
server reads it: the tool schemas, then each message (system prompt first), as JSON; tokens are its
characters / 4. The conversation's requests are those ending in a tool result or one of the script's
user messages; the others are Hermes' own (summaries, titles, background reviews).

- compactions: requests of the conversation whose messages (system prompt aside) do not start with
  the previous request's; back to back: two such requests in a row. summary requests: Hermes' asks.
- prompt tokens: every request, summaries and other requests included.
- prefix reuse: mean share of a conversation request that is a common prefix with the one before.
- prefill with a prefix cache: each request's tokens less its longest common prefix with the
  conversation's previous request (other requests, which Hermes' background threads send in no fixed
  order: with any request received before them). Never compacting's prefill is the floor: every
  request's new content, the new output every engine must send included; `÷ floor` divides by it.
- cost with cache prices, in uncached input tokens (1×): a request's common prefix (as above) is a
  cache read at 0.1×, the rest is written to the cache at 1.25× (every request, summaries included);
  output tokens are not priced (they are in the local time).
- local time: the prefill above at --prefill-tps plus each reply's tokens at --decode-tps, summaries
  included: what a local model with a prefix cache would take.
- max request / over window: Hermes' own estimate of a request (what the triggers compare).
- missing a user message: requests lacking, verbatim, one of the user messages sent so far.
- last 3 steps not whole: requests in which one of the last 3 tool-calling steps (a text answer is not
  one), call or result, differs from what was first sent; `would fit`: of those, the ones that with
  those steps whole would still have been under the arm's trigger.
- orphans: requests holding a tool call without its result or a result without its call.
- key error lines: pairs (request, line the script printed before it) where the line is not in the
  request's text; `not one recall away`: of those, the ones a `timmy_recall` query on the engine's raw
  log does not find (the compressor and never compacting have no recall).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.hermes_scenario import Arm, Prices, measure, run_arm

ROWS = [
    ("requests", "requests of the conversation"),
    ("other_requests", "other requests"),
    ("compactions", "compactions"),
    ("compactions_back_to_back", "  back to back"),
    ("summary_requests", "summary requests"),
    ("prompt_tokens", "prompt tokens"),
    ("prefix_reuse", "prefix reuse"),
    ("prefill_tokens", "prefill with a prefix cache"),
    ("prefill_vs_floor", "  ÷ floor"),
    ("cost", "cost with cache prices"),
    ("cost_vs_compressor", "  ÷ compressor"),
    ("local_s", "local time, s"),
    ("max_request_tokens", "max request (tokens)"),
    ("requests_over_window", "requests over the window"),
    ("missing_user_message", "missing a user message"),
    ("last3_not_whole", "last 3 steps not whole"),
    ("last3_not_whole_would_fit", "  would fit"),
    ("requests_with_orphans", "requests with orphans"),
    ("key_lines", "key error lines printed"),
    ("key_line_misses_in_request", "  misses in the request"),
    ("key_line_misses_not_one_recall_away", "  not one recall away"),
]


def arms(args: argparse.Namespace) -> list[Arm]:
    """The arms; `timmy` alone is the packaged defaults (inside Hermes: Hermes' own threshold for the
    window), each --trigger value `T[/A[/R]]` a config file that sets hermes.trigger_threshold and,
    when given, compaction.target_after and compaction.max_tail_ratio."""
    chosen: list[Arm] = []
    for name in args.arms.split(","):
        chosen.append(Arm(name))
        if name != "timmy":
            continue
        for item in filter(None, (args.trigger or "").split(",")):
            values = [float(v) if v else None for v in item.split("/")]
            if len(values) > 3 or values[0] is None:
                raise SystemExit(f"--trigger {item!r}: expected T[/A[/R]]")
            chosen.append(Arm("timmy", *values))
    return chosen


def run(arm: Arm, scenario: str, args: argparse.Namespace, prices: Prices) -> dict[str, Any]:
    size = {"turns": args.turns} if scenario == "conversation" else {"long_calls": args.long_calls}
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        speeds = {"prefill_tps": args.prefill_tps, "decode_tps": args.decode_tps, "time_scale": args.time_scale}
        outcome = run_arm(arm, Path(tmp), summary_chars=args.summary_tokens * 4, **speeds, **size)
        wall = time.perf_counter() - start
    if args.dump:
        args.dump.mkdir(parents=True, exist_ok=True)
        with (args.dump / f"{scenario}-{arm.name.replace(' ', '-').replace('/', '_')}.jsonl").open("w") as out:
            out.writelines(json.dumps(body, ensure_ascii=False) + "\n" for body in outcome.run.requests)
    figures = measure(outcome.run, prices)
    tools = {t["function"]["name"] for body in outcome.run.requests if body.get("tools") for t in body["tools"]}
    reports = [c["report"] or {} for c in outcome.result.get("compactions", [])]
    figures |= {
        "tool_schemas": len(tools),
        "recall_offered": "timmy_recall" in tools,
        "wall_s": round(wall, 1),
        "engine_says": {
            "compression_count": outcome.result["compression_count"],
            "compress_calls": len(reports),
            "tiers": [tiers(r) for r in reports if r],
        },
    }
    return figures


def tiers(report: dict[str, Any]) -> dict[str, Any]:
    """What one timmy compaction did, as its own report says (for reading broken promises)."""
    lossy = {k: v for k, v in report.get("rules", {}).items() if k in LOSSY and v}
    return {
        "usage_before": report.get("usage_before"),
        "usage_after": report.get("usage_after"),
        "lossy": lossy,
        "note": report.get("note"),
    }


LOSSY = ("tail_relief", "user_messages_folded", "last_step_truncated")


def ratios(results: dict[str, dict[str, Any]]) -> None:
    floor = results.get("never", {}).get("prefill_tokens")
    compressor = results.get("compressor", {}).get("cost")
    for figures in results.values():
        figures["prefill_vs_floor"] = round(figures["prefill_tokens"] / floor, 3) if floor else None
        figures["cost_vs_compressor"] = round(figures["cost"] / compressor, 3) if compressor else None


def table(scenario: str, results: dict[str, dict[str, Any]], args: argparse.Namespace) -> str:
    size = f"{args.turns} turns" if scenario == "conversation" else f"one turn of {args.long_calls} tool calls"
    lines = [f"## {scenario} ({size}, window 64,000, CLI toolsets)", ""]
    lines.append("| | " + " | ".join(results) + " |")
    lines.append("|---" * (len(results) + 1) + "|")
    for key, label in ROWS:
        cells = [_cell(figures.get(key)) for figures in results.values()]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    never = results.get("never")
    if never and never["requests_over_window"]:
        lines.append(
            f"\nNever compacting goes above the window in {never['requests_over_window']} of {never['requests']} "
            f"requests (up to {never['max_request_tokens']:,} tokens): its figures (the floor) are what it would "
            "prefill; a real server would refuse those requests."
        )
    for name, figures in results.items():
        broken = {k: v for k, v in figures["where"].items() if v and k != "compactions"}
        lossy = [(k, t) for k, t in enumerate(figures["engine_says"]["tiers"]) if t["lossy"]]
        if broken or lossy:
            lines.append(f"\n{name}: requests (0-based, among the conversation's) {json.dumps(broken)}")
        for k, t in lossy:
            lines.append(
                f"  compaction {k + 1} at request {figures['where']['compactions'][k : k + 1]}: {json.dumps(t)}"
            )
    return "\n".join(lines)


def _cell(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.3f}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=14)
    parser.add_argument("--long-calls", type=int, default=60, help="tool calls of the long single turn")
    parser.add_argument("--arms", default="compressor,timmy,never")
    parser.add_argument(
        "--trigger",
        help="timmy also at these trigger_threshold[/target_after[/max_tail_ratio]] values: 0.6,0.85/0.5,0.6/0.4/0.2",
    )
    parser.add_argument("--scenarios", default="conversation,long")
    parser.add_argument("--decode-tps", type=float, default=23.0)
    parser.add_argument("--prefill-tps", type=float, default=600.0)
    parser.add_argument("--summary-tokens", type=int, default=1200)
    parser.add_argument("--time-scale", type=float, default=0.0, help="the server sleeps this share of model time")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--dump", type=Path, help="write each arm's requests here (JSON lines)")
    args = parser.parse_args()
    prices = Prices(prefill_tps=args.prefill_tps, decode_tps=args.decode_tps)
    everything: dict[str, dict[str, Any]] = {}
    for scenario in args.scenarios.split(","):
        results = {arm.name: run(arm, scenario, args, prices) for arm in arms(args)}
        ratios(results)
        everything[scenario] = results
        if not args.json:
            print(table(scenario, results, args) + "\n", flush=True)
    if args.json:
        print(json.dumps(everything, indent=1))


if __name__ == "__main__":
    main()
