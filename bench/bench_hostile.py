"""Cost of one compaction whose middle holds one assistant message full of refs (issue 32: text full of
paths was quadratic: a substring search over the whole text once per ref).

    .venv/bin/python bench/bench_hostile.py [--words 30000,60000,120000] [--repeat 3]

Prints the median CPU seconds per size and the ratio to the smallest size: linear cost keeps the ratio
near the size ratio (4× the words, ~4× the time); quadratic would square it. Beside it, the baseline
measured in the same run: the same text as a tool output (target: the assistant message ≤ 10× it).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from timmy_compactor.core.pipeline import compact
from timmy_compactor.core.types import Settings


def session(words: int, *, as_tool_output: bool = False) -> list[dict[str, Any]]:
    rng = random.Random(1)
    kinds = ("path/to/file.py{i}", "x=1", "http://example.com/a{i}", "src/mod{m}/x.py")
    text = " ".join(rng.choice(kinds).format(i=i, m=i % 500) for i in range(words))

    def step(k: int) -> list[dict[str, Any]]:
        call = {"id": f"c{k}", "type": "function", "function": {"name": "terminal", "arguments": '{"command": "ls"}'}}
        result = json.dumps({"output": "line\n" * 400, "exit_code": 0})
        return [
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{k}", "content": result},
        ]

    middle: list[dict[str, Any]] = [{"role": "assistant", "content": text}]
    if as_tool_output:
        call = {"id": "big", "type": "function", "function": {"name": "terminal", "arguments": '{"command": "ls"}'}}
        middle = [
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "big", "content": json.dumps({"output": text, "exit_code": 0})},
        ]
    return [{"role": "user", "content": "go"}, *step(0), *middle, *(m for k in range(1, 40) for m in step(k))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--words", default="30000,60000,120000")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    sizes = [int(w) for w in args.words.split(",")]
    medians = []
    for words in sizes:
        messages = session(words)
        medians.append(_median_cpu(messages, args.repeat))
        baseline = _median_cpu(session(words, as_tool_output=True), args.repeat)
        chars = len(messages[3]["content"])
        print(
            f"{words:>8,} words ({chars / 1e6:.1f} MB): {medians[-1]:.2f} s CPU, ×{medians[-1] / medians[0]:.1f}"
            f" · as a tool output {baseline:.2f} s, assistant/tool ×{medians[-1] / baseline:.1f}"
        )


def _median_cpu(messages: list[dict[str, Any]], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.process_time()
        result = compact(messages, Settings(context_window=65_536), force=True)
        times.append(time.process_time() - start)
        assert result.report.verified, result.report.failure
    return statistics.median(times)


if __name__ == "__main__":
    main()
