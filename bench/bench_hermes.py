"""The same scripted Hermes conversation under the `timmy` engine and under Hermes' own compressor.

    .venv/bin/python bench/bench_hermes.py [--turns 8] [--decode-tps 23] [--prefill-tps 600] [--summary-tokens 1200]

Real hermes-agent 0.19.0 talks to a scripted OpenAI-compatible server on 127.0.0.1 that simulates a
local model: it sleeps for prefill (request tokens / prefill tok/s) and decode (reply tokens /
decode tok/s; seed 000's machine decodes ~23 tok/s), and writes summaries of `--summary-tokens`
when Hermes asks for one. A 64,000-token window, three large tool outputs per turn. Prints model
requests, summary requests, tokens sent to the model, time spent compacting, simulated model time
and the session time a real local model would take (wall time with the model's sleeps scaled back
to real time; `--time-scale` only shortens the run) for each engine, the mean prefix reuse between
consecutive model requests and the tokens a prefix cache would still prefill (summary requests
included), and the ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.fake_llm import FakeLLM, scripted_turn
from tests.test_hermes_e2e import hermes_home, run_hermes


def script(body: dict) -> object:  # type: ignore[type-arg]
    turn, step = scripted_turn(body)
    if step < 3:
        return [("terminal", {"command": f"seq 1 {2500 + 10 * turn + step}"})]
    return f"Turn {turn} done: the last number was {2500 + 10 * turn + 2}."


def run(timmy: bool, args: argparse.Namespace) -> dict[str, float]:
    turns = [
        f"Turn {k}: count to 2500 three times with seq and tell me the last number." for k in range(1, args.turns + 1)
    ]
    with (
        tempfile.TemporaryDirectory() as tmp,
        FakeLLM(
            script,
            decode_tps=args.decode_tps,
            prefill_tps=args.prefill_tps,
            summary_chars=args.summary_tokens * 4,
            time_scale=args.time_scale,
        ) as llm,
    ):
        root = Path(tmp)
        (root / "work").mkdir()
        home = hermes_home(root, llm.base_url, timmy=timmy)
        start = time.perf_counter()
        result = run_hermes(home, root / "work", llm, "bench", turns)
        wall = time.perf_counter() - start
        requests = list(llm.requests)
        main_requests = llm.main_requests()
        status = result["status"]
    if args.dump:
        args.dump.mkdir(parents=True, exist_ok=True)
        with (args.dump / f"{'timmy' if timmy else 'compressor'}.jsonl").open("w", encoding="utf-8") as out:
            out.writelines(json.dumps(body) + "\n" for body in main_requests)
    reuse, prefill = prefix_cache(main_requests)
    return {
        "requests": len(requests),
        "summary_requests": len(llm.summary_requests()),
        "tokens_sent": sum(len(json.dumps(r.get("messages", []))) for r in requests) / 4,
        "compaction_ms": status.get("compaction_ms_total", float("nan")),
        "compressions": result["compression_count"],
        "model_s": llm.simulated_s,
        "wall_s": wall,
        "session_s": wall - llm.simulated_s * args.time_scale + llm.simulated_s,
        "prefix_reuse": reuse,
        "prefill_tokens": prefill + sum(len(json.dumps(r.get("messages", []))) / 4 for r in llm.summary_requests()),
    }


def prefix_cache(requests: list[dict]) -> tuple[float, float]:  # type: ignore[type-arg]
    """Mean share of each request's messages (JSON characters) that is a prefix of the one before, and
    the tokens a prefix cache would still prefill over the whole run (chars / 4)."""
    shares, prefill, previous = [], 0.0, ""
    for body in requests:
        current = json.dumps(body.get("messages", []), ensure_ascii=False)
        shared = len(os.path.commonprefix([previous, current])) if previous else 0  # noqa: RUF071 -- characters
        if previous:
            shares.append(shared / len(current) if current else 1.0)
        prefill += (len(current) - shared) / 4
        previous = current
    return (sum(shares) / len(shares) if shares else 1.0), prefill


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=8)
    parser.add_argument("--decode-tps", type=float, default=23.0)
    parser.add_argument("--prefill-tps", type=float, default=600.0)
    parser.add_argument("--summary-tokens", type=int, default=1200)
    parser.add_argument("--dump", type=Path, help="write each engine's model requests here (JSON lines)")
    parser.add_argument("--time-scale", type=float, default=0.02, help="sleep this share of the simulated model time")
    args = parser.parse_args()
    results = {name: run(name == "timmy", args) for name in ("timmy", "compressor")}
    keys = [
        "requests",
        "summary_requests",
        "compressions",
        "tokens_sent",
        "prefix_reuse",
        "prefill_tokens",
        "compaction_ms",
        "model_s",
        "session_s",
    ]
    print(f"{'':12}" + "".join(f"{k:>17}" for k in keys))
    for name, r in results.items():
        print(f"{name:12}" + "".join(f"{r[k]:>17,.2f}" if k == "prefix_reuse" else f"{r[k]:>17,.1f}" for k in keys))
    t, c = results["timmy"], results["compressor"]
    print(f"{'ratio t/c':12}" + "".join(f"{(t[k] / c[k] if c[k] else float('nan')):>17.2f}" for k in keys))


if __name__ == "__main__":
    main()
