"""What leaves the view when the anchor index condenses, and how much of it recurs later (issue 30, item 5).

The long multi-task replay of `bench_long` (real runs one after another) is compacted as Hermes drives
the engine. At every compaction whose index condenses a range it did not condense before, the values
the engine promises for the messages of that range -- key error lines (as printed), error templates,
paths and ids, read by the engine's `fold.anchors` -- are sorted into:

- left view: in the index before the condensing, in no message of the view after it (one recall away);
- of which recur later: a message after the condensed range (folded or not) holds the same value;
- of which silently: no message of the view names it (the recurrence hidden, not said).

A template is in a text when the exemplar of any message of that template is (as the index shows it).

    PYTHONPATH=. .venv/bin/python bench/bench_condense.py [--tokens 1000000] [--window 65536]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_long import index_chars, joined

from timmy_compactor.compare.promises import condensed_ranges
from timmy_compactor.core.facts import RawFacts
from timmy_compactor.core.fold.anchors import anchors_of
from timmy_compactor.core.fold.errors import TEMPLATE_CHARS
from timmy_compactor.core.fold.index import INDEX_HEADER
from timmy_compactor.core.keylines import template
from timmy_compactor.core.pipeline import compact
from timmy_compactor.core.readings import Readings
from timmy_compactor.core.redact import redact_text
from timmy_compactor.core.tokens import request_tokens
from timmy_compactor.core.types import Settings
from timmy_compactor.sessions.rawlog import RawLog

KINDS = ("key line", "template", "path", "id")


def values(facts: RawFacts, i: int) -> Iterable[tuple[str, str, str]]:
    """(kind, key, shown) of what message `i` holds."""
    anchors = anchors_of(facts, i)
    for line in anchors.key_lines:
        shown = redact_text(str(line))
        yield "key line", shown, shown
        yield "template", template(line.text), shown
    for line in anchors.error_lines:
        yield "template", template(line), redact_text(line)[:TEMPLATE_CHARS]
    for ref in anchors.refs:
        yield "path", redact_text(ref), redact_text(ref)
    for identifier in anchors.identifiers:
        yield "id", redact_text(identifier), redact_text(identifier)


def view_text(messages: list[dict[str, Any]]) -> str:
    return "\n".join(str(m.get("content")) + json.dumps(m.get("tool_calls") or "") for m in messages)


def measure(raw: list[dict[str, Any]], newly: list[int], before: str, after: str) -> Counter[str]:
    """The values of the messages `newly` condensed: what left the view, what of it recurs, silently."""
    facts = RawFacts(raw)
    shown: dict[tuple[str, str], set[str]] = {}
    later: set[tuple[str, str]] = set()
    for i in range(len(raw)):
        for kind, key, text in values(facts, i):
            shown.setdefault((kind, key), set()).add(text)
            if i > newly[-1]:
                later.add((kind, key))
    counts: Counter[str] = Counter()
    condensed = {(kind, key) for i in newly for kind, key, _ in values(facts, i)}
    for kind, key in condensed:
        texts = shown[kind, key]
        if not any(t in before for t in texts) or any(t in after for t in texts):
            continue
        counts[f"{kind} left"] += 1
        counts[f"{kind} recurs"] += (kind, key) in later
    named = {(k, key) for (k, key), texts in shown.items() if any(t in after for t in texts)}
    for kind, key in later & condensed:  # a recurrence the view does not name at all
        counts[f"{kind} silent"] += (kind, key) not in named and any(t in before for t in shown[kind, key])
    return counts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=1_000_000)
    parser.add_argument("--window", type=int, default=65_536)
    args = parser.parse_args()
    settings = Settings(context_window=args.window)
    data = joined(args.tokens)
    system_prompt, tools, messages = data["system_prompt"], data["tools"], data["messages"]
    log, readings = RawLog(), Readings()
    context: list[dict[str, Any]] = []
    covered: set[int] = set()
    before = ""
    total: Counter[str] = Counter()
    events = failed = 0
    worst_index = 0.0
    trigger = settings.trigger_threshold * args.window
    for message in messages:
        if message.get("role") == "assistant" and context and request_tokens(context, system_prompt, tools) >= trigger:
            raw = log.absorb(context)
            result = compact(raw, settings, system_prompt=system_prompt, tools=tools, force=True, readings=readings)
            failed += not result.compacted
            log.answered(result.messages)
            context = list(result.messages)
            worst_index = max(worst_index, index_chars(context) / 4 / args.window)
            index = next((str(m["content"]) for m in context if str(m["content"]).startswith(INDEX_HEADER)), "")
            now = condensed_ranges(index)
            if newly := sorted(now - covered):
                events += 1
                counts = measure(list(raw), newly, before, view_text(context))
                total += counts
                print(f"condensing {events} (#{newly[0]}–#{newly[-1]} of {len(raw)} raw): " + _row(counts))
            covered, before = now, index
        context.append(message)
    print(
        f"\n{events} condensings over {len(messages)} messages, {failed} compactions failed or unverified; "
        f"index at most {worst_index:.3f} of the window"
    )
    print("all: " + _row(total))
    return 0


def _row(counts: Counter[str]) -> str:
    return "; ".join(
        f"{kind}s {counts[f'{kind} left']} left view, {counts[f'{kind} recurs']} recur later, "
        f"{counts[f'{kind} silent']} silently"
        for kind in KINDS
    )


if __name__ == "__main__":
    sys.exit(main())
