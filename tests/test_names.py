"""sessions/names.py: THE naming rule, any id made one safe file name, paths kept inside their folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import load_sample, session_variant, write_like_hermes
from tests.support_homes import sidecar_config
from timmy_compactor.export import export_sessions
from timmy_compactor.sessions.names import is_session_name, session_id_of, session_name
from timmy_compactor.sidecar import folder, sweep, work
from timmy_compactor.sidecar.records import Records
from timmy_compactor.sidecar.watcher import Debouncer, SessionEventHandler


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("session_abc.json", True),
        ("session_.json", False),
        ("compacted_session_abc.json", False),
        (".session_abc_x1y2.tmp", False),
        ("session_abc.json.tmp", False),
        ("sessions.json", False),
        ("request_dump_1.json", False),
        ("session_abc.jsonl", False),
    ],
)
def test_the_naming_rule(name: str, expected: bool) -> None:
    assert is_session_name(name) is expected


def test_ids_and_names_round_trip() -> None:
    assert session_id_of(Path("/x/session_20261122_ab.c.json")) == "20261122_ab.c"
    assert session_name("20261122_ab") == "session_20261122_ab.json"
    assert session_id_of(session_name("20261122_ab")) == "20261122_ab"
    # issue 21: an id that is not plain gets the name Hermes' snapshot writer gives it (names.file_id)
    assert session_name("20261122_ab.c") == "session_20261122_ab_c_8e7cba72c9e1.json"
    assert session_id_of("chat.json") == "chat"  # any other file: its stem


def test_session_dot_json_without_an_id_is_no_session_anywhere(tmp_path: Path) -> None:
    sessions = tmp_path / "hermes" / "sessions"
    sessions.mkdir(parents=True)
    write_like_hermes(sessions / "session_.json", session_variant(load_sample(), "empty-id"))
    write_like_hermes(sessions / "session_ok.json", session_variant(load_sample(), "ok"))
    config = sidecar_config(tmp_path, sessions, tmp_path / "hermes")
    records = Records(config.state_dir)
    # the sidecar
    assert work.process_session(sessions / "session_.json", config, records).action == "refused"
    assert [p.name for p in folder.session_files(sessions)] == ["session_ok.json"]
    assert [p.name for p in sweep.stale_sessions(config, records)] == ["session_ok.json"]
    # the watcher
    touched: list[str] = []
    debouncer = Debouncer(0.01, touched.append)
    handler = SessionEventHandler(debouncer)

    class Moved:
        is_directory = False
        event_type = "moved"

        def __init__(self, dest: Path) -> None:
            self.dest_path = str(dest)

    handler.on_any_event(Moved(sessions / "session_.json"))  # type: ignore[arg-type]
    handler.on_any_event(Moved(sessions / "session_ok.json"))  # type: ignore[arg-type]
    assert debouncer.pending() == 1
    # the export
    summary = export_sessions(sessions, tmp_path / "out")
    assert (summary.seen, summary.exported) == (1, 1)
    # the evaluation
    from timmy_compactor.compare.cli import _session_paths

    assert [p.name for p in _session_paths([str(sessions)], sessions)] == ["session_ok.json"]
