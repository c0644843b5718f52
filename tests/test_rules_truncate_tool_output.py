"""Rule 2: long outputs keep 10 + 5 lines, `[...truncated {n} lines...]` and the cut error lines."""

from __future__ import annotations

import json

from tests.support import assistant, call, middle_draft, padding_turns, terminal, tool, user
from timmy_compactor.core.pipeline import compact
from timmy_compactor.core.rules import truncate_tool_output
from timmy_compactor.core.rules.truncate_tool_output import truncate_text
from timmy_compactor.core.types import Settings


def rows(n: int) -> list[str]:
    return [f"row {i}" for i in range(n)]


def test_first_ten_last_five_and_the_marker() -> None:
    out = truncate_text("\n".join(rows(100)), 500).splitlines()
    assert out == [*rows(100)[:10], "[...truncated 85 lines...]", *rows(100)[95:]]


def test_error_lines_of_the_cut_region_are_kept_in_order_after_the_marker() -> None:
    lines = rows(100)
    lines[40] = "E   AssertionError: expected 3, got 4"
    lines[60] = "fatal: not a git repository"
    lines[70] = "ValueError: bad row 70"
    lines[72] = "Traceback (most recent call last):"  # a header alone says nothing of what failed
    lines[74] = "    raise ValueError(row)  # source code that mentions an error is not one"
    out = truncate_text("\n".join(lines), 500).splitlines()
    assert out[:10] == lines[:10] and out[-5:] == lines[-5:]
    assert out[10:14] == ["[...truncated 82 lines...]", lines[40], lines[60], lines[70]]
    assert lines[72] not in out and lines[74] not in out


def test_at_most_twenty_cut_error_lines_the_first_one_always() -> None:
    lines = rows(200)
    for i in range(20, 150, 5):  # 26 error lines in the cut region
        lines[i] = f"ERROR: item {i} broke"
    out = truncate_text("\n".join(lines), 500).splitlines()
    assert out[11] == "ERROR: item 20 broke"
    assert sum(1 for line in out if line.startswith("ERROR: item")) == 20
    assert "[...6 more error lines...]" in out
    assert out[10] == f"[...truncated {185 - 20} lines...]"


def test_short_output_is_untouched() -> None:
    text = "\n".join(rows(40))
    assert truncate_text(text, len(text)) == text
    assert truncate_text("a\nb", 500) == "a\nb"


def test_a_single_enormous_line_is_cut_by_characters() -> None:
    line = "head-" + "x" * 5_000_000 + "-tail"
    out = truncate_text(line, 500)
    assert len(out) < 1_000
    assert out.startswith("head-xxx") and out.endswith("xxx-tail")
    kept = len(out) - len(out[out.index("[...") : out.index("...]") + 4])
    assert f"[...truncated {len(line) - kept} chars...]" in out


def test_a_few_long_lines_are_each_cut() -> None:
    text = "\n".join(["short", "y" * 10_000, "z" * 10_000])
    out = truncate_text(text, 500).splitlines()
    assert out[0] == "short" and len(out) == 3
    assert all(len(line) < 500 for line in out)
    assert out[1].startswith("yyy") and "[...truncated" in out[1]


def test_an_error_line_cut_by_characters_keeps_its_start() -> None:
    error = "ValueError: " + "v" * 5_000
    lines = [*rows(30), error, *rows(30)]
    out = truncate_text("\n".join(lines), 500)
    assert error[:240] in out


def test_json_results_stay_json_and_keep_their_shape() -> None:
    output = "\n".join(rows(200)) + "\nTraceback (most recent call last):\nValueError: x"
    body = terminal(output, exit_code=1)
    messages = [assistant("", call("c1", "terminal", command="make")), tool("c1", body)]
    draft, counts = truncate_tool_output.apply(middle_draft(messages), Settings())
    assert counts == {"truncate_tool_output": 1}
    decoded = json.loads(draft.middle[1].message["content"])
    assert list(decoded) == ["output", "exit_code", "error"]
    assert decoded["exit_code"] == 1 and decoded["error"] is None
    assert "[...truncated 187 lines...]" in decoded["output"] and decoded["output"].endswith("ValueError: x")
    assert draft.middle[1].sources == (1,) and draft.middle[0].message is messages[0]


def test_long_json_lists_keep_first_ten_last_five_and_items_with_errors() -> None:
    matches = [{"path": f"src/m{i}.py", "line": i, "content": f"value {i}"} for i in range(300)]
    matches[150]["content"] = "RuntimeError: boom"
    matches[160]["content"] = "raise RuntimeError('boom')  # code that mentions an error: a search hit"
    body = json.dumps({"total_count": 300, "matches": matches}, separators=(",", ":"))
    out = json.loads(truncate_tool_output.shorten_content(body, 500))
    assert out["total_count"] == 300
    assert out["matches"][:10] == matches[:10] and out["matches"][-5:] == matches[-5:]
    assert out["matches"][10:12] == ["[...truncated 284 items...]", matches[150]]


def test_an_output_that_would_not_get_shorter_is_left_alone() -> None:
    # compact JSON whose every leaf is short: re-encoding would only add spaces
    compact_json = json.dumps({"a": ["ab"] * 15, "b": "c" * 40, "exit_code": 1}, separators=(",", ":"))
    messages = [assistant("", call("c1", "terminal", command="x")), tool("c1", compact_json)]
    draft, counts = truncate_tool_output.apply(middle_draft(messages), Settings(max_tool_output_chars=50))
    assert counts == {} and draft.middle[1].message is messages[1]
    # 16 lines whose only cut line is an error line: nothing would be removed
    lines = rows(16)
    lines[11] = "fatal: bad object"
    text = "\n".join(lines)
    assert truncate_text(text, 50) == text


def test_mini_swe_agent_output_keeps_its_returncode() -> None:
    body = "<returncode>1</returncode>\n<output>\n" + "\n".join(rows(300)) + "\nE   assert 1 == 2\n</output>"
    out = truncate_text(body, 500)
    assert out.startswith("<returncode>1</returncode>\n<output>\n") and out.endswith("</output>")


def test_only_tool_messages_are_truncated() -> None:
    long_text = "\n".join(rows(300))
    messages = [assistant(long_text), tool("c1", [{"type": "text", "text": long_text}, {"type": "image_url"}])]
    draft, counts = truncate_tool_output.apply(middle_draft(messages), Settings())
    assert counts == {"truncate_tool_output": 1}
    assert draft.middle[0].message is messages[0]
    parts = draft.middle[1].message["content"]
    assert "[...truncated 285 lines...]" in parts[0]["text"] and parts[1] == {"type": "image_url"}


def test_failed_outputs_are_cut_in_the_middle_but_not_in_the_tail() -> None:
    body = terminal("\n".join(rows(300)) + "\nfatal: broken", exit_code=1)
    step = [assistant("", call("c1", "terminal", command="make")), tool("c1", body)]
    late = [assistant("", call("c2", "terminal", command="make all")), tool("c2", body)]  # not a rerun
    messages = [user("go"), assistant("ok"), *step, *padding_turns(6), user("again"), *late]
    result = compact(messages, Settings(target_after=None, context_window=8_000, protect_last_n_turns=1), force=True)
    assert result.report.verified, result.report.failure
    assert result.report.rules["truncate_tool_output"] == 1
    cut = json.loads(result.messages[3]["content"])["output"]
    assert "[...truncated 286 lines...]" in cut and cut.endswith("row 299\nfatal: broken")
    assert result.messages[-1] is messages[-1]
