"""Benchmark the pure core: median compact() time per session size, against json load+dump.

    .venv/bin/python bench/bench_engine.py [--repeat 7]

For sessions of 8k, 32k, 128k and 512k estimated tokens it prints the median time of
`compact(force=True)` on the parsed session, the median time of `json.loads` + `json.dumps` of the
same session text measured in the same run (the baseline), their ratio, the cost per 1k tokens
(flat = linear growth), and peak memory (tracemalloc) of each.
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
from sessions import make_session

from timmy_compactor.core.pipeline import compact
from timmy_compactor.core.types import Settings

SIZES = (8_000, 32_000, 128_000, 512_000)


def median_ms(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
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
    args = parser.parse_args()
    print(
        f"{'tokens':>8} {'msgs':>5} {'MB':>6} {'compact ms':>11} {'json ms':>8} {'ratio':>6} "
        f"{'ms/1k tok':>9} {'cut':>5} {'peak MiB':>9} {'json MiB':>9}"
    )
    for size in SIZES:
        doc = make_session(size)
        text = json.dumps(doc)
        messages, prompt, tools = doc["messages"], doc["system_prompt"], doc["tools"]
        settings = Settings(context_window=size)  # the session fills its window: usage ~100 %

        def run_compact(messages=messages, prompt=prompt, tools=tools, settings=settings) -> object:  # type: ignore[no-untyped-def]
            return compact(messages, settings, system_prompt=prompt, tools=tools, force=True)

        def run_json(text=text) -> object:  # type: ignore[no-untyped-def]
            return json.dumps(json.loads(text))

        result = run_compact()
        assert result.report.verified, result.report.failure
        compact_ms = median_ms(run_compact, args.repeat)
        json_ms = median_ms(run_json, args.repeat)
        report = result.report
        print(
            f"{report.tokens_before:>8,} {len(messages):>5} {len(text) / 1e6:>6.2f} {compact_ms:>11.2f} "
            f"{json_ms:>8.2f} {compact_ms / json_ms:>6.2f} {compact_ms / report.tokens_before * 1000:>9.3f} "
            f"{1 - report.ratio:>5.0%} {peak_kib(run_compact) / 1024:>9.2f} {peak_kib(run_json) / 1024:>9.2f}"
        )


if __name__ == "__main__":
    main()
