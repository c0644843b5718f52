"""The export takes what it is given: a session nested too deeply does not abort it, a half-written
one keeps the records of its last good version."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support import deep_list, tool_session, write_json


def test_one_deeply_nested_session_does_not_abort_the_export(tmp_path: Path) -> None:
    from timmy_compactor.export.run import export_sessions

    sessions = tmp_path / "sessions"
    sessions.mkdir()
    for k in range(3):
        write_json(sessions / f"session_ok{k}.json", {"session_id": f"ok{k}", "messages": tool_session(3)})
    bad = tool_session(3)
    bad[2]["content"] = deep_list(300)
    write_json(sessions / "session_bad.json", {"session_id": "bad", "messages": bad})
    summary = export_sessions(sessions, tmp_path / "out", redact=True, progress=False)
    assert summary.exported == 3
    assert [Path(p.file).name for p in summary.failed] == ["session_bad.json"]
    lines = (tmp_path / "out" / "conversations.jsonl").read_text().splitlines()
    assert len(lines) == 3


def test_a_full_export_keeps_the_records_of_a_half_written_session(tmp_path: Path) -> None:
    from timmy_compactor.export.run import export_sessions

    sessions = tmp_path / "sessions"
    sessions.mkdir()
    for k in range(2):
        write_json(sessions / f"session_s{k}.json", {"session_id": f"s{k}", "messages": tool_session(3)})
    out = tmp_path / "out"
    export_sessions(sessions, out, redact=True, progress=False)
    (sessions / "session_s1.json").write_text('{"session_id": "s1", "messages": [')  # half-written
    summary = export_sessions(sessions, out, redact=True, progress=False, full=True)
    assert "kept" in summary.failed[0].reason
    assert len((out / "conversations.jsonl").read_text().splitlines()) == 2
    manifest = json.loads((out / "manifest.json").read_text())
    assert len(manifest["sessions"]) == 2
