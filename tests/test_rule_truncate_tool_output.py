"""Rule 2: long outputs keep 10 + 5 lines, `[...truncated {n} lines...]` and the cut error lines."""

from __future__ import annotations

import json

from helpers_core import assistant, call, middle_draft, terminal, tool
from timmy_compactor.core.rules import truncate_tool_output
from timmy_compactor.core.rules.truncate_tool_output import truncate_text
from timmy_compactor.core.types import Settings


def test_first_ten_last_five_and_the_marker() -> None:
    text = "\n".join(f"line {i}" for i in range(100))
    out = truncate_text(text, 500).splitlines()
    assert out[:10] == [f"line {i}" for i in range(10)]
    assert out[10] == "[...truncated 85 lines...]"
    assert out[11:] == [f"line {i}" for i in range(95, 100)]


def test_error_lines_of_the_cut_region_are_kept() -> None:
    lines = [f"ok {i}" for i in range(100)]
    lines[40] = "E   AssertionError: expected 3, got 4"
    lines[60] = "fatal: not a git repository"
    out = truncate_text("\n".join(lines), 500).splitlines()
    assert out[10] == "[...truncated 83 lines...]"
    assert out[11:13] == [lines[40], lines[60]]


def test_short_output_is_untouched() -> None:
    assert truncate_text("a\nb", 500) == "a\nb"


def test_a_single_enormous_line_is_cut_by_characters() -> None:
    line = "x" * 5_000_000
    out = truncate_text(line, 500)
    assert len(out) < 1_000
    assert "[...truncated" in out and "chars...]" in out


def test_json_results_stay_json_and_only_failed_or_uncollapsed_outputs_are_cut() -> None:
    output = "\n".join(f"row {i}" for i in range(200)) + "\nTraceback (most recent call last):\nValueError: x"
    body = terminal(output, exit_code=1)
    messages = [assistant("", call("c1", "terminal", command="make")), tool("c1", body)]
    draft, counts = truncate_tool_output.apply(middle_draft(messages), Settings())
    assert counts == {"truncate_tool_output": 1}
    decoded = json.loads(draft.middle[1].message["content"])
    assert decoded["exit_code"] == 1
    assert "[...truncated" in decoded["output"] and decoded["output"].endswith("ValueError: x")
    assert len(draft.middle[1].message["content"]) < len(body) / 3
