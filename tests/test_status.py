"""sidecar/status.py: `status`, what it says of the sidecar, the sources and the views, and `status --check`."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support import Sidecar, make_state_db, tool_session


def test_status_survives_a_snapshot_nested_too_deep_to_compare(tmp_path: Path) -> None:
    car = Sidecar(tmp_path, "sqlite", window=8_000)
    make_state_db(car.root / "hermes" / "state.db", "s1", tool_session(4))
    deep = "[" * 1_000 + "]" * 1_000  # orjson reads it (up to 1,024 levels); json.dumps cannot write it
    messages = tool_session(4)  # as many messages as the rows: the contents are compared
    messages[0]["content"] = "DEEP"
    (car.sessions / "session_s1.json").write_text(json.dumps({"messages": messages}).replace('"DEEP"', deep))
    status = car.cli("status", "--json")
    assert status.returncode == 0 and "Traceback" not in status.stderr, status.stderr
    assert json.loads(status.stdout)["sources"]["state_db"]["snapshots_of_these"]["absent"] == 1
