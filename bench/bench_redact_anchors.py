"""The redaction a one-shot compaction does: every `redact_text` call of `compact(force=True)` on the real
runs joined (`bench_long.joined`, ~157k tokens, window 65,536), timed alone and inside the compaction.

    .venv/bin/python bench/bench_redact_anchors.py [--tokens 150000] [--repeat 31]

The inputs are collected from one compaction (the calls of each module that redacts: the anchor reader's
`RawFacts.redacted` and `fold.kept`, an outcome's first line...). Printed: per caller and size (short:
<= 500 characters), the number of texts, their characters and the median and least ms of redacting them
all once; then the ms of redaction inside `--repeat` compactions (median and least; the calls are timed
where they are made, so caches and the rest of the compaction's work weigh on them as they do there) and
the compaction's median ms. CPU time of this process (a busy machine skews wall time less).
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_long import joined

from timmy_compactor.core import fold, redact
from timmy_compactor.core.pipeline import compact
from timmy_compactor.core.types import Settings

CLOCK = time.process_time
Calls = list[tuple[str, str, bool]]  # (caller, text, ips)


def callers() -> list[Any]:
    """The modules of the core that call `redact_text` by the name they imported."""
    packages = (importlib.import_module("timmy_compactor.core"), fold)
    modules = [
        importlib.import_module(f"{p.__name__}.{m.name}") for p in packages for m in pkgutil.iter_modules(p.__path__)
    ]
    return [m for m in modules if m is not redact and getattr(m, "redact_text", None) is redact.redact_text]


def wrapped(modules: list[Any], spy: Callable[[str, str, bool], None]) -> None:
    for module in modules:
        name = module.__name__.rsplit(".", 1)[-1]

        def call(text: str, *, ips: bool = True, name: str = name) -> str:
            return spy(name, text, ips)  # type: ignore[func-returns-value]

        module.redact_text = call


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokens", type=int, default=150_000)
    parser.add_argument("--repeat", type=int, default=31)
    args = parser.parse_args()
    doc = joined(args.tokens)
    settings = Settings(context_window=65_536)
    modules = callers()

    def run() -> object:
        return compact(doc["messages"], settings, system_prompt=doc["system_prompt"], tools=doc["tools"], force=True)

    calls: Calls = []

    def collect(name: str, text: str, ips: bool) -> str:
        calls.append((name, text, ips))
        return redact.redact_text(text, ips=ips)

    fold.kept._redacted.cache_clear()
    wrapped(modules, collect)  # type: ignore[arg-type]
    run()
    groups: dict[str, Calls] = {}
    for call in calls:
        groups.setdefault(f"{call[0]}, {'short' if len(call[1]) <= 500 else 'long'}", []).append(call)
    groups["all"] = calls
    print(f"{'redact_text on':>18} {'texts':>6} {'chars':>8} {'median ms':>10} {'least ms':>9}")
    for label, group in groups.items():
        times = []
        for _ in range(args.repeat):
            start = CLOCK()
            for _, text, ips in group:
                redact.redact_text(text, ips=ips)
            times.append((CLOCK() - start) * 1000)
        chars = sum(len(text) for _, text, _ in group)
        print(f"{label:>18} {len(group):>6} {chars:>8,} {statistics.median(times):>10.2f} {min(times):>9.2f}")
    spent = [0.0]

    def timed(name: str, text: str, ips: bool) -> str:
        start = CLOCK()
        out = redact.redact_text(text, ips=ips)
        spent[0] += CLOCK() - start
        return out

    wrapped(modules, timed)  # type: ignore[arg-type]
    inside, whole = [], []
    for _ in range(args.repeat):
        spent[0] = 0.0
        start = CLOCK()
        run()
        whole.append((CLOCK() - start) * 1000)
        inside.append(spent[0] * 1000)
    print(
        f"inside the compaction: redaction median {statistics.median(inside):.2f} ms, least {min(inside):.2f} ms; "
        f"compaction median {statistics.median(whole):.1f} ms"
    )


if __name__ == "__main__":
    main()
