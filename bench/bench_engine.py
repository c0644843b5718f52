"""Benchmark the pure core: median compact() time per session size, against json load+dump.

    .venv/bin/python bench/bench_engine.py [--repeat 7] [--cpu]

For generated sessions of 8k, 32k, 128k and 512k estimated tokens, each filling its window, and for
real runs joined one after another (`bench_long.joined`: ~150k and ~500k tokens) in a 65,536 window --
sessions the fold tier must fold into the anchor index -- it prints the median time of
`compact(force=True)` on the parsed session (cold: nothing read before, the engine's caches emptied), the median time of
`json.loads` + `json.dumps` of the same session text measured in the same run (the baseline), their
ratio, the cost per 1k tokens (flat = linear growth), whether it folded, and peak memory (tracemalloc).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_long import joined
from sessions import make_session

from timmy_compactor.core.pipeline import compact
from timmy_compactor.core.types import Settings

SIZES = (8_000, 32_000, 128_000, 512_000)
JOINED = (150_000, 500_000)
WINDOW = 65_536


CLOCK = time.perf_counter


def cold_caches() -> None:
    """Empty every module-level cache of the engine (`functools.lru_cache`): each timed compaction starts as
    a one-shot one, with nothing a previous run of the same session left behind."""
    for name, module in list(sys.modules.items()):
        if name.startswith("timmy_compactor"):
            for value in vars(module).values():
                if callable(getattr(value, "cache_clear", None)):
                    value.cache_clear()


def median_ms(fn: Callable[[], object], repeat: int, before: Callable[[], None] = lambda: None) -> float:
    times = []
    for _ in range(repeat):
        before()
        start = CLOCK()
        fn()
        times.append((CLOCK() - start) * 1000)
    return statistics.median(times)


def peak_kib(fn: Callable[[], object]) -> float:
    tracemalloc.start()
    fn()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak / 1024


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--cpu", action="store_true", help="CPU time of this process (a busy machine skews wall time)")
    args = parser.parse_args()
    global CLOCK  # noqa: PLW0603 -- one switch for every measurement of the run
    CLOCK = time.process_time if args.cpu else time.perf_counter
    print(
        f"{'tokens':>8} {'msgs':>5} {'MB':>6} {'compact ms':>11} {'json ms':>8} {'ratio':>6} "
        f"{'ms/1k tok':>9} {'cut':>5} {'fold':>5} {'peak MiB':>9} {'json MiB':>9}  session"
    )
    cases = [(make_session(size), Settings(context_window=size), f"generated, window {size:,}") for size in SIZES]
    cases += [
        (joined(size), Settings(context_window=WINDOW), f"real runs joined, window {WINDOW:,}") for size in JOINED
    ]
    for doc, settings, label in cases:
        text = json.dumps(doc)
        messages, prompt, tools = doc["messages"], doc["system_prompt"], doc["tools"]

        def run_compact(messages=messages, prompt=prompt, tools=tools, settings=settings) -> object:  # type: ignore[no-untyped-def]
            return compact(messages, settings, system_prompt=prompt, tools=tools, force=True)

        def run_json(text=text) -> object:  # type: ignore[no-untyped-def]
            return json.dumps(json.loads(text))

        result = run_compact()
        assert result.report.verified, result.report.failure
        compact_ms = median_ms(run_compact, args.repeat, before=cold_caches)
        json_ms = median_ms(run_json, args.repeat)
        report = result.report
        folded = "yes" if report.rules.get("fold_steps") else "no"
        print(
            f"{report.tokens_before:>8,} {len(messages):>5} {len(text) / 1e6:>6.2f} {compact_ms:>11.2f} "
            f"{json_ms:>8.2f} {compact_ms / json_ms:>6.2f} {compact_ms / report.tokens_before * 1000:>9.3f} "
            f"{1 - report.ratio:>5.0%} {folded:>5} {peak_kib(run_compact) / 1024:>9.2f} "
            f"{peak_kib(run_json) / 1024:>9.2f}  {label}"
        )


if __name__ == "__main__":
    main()
