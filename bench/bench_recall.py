"""Recall speed: `lookup` (by ref) and `search` (by text) on generated sessions, median of 7.

    .venv/bin/python bench/bench_recall.py

Target: an answer in ≤ 50 ms on a 500k-token session. Baseline in the same run: `json.loads` of
the session file's bytes (what any reader pays once to get at the messages).
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

from timmy_compactor.core.recall import lookup, search

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sessions import make_session


def median_ms(run: Callable[[], object], repeat: int = 7) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def main() -> int:
    print(f"{'tokens':>9} {'msgs':>6} {'ref #':>8} {'ref ms':>8} {'range ms':>9} {'grep ms':>8} {'json.loads ms':>14}")
    for size in (128_000, 512_000):
        session = make_session(size)
        messages = session["messages"]
        data = json.dumps(session).encode()
        middle = len(messages) // 2
        ref = median_ms(lambda m=messages, k=middle: lookup(m, f"#{k}"))
        span = median_ms(lambda m=messages, k=middle: lookup(m, f"#{k}-#{k + 9}"))
        grep = median_ms(lambda m=messages: search(m, "ValueError: bad value"))
        load = median_ms(lambda d=data: json.loads(d))
        print(f"{size:>9,} {len(messages):>6} {middle:>8} {ref:>8.2f} {span:>9.2f} {grep:>8.1f} {load:>14.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
