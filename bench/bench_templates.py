"""How many distinct error templates a compaction keeps in view or in the anchor index (issue 30).

    PYTHONPATH=. .venv/bin/python bench/bench_templates.py [SESSION_OR_DIR …] [--window N …]

A template is an error line with its numbers, hex and ids folded (`ERROR worker #: timeout after #s`).
The error lines of a tool output are read here by a reader of this script's own (lines that start like
an error, and the line that closes a Python traceback), not by the engine's `core.keylines`, so that
what the engine does not know to read is measured too. A template is kept when the view's text (the
index included) holds its exemplar's first 100 folded characters, as printed or as redaction writes it.

Per session and window: the share of templates kept, the cut (1 - tokens after / before, for runs
compacted at the window's trigger), the index's share of the window and the tokens after ÷ the budget
the compaction aims at (`target_after`). The mean cut is printed over all runs and per folder: the agent
runs (corpus) and the Hermes files (samples), whose fixed part (system prompt and tool schemas, 13k
tokens: 16-28 % of their request) is in every request and never cut. Compactions are forced (every
session is compacted at every window), so each run's middle is folded. To compare with another version
of the engine, run this script with PYTHONPATH pointing at a copy of it (`git worktree add`/`git archive`).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sessions import session_files

from timmy_compactor.core.pipeline import compact
from timmy_compactor.core.redact import redact_text
from timmy_compactor.core.tokens import request_tokens
from timmy_compactor.core.types import Settings

DEFAULT_PATHS = ("/work/shared/corpus", "/work/shared/samples")
PREFIX_CHARS = 100
_NUMBERS = re.compile(
    r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"  # uuid
    r"|0x[0-9a-fA-F]+|\b(?=[0-9a-f]*\d)[0-9a-f]{6,}\b|\d+"
)
_START = re.compile(
    r"(?:[A-Za-z_][\w.]*(?:Error|Exception|Failure|Fault)(?::\s|:$)"
    r"|(?:error|Error|fatal|Fatal|panic)(?:\[[^\]]*\])?:|(?:ERROR|FATAL|CRITICAL|FAILED|FAIL)\b"
    r"|E {3}\S|npm ERR!|[\w.-]+: \*{3,4} |[\w./-]+:\d+(?::\d+)?: (?:error|fatal)"
    r"|\[?\d{4}-\d\d-\d\d[ T][\d:.,]+\S*\]?\s*[-|:]?\s*\[?(?:ERROR|CRITICAL|FATAL)\b)"
)
_NUMBERED = re.compile(r"\s*\d+\|")  # a line of a file read by Hermes' read_file (`12|text`)
_PHRASES = ("No module named", "command not found", "No such file or directory", "Permission denied")
_NOT = re.compile(r"(?:[+-]|\d+[:-]|[\w./-]+:\d+[:-](?! ?(?:error|fatal))|raise\b|except\b|import\b|from\b|print\(|#)")
_HEADER = "Traceback (most recent call last)"


def fold(text: str) -> str:
    return _NUMBERS.sub("#", text)


def strings(value: Any) -> list[str]:
    if isinstance(value, str):
        try:
            decoded = json.loads(value) if value.lstrip()[:1] in ("{", "[") else None
        except ValueError:
            decoded = None
        return strings(decoded) if decoded is not None else [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in strings(v.get("text") if isinstance(v, dict) and "text" in v else v)]
    return []


def error_lines(text: str) -> list[str]:
    lines = text.splitlines()
    found: list[str] = []
    after_frames = False
    for k, printed in enumerate(lines):
        numbered = _NUMBERED.match(printed)
        line = printed[numbered.end() :] if numbered else printed
        stripped = line.strip()
        if _HEADER in line:
            after_frames = True
            continue
        if after_frames and stripped and not line[:1].isspace():
            after_frames = False
            if k and lines[k - 1][:1].isspace():  # the line that closes the frames
                found.append(stripped)
                continue
        if not stripped or _NOT.match(stripped):
            continue
        if _START.match(stripped) or any(p in stripped for p in _PHRASES):
            found.append(stripped)
    return found


def templates(messages: list[dict[str, Any]]) -> dict[str, str]:
    """Each distinct template of the tool outputs' error lines -> its first exemplar."""
    out: dict[str, str] = {}
    for m in messages:
        if m.get("role") != "tool":
            continue
        for text in strings(m.get("content")):
            for line in error_lines(text):
                out.setdefault(fold(line)[:PREFIX_CHARS], line)
    return out


def view_text(view: list[dict[str, Any]]) -> str:
    parts = [s for m in view for s in strings(m.get("content"))]
    parts += [json.dumps(c) for m in view for c in m.get("tool_calls") or []]
    return fold("\n".join(parts))


def measure(doc: dict[str, Any], window: int) -> tuple[int, int, float, float, float]:
    messages = doc["messages"]
    settings = Settings(context_window=window)
    result = compact(messages, settings, system_prompt=doc.get("system_prompt"), tools=doc.get("tools"), force=True)
    assert result.report.verified, result.report.failure
    view = list(result.messages)
    haystack = view_text(view)
    wanted = templates(messages)
    kept = sum(1 for t, line in wanted.items() if t in haystack or fold(redact_text(line))[:PREFIX_CHARS] in haystack)
    before = request_tokens(messages, doc.get("system_prompt"), doc.get("tools"))
    after = request_tokens(view, doc.get("system_prompt"), doc.get("tools"))
    index = next((m for m in view if str(m.get("content", "")).startswith("[ANCHOR INDEX")), None)
    index_share = len(str(index["content"])) / 4 / window if index else 0.0
    cut = 1 - after / before if before >= settings.trigger_tokens else float("nan")
    # the cut a compaction aims at is down to `target_after`: 1.00 here is the aim reached, more is promises
    aim = result.report.tokens_after / result.report.budget_tokens if result.report.budget_tokens else float("nan")
    return kept, len(wanted), cut, index_share, aim


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("paths", nargs="*", default=list(DEFAULT_PATHS))
    parser.add_argument("--window", type=int, action="append")
    args = parser.parse_args()
    files = session_files([Path(item) for item in args.paths])
    total_kept = total = 0
    worst = 1.0
    cuts: dict[str, list[float]] = {}  # by folder: the agent runs (corpus) and the Hermes files (samples)
    print(f"{'session':<44} {'window':>7} {'kept':>5} {'of':>4} {'share':>6} {'cut':>6} {'index':>6} {'÷aim':>5}")
    for window in args.window or [65_536, 32_768]:
        for path in files:
            doc = json.loads(path.read_text(encoding="utf-8"))
            kept, n, cut, index_share, aim = measure(doc, window)
            share = kept / n if n else 1.0
            worst = min(worst, share)
            total_kept, total = total_kept + kept, total + n
            if not math.isnan(cut):
                cuts.setdefault(path.parent.name, []).append(cut)
            print(
                f"{path.stem[8:]:<44} {window:>7} {kept:>5} {n:>4} {share:>6.1%} "
                f"{'' if math.isnan(cut) else f'{cut:.1%}':>6} {index_share:>6.1%} {aim:>5.2f}"
            )
    every = [cut for found in cuts.values() for cut in found]
    print(f"overall: {total_kept}/{total} = {total_kept / max(total, 1):.1%}; worst run {worst:.1%}; ", end="")
    print(f"mean cut above the trigger {_mean(every):.1%} ({len(every)} runs", end="")
    print("".join(f"; {folder} {_mean(found):.1%} of {len(found)}" for folder, found in cuts.items()) + ")")
    sys.stdout.flush()


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


if __name__ == "__main__":
    main()
