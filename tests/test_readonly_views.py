"""A sessions folder the sidecar cannot write in (issue 32 item 8): the same failure reads as a repeat."""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog
from structlog.testing import capture_logs

from tests.support import Sidecar, tool_session, write_like_hermes
from timmy_compactor import logs as logs_module
from timmy_compactor.config import load_config
from timmy_compactor.sessions.names import view_path_for
from timmy_compactor.sidecar import work
from timmy_compactor.sidecar.records import Records


@contextlib.contextmanager
def read_only(folder: Path) -> Iterator[None]:
    """No file can be created in `folder`: its mode for a user, its immutable flag for root (whom a
    mode does not stop); skipped where neither holds."""
    if os.geteuid() != 0:
        folder.chmod(0o555)
        try:
            yield
        finally:
            folder.chmod(0o755)
        return
    if subprocess.run(["chattr", "+i", str(folder)], capture_output=True, check=False).returncode != 0:
        pytest.skip("root, and no immutable flag here: no folder is read-only to this process")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(folder)], capture_output=True, check=False)


def test_a_read_only_sessions_folder_is_one_error_then_debug_lines_with_no_temp_name(tmp_path: Path) -> None:
    car = Sidecar(tmp_path, "sqlite", window=8_000)
    config = load_config(car.config_path)
    records = Records(config.state_dir)
    raw = car.sessions / "session_ro.json"
    write_like_hermes(raw, {"session_id": "ro", "model": "m", "messages": tool_session(40)})
    logs_module.configure("json", "debug")  # the repeats' debug lines too (another test may have set info)
    try:
        with read_only(car.sessions), capture_logs() as logs:
            results = [work.process_path(raw, config, records) for _ in range(3)]
    finally:
        structlog.reset_defaults()
    assert [r.action for r in results] == ["write_failed"] * 3
    reasons = {r.reason for r in results}
    assert len(reasons) == 1, reasons  # the same failure, said the same way each time
    reason = reasons.pop() or ""
    assert ".tmp" not in reason and str(view_path_for(raw)) in reason, reason
    said = [(e["log_level"], e["error"]) for e in logs if e["event"] == "view_not_written"]
    assert said == [("error", reason), ("debug", reason), ("debug", reason)], said
    assert work.process_path(raw, config, records).action == "written"  # writable again: the view comes
