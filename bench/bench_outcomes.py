"""What the views say of how tasks ended, and how many stale outputs became headers (issue 30, items 3-4).

    PYTHONPATH=. .venv/bin/python bench/bench_outcomes.py [SESSION_OR_DIR …] [--window N …] [--rules-only]

Per session and window (compactions forced, as bench_templates does): the tasks a user message closed
after they did work, how many of them the view says the end of (a fold line naming a patch, an answer, a
failing or last command), the tool outputs the view shows as superseded headers, and the cut (for the
runs at or above the trigger). `--rules-only` compacts with `target_after: null` (no fold), where every
stale output of the middle is still there to become a header. Run it with PYTHONPATH pointing at another
checkout to compare.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sessions import session_files

from timmy_compactor.core.pipeline import compact
from timmy_compactor.core.types import Settings

DEFAULT_PATHS = ("/work/shared/corpus", "/work/shared/samples")
_ENDED = re.compile(r"; (?:submitted|answered #|last command failed|stopped after)")
_HEADER = re.compile(r"(?:run|read) again at #\d+")


def closed_tasks(messages: list[dict[str, Any]]) -> int:
    """User messages that close a turn in which a tool was called."""
    count, worked, opened = 0, False, False
    for message in messages:
        if message.get("role") == "user":
            count += opened and worked
            opened, worked = True, False
        elif message.get("tool_calls"):
            worked = True
    return count


def measure(doc: dict[str, Any], settings: Settings) -> tuple[int, int, int, float | None]:
    messages = doc["messages"]
    result = compact(messages, settings, system_prompt=doc.get("system_prompt"), tools=doc.get("tools"), force=True)
    assert result.report.verified, result.report.failure
    texts = [str(m.get("content")) for m in result.messages]
    ended = sum(1 for text in texts if text.startswith("[folded #") and _ENDED.search(text))
    headers = sum(len(_HEADER.findall(text)) for text in texts)
    report = result.report
    above = report.tokens_before >= settings.trigger_tokens
    return closed_tasks(messages), ended, headers, 1 - report.ratio if above else None


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("paths", nargs="*", default=list(DEFAULT_PATHS))
    parser.add_argument("--window", type=int, action="append")
    parser.add_argument("--rules-only", action="store_true")
    args = parser.parse_args()
    files = session_files([Path(item) for item in args.paths])
    totals = [0, 0, 0]
    cuts: list[float] = []
    print(f"{'session':<44} {'window':>7} {'tasks':>5} {'ended':>5} {'headers':>7} {'cut':>6}")
    for window in args.window or [65_536, 32_768]:
        settings = Settings(context_window=window, target_after=None if args.rules_only else 0.40)
        for path in files:
            doc = json.loads(path.read_text(encoding="utf-8"))
            tasks, ended, headers, cut = measure(doc, settings)
            totals = [totals[0] + tasks, totals[1] + ended, totals[2] + headers]
            if cut is not None:
                cuts.append(cut)
            shown = "" if cut is None else f"{cut:.1%}"
            print(f"{path.stem[8:]:<44} {window:>7} {tasks:>5} {ended:>5} {headers:>7} {shown:>6}")
    mean = sum(cuts) / len(cuts) if cuts else float("nan")
    print(f"overall: {totals[1]} of {totals[0]} closed tasks say how they ended; {totals[2]} headers; ", end="")
    print(f"mean cut above the trigger {mean:.1%} ({len(cuts)} runs)")


if __name__ == "__main__":
    main()
