"""Session files at the edge: parsing, view naming and writing, provenance, and the real Hermes samples."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest

from tests.support import SAMPLE_NAMES, listing, sample_path, tool_session, user, write_session
from timmy_compactor.compactor import compact_file, restore_file
from timmy_compactor.config import Config
from timmy_compactor.core.pipeline import compact
from timmy_compactor.core.types import Settings
from timmy_compactor.sessions.files import (
    META_KEY,
    SessionError,
    build_view,
    parse_session,
    read_provenance,
    read_session,
    remove_view,
    write_view,
)
from timmy_compactor.sessions.names import is_view_name, view_path_for

FORCE = Config()


def hermes_doc(messages: list[dict]) -> dict:
    return {
        "session_id": "20261122_101500_abc123",
        "model": "hermes-4-14b",
        "base_url": "http://127.0.0.1:8080/v1",
        "platform": "cli",
        "session_start": "2026-11-22T10:15:00",
        "last_updated": "2026-11-22T10:45:00",
        "system_prompt": "You are Hermes.",
        "tools": [{"type": "function", "function": {"name": "terminal", "parameters": {}}}],
        "message_count": len(messages),
        "messages": messages,
    }


def long_session() -> list[dict]:
    return tool_session(30, output_lines=150)


def test_a_hermes_snapshot_parses_with_its_fields() -> None:
    data = json.dumps(hermes_doc([user("hi")])).encode()
    session = parse_session(Path("/x/session_abc.json"), data)
    assert session.shape == "object" and session.messages == [user("hi")]
    assert session.session_id == "20261122_101500_abc123"
    assert (session.model, session.base_url, session.system_prompt) == (
        "hermes-4-14b",
        "http://127.0.0.1:8080/v1",
        "You are Hermes.",
    )
    assert session.tools is not None and session.tools[0]["function"]["name"] == "terminal"
    assert session.sha256 == hashlib.sha256(data).hexdigest()


def test_a_bare_message_list_parses_and_takes_its_id_from_the_name() -> None:
    session = parse_session(Path("/x/session_42.json"), b'[{"role": "user", "content": "hi"}]')
    assert session.shape == "array" and session.document is None
    assert session.session_id == "42" and session.system_prompt is None and session.tools is None


def test_odd_field_types_read_as_absent() -> None:
    doc = {"messages": [], "system_prompt": 3, "tools": "x", "model": None, "session_id": 7}
    session = parse_session(Path("/x/session_z.json"), json.dumps(doc).encode())
    assert (session.system_prompt, session.tools, session.model, session.session_id) == (None, None, None, "z")


def test_view_names_never_match_session_files() -> None:
    raw = Path("/h/sessions/session_20261122_101500_abc123.json")
    assert view_path_for(raw) == Path("/h/sessions/compacted_session_20261122_101500_abc123.json")
    assert is_view_name(view_path_for(raw).name) and not is_view_name(raw.name)
    assert not view_path_for(raw).name.startswith("session_")


def test_a_view_is_refused_as_input(tmp_path: Path) -> None:
    raw = write_session(tmp_path / "session_v.json", hermes_doc(long_session()))
    compact_file(raw, FORCE, force=True)
    view = view_path_for(raw)
    with pytest.raises(SessionError, match="is a compacted view, not a raw session") as info:
        read_session(view)
    assert str(view) in str(info.value)
    renamed = tmp_path / "session_copy.json"
    shutil.copy(view, renamed)  # a view under a session name is still a view
    with pytest.raises(SessionError, match="compacted view"):
        read_session(renamed)


@pytest.mark.parametrize("mode", [0o600, 0o640, 0o644])
def test_the_view_gets_the_raw_files_mode_and_no_temp_file_is_left(tmp_path: Path, mode: int) -> None:
    raw = write_session(tmp_path / "session_m.json", hermes_doc(long_session()), mode=mode)
    outcome = compact_file(raw, FORCE, force=True)
    assert outcome.action == "written" and outcome.view_path == tmp_path / "compacted_session_m.json"
    assert os.stat(outcome.view_path).st_mode & 0o777 == mode
    assert sorted(listing(tmp_path)) == ["compacted_session_m.json", "session_m.json"]


def test_write_view_refuses_to_overwrite_the_raw(tmp_path: Path) -> None:
    raw = write_session(tmp_path / "session_r.json", long_session())
    session = read_session(raw)
    result = compact(session.messages, Settings(), force=True)
    before = raw.read_bytes()
    with pytest.raises(SessionError, match="refusing to overwrite the raw session"):
        write_view(session, result, {}, raw)
    assert raw.read_bytes() == before


def test_a_bare_list_view_keeps_its_shape_and_puts_provenance_beside_it(tmp_path: Path) -> None:
    raw = write_session(tmp_path / "session_list.json", long_session())
    compact_file(raw, FORCE, force=True)
    view = tmp_path / "compacted_session_list.json"
    assert isinstance(json.loads(view.read_text()), list)
    document, meta = read_provenance(view)
    assert document == json.loads(view.read_text())
    assert (
        meta["raw_file"] == "session_list.json" and meta["raw_sha256"] == hashlib.sha256(raw.read_bytes()).hexdigest()
    )
    assert restore_file(view, Config())[0] == json.loads(raw.read_text())
    assert remove_view(view) and not view.exists() and not (tmp_path / "compacted_session_list.meta.json").exists()
    assert not remove_view(view)


def test_read_provenance_errors_name_the_file(tmp_path: Path) -> None:
    missing = tmp_path / "compacted_session_none.json"
    with pytest.raises(SessionError, match="no such file"):
        read_provenance(missing)
    broken = tmp_path / "compacted_session_b.json"
    broken.write_text("{")
    with pytest.raises(SessionError, match=r"invalid JSON") as info:
        read_provenance(broken)
    assert str(broken) in str(info.value)
    plain = tmp_path / "compacted_session_p.json"
    plain.write_text('{"messages": []}')
    with pytest.raises(SessionError, match=f"no '{META_KEY}' record"):
        read_provenance(plain)


def test_build_view_keeps_every_other_key_and_records_provenance() -> None:
    doc = hermes_doc(long_session()) | {"future_key": {"x": [1, 2]}}
    session = parse_session(Path("/x/session_k.json"), json.dumps(doc).encode())
    result = compact(session.messages, Settings(context_window=8_000), force=True)
    view, provenance = build_view(session, result, {"engine_version": "t"})
    assert list(view) == [*doc, META_KEY]
    assert {k: v for k, v in view.items() if k not in ("messages", "message_count", META_KEY)} == {
        k: v for k, v in doc.items() if k not in ("messages", "message_count")
    }
    assert view["message_count"] == len(view["messages"]) == len(result.messages) < len(doc["messages"])
    assert provenance["sources"] == [list(s) for s in result.sources]
    assert provenance["raw_file"] == "session_k.json" and provenance["engine_version"] == "t"


@pytest.mark.parametrize("name", SAMPLE_NAMES)
def test_real_hermes_samples(tmp_path: Path, name: str) -> None:
    source = sample_path(name)
    raw = tmp_path / name
    shutil.copy(source, raw)
    raw.chmod(0o600)
    original = raw.read_bytes()
    outcome = compact_file(raw, FORCE, force=True)
    report = outcome.report
    assert report is not None and report.verified, outcome.reason
    assert outcome.action == "written" and report.tokens_after < report.tokens_before
    assert raw.read_bytes() == original
    view_path = tmp_path / f"compacted_{name}"
    assert outcome.view_path == view_path and view_path.stat().st_mode & 0o777 == 0o600
    view, doc = json.loads(view_path.read_text(encoding="utf-8")), json.loads(original)
    assert set(view) == set(doc) | {META_KEY}
    for key in doc.keys() - {"messages", "message_count"}:
        assert view[key] == doc[key], key
    assert view["message_count"] == len(view["messages"]) == report.messages_after
    assert [m for m in view["messages"] if m["role"] == "user"] == [m for m in doc["messages"] if m["role"] == "user"]
    assert view[META_KEY]["raw_sha256"] == hashlib.sha256(original).hexdigest()
    assert restore_file(view_path, Config())[0] == doc
    # written the way Hermes writes: indent=2, raw UTF-8
    text = view_path.read_text(encoding="utf-8")
    assert text.startswith('{\n  "session_id": ') and "\\u2014" not in text
