"""export/: the records a trainer reads (a trainer's keys only, integers beyond 64 bits, ids by their file_id)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support import Sidecar, add_db_session, make_state_db, tool_session
from timmy_compactor.sessions.names import file_id


def test_the_export_names_a_hostile_id_by_its_file_id(tmp_path: Path) -> None:
    from timmy_compactor.export import export_sessions

    car = Sidecar(tmp_path, "sqlite", window=8_000)
    hostile = "x/../../../escaped\nFAKE log line"
    make_state_db(car.root / "hermes" / "state.db", hostile, tool_session(4))
    add_db_session(car.root / "hermes" / "state.db", "blob", [{"role": "user", "content": b"\x00\x01"}])
    summary = export_sessions(car.sessions, tmp_path / "out", hermes_home=car.root / "hermes", progress=False)
    assert summary.exported == 1 and [p.file for p in summary.failed] == ["state.db#blob"]
    (record,) = [json.loads(line) for line in (tmp_path / "out" / "conversations.jsonl").read_text().splitlines()]
    assert record["id"] == hostile  # the data keeps the real id
    assert record["source"]["file"] == f"state.db#{file_id(hostile)}"  # names never carry it raw
