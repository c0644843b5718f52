"""Does one compaction cost time linear in the session, whatever its shape? (DEVELOPERS.md: cost linear in
the input whatever the role of a message; an agent run can be one user turn with hundreds of tool calls.)

    .venv/bin/python bench/bench_scaling.py [--sizes 2000,4000,8000] [--repeat 3]

Each shape is built at each size and compacted once per repeat (force, 65,536 window); the median CPU
seconds are printed with the growth per doubling of the size. Linear cost doubles (2x); quadratic
quadruples. A shape whose growth per doubling exceeds 2.6x is marked SUPERLINEAR.

Shapes (size n):
- steps: one user turn and n tool steps (a call and its result, each path and error distinct);
- parallel: one assistant message with n tool calls, then their n results;
- users: n user messages;
- chat: n user questions, each with its answer.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from timmy_compactor.core.pipeline import compact
from timmy_compactor.core.types import Settings

Message = dict[str, Any]
SUPERLINEAR = 2.6  # growth per doubling above which the cost is not linear (noise stays well under it)


def _call(k: int) -> dict[str, Any]:
    arguments = json.dumps({"command": f"cat /src/pkg{k % 97}/mod{k}.py"})
    return {"id": f"c{k}", "type": "function", "function": {"name": "terminal", "arguments": arguments}}


def _result(k: int) -> Message:
    output = "line\n" * 20 + f"ValueError: bad value {k} in /src/pkg{k % 97}/mod{k}.py"
    return {"role": "tool", "tool_call_id": f"c{k}", "content": json.dumps({"output": output, "exit_code": 1})}


def steps(n: int) -> list[Message]:
    out: list[Message] = [{"role": "user", "content": "fix the failing tests"}]
    for k in range(n):
        out += [{"role": "assistant", "content": "", "tool_calls": [_call(k)]}, _result(k)]
    return out


def parallel(n: int) -> list[Message]:
    head: list[Message] = [{"role": "user", "content": "read every module"}]
    head.append({"role": "assistant", "content": "", "tool_calls": [_call(k) for k in range(n)]})
    return [*head, *(_result(k) for k in range(n)), {"role": "assistant", "content": "done"}]


def users(n: int) -> list[Message]:
    return [{"role": "user", "content": f"question {k} about /src/m{k}.py at v1.{k}.0"} for k in range(n)]


def chat(n: int) -> list[Message]:
    out: list[Message] = []
    for k in range(n):
        out += [{"role": "user", "content": f"question {k}"}, {"role": "assistant", "content": f"see /a/b{k}.py"}]
    return out


SHAPES: dict[str, Callable[[int], list[Message]]] = {"steps": steps, "parallel": parallel, "users": users, "chat": chat}


def median_cpu(messages: list[Message], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.process_time()
        result = compact(messages, Settings(context_window=65_536), force=True)
        times.append(time.process_time() - start)
        assert result.report.verified or result.report.failure, "a compaction neither verified nor failed"
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="2000,4000,8000")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    print(f"{'shape':>9} " + " ".join(f"{f'n={size:,}':>10}" for size in sizes) + "  growth per doubling")
    for name, build in SHAPES.items():
        seconds = [median_cpu(build(size), args.repeat) for size in sizes]
        doublings = [
            (b / a) ** (1 / math.log2(y / x)) if a > 0 else 0.0
            for (a, b), (x, y) in zip(itertools.pairwise(seconds), itertools.pairwise(sizes), strict=True)
        ]
        worst = max(doublings, default=0.0)
        verdict = "SUPERLINEAR" if worst > SUPERLINEAR else "linear"
        growth = ", ".join(f"{d:.2f}x" for d in doublings)
        print(f"{name:>9} " + " ".join(f"{s:>9.2f}s" for s in seconds) + f"  {growth}  {verdict}")


if __name__ == "__main__":
    main()
