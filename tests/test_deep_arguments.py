"""Issue 32, item 8: nesting of any depth is read iteratively or cut with a note. Tool-call arguments
nested 990+ deep (a JSON string the engine decodes) failed the compaction with RecursionError; a
session holding them now compacts and exports through the CLI, and a document nested 100,000 deep is
one line naming the file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support import tool_session, write_json
from timmy_compactor.cli import main
from timmy_compactor.core.redact import redact_value
from timmy_compactor.core.text import text_of

DEPTHS = (900, 5_000)


def deep_arguments(depth: int) -> str:
    return '{"command": "ls", "x": ' + "[" * depth + '"/srv/app/deep.txt"' + "]" * depth + "}"


def deep_session(tmp_path: Path, depth: int) -> Path:
    messages = tool_session(40)
    calls = [m for m in messages if m.get("tool_calls")]
    for message in calls[:3]:
        message["tool_calls"][0]["function"]["arguments"] = deep_arguments(depth)
    calls[3]["content"] = [{"type": "text", "text": deep_arguments(depth)}]
    for message in [m for m in messages if m.get("role") == "tool"][:3]:
        output = json.dumps({"output": "line\n" * 3_000, "detail": "DEEP"})
        message["content"] = output.replace('"DEEP"', deep_arguments(depth))
    return write_json(tmp_path / f"session_deep{depth}.json", {"session_id": f"deep{depth}", "messages": messages})


@pytest.mark.parametrize("depth", DEPTHS)
def test_deep_arguments_compact_through_the_cli(tmp_path: Path, depth: int, capsys: pytest.CaptureFixture[str]) -> None:
    raw = deep_session(tmp_path, depth)
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"compaction": {"redact_credentials": True}}))
    assert main(["compact", str(raw), "--force", "--json", "--config", str(config)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["verified"], report
    assert "Recursion" not in str(report.get("failure"))
    view = json.loads((tmp_path / f"compacted_session_deep{depth}.json").read_text(encoding="utf-8"))
    assert len(view["messages"]) < len(json.loads(raw.read_text())["messages"])


@pytest.mark.parametrize("depth", DEPTHS)
def test_deep_arguments_export_through_the_cli(tmp_path: Path, depth: int) -> None:
    sessions = tmp_path / "sessions"
    sessions.mkdir()
    deep_session(sessions, depth)
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"sessions": {"dir": str(sessions)}, "export": {"dir": str(tmp_path / "out")}}))
    assert main(["export", "--config", str(config)]) == 0
    records = (tmp_path / "out" / "conversations.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(records) == 1
    assert json.loads(records[0])["messages"][1]["tool_calls"][0]["function"]["arguments"] == deep_arguments(depth)


def test_a_document_nested_100000_deep_is_one_line_naming_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    raw = tmp_path / "session_abyss.json"
    raw.write_text('{"session_id": "abyss", "messages": [' + "[" * 100_000 + "]" * 100_000 + "]}")
    assert main(["compact", str(raw), "--force"]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "session_abyss.json" in err[0] and "Traceback" not in err[0], err


def test_walks_over_values_take_any_depth() -> None:
    """`redact_value` and `text_of` walk a value nested far past the recursion limit."""
    deep: list[object] = ["api_key=" + "Ab1" * 10]
    for _ in range(10_000):
        deep = [deep]
    redacted = redact_value(deep)
    for _ in range(10_000):
        redacted = redacted[0]
    assert redacted[0].startswith("api_key=credential_ref:")
    assert "api_key=" in text_of([{"type": "text", "text": deep}])


def test_arguments_nested_1000_deep_in_the_file_compact_through_the_cli(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Not a string but the document itself (the reader takes up to 1,024 levels): the message is read
    through a shallow stand-in and put back as it was."""
    messages = tool_session(40)
    call = next(m for m in messages if m.get("tool_calls"))["tool_calls"][0]
    call["function"]["arguments"] = "DEEP"
    deep = "[" * 1_000 + '{"path": "/srv/app/deep.txt"}' + "]" * 1_000
    text = json.dumps({"session_id": "deepdoc", "messages": messages}).replace('"DEEP"', deep, 1)
    raw = tmp_path / "session_deepdoc.json"
    raw.write_text(text)
    assert main(["compact", str(raw), "--force", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["verified"]
