"""session_export through a real Huey consumer (SqliteHuey): export, edit one session, export again."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from huey import SqliteHuey
from huey.consumer import Consumer

from tests.support import REPO, Sidecar, load_sample, session_variant, wait_for, write_like_hermes
from timmy_compactor.config import Config, ExportSection, SessionsSection
from timmy_compactor.export import export_lock, run_export_task

pytestmark = pytest.mark.slow


def lines_by_session(path: Path) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for line in path.read_text().splitlines():
        out.setdefault(json.loads(line)["session_key"], []).append(line)
    return out


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[tuple[SqliteHuey, Any, Path, Path]]:
    """A SqliteHuey of our own with a task that runs run_export_task, and a real consumer on it
    (thread workers, started without replacing the test process' signal handlers)."""
    sessions, out = tmp_path / "sessions", tmp_path / "export"
    sessions.mkdir()
    config = Config(sessions=SessionsSection(dir=str(sessions)), export=ExportSection(dir=str(out)))
    huey = SqliteHuey("export-test", filename=str(tmp_path / "huey.db"))

    @huey.task()
    def session_export() -> dict[str, Any]:
        return run_export_task(config).as_dict()

    consumer = Consumer(huey, workers=2, periodic=False, initial_delay=0.01, max_delay=0.05, check_worker_health=False)
    consumer._set_signal_handlers = lambda: None  # type: ignore[method-assign]
    consumer.start()
    try:
        yield huey, session_export, sessions, out
    finally:
        consumer.stop(graceful=True)


def test_the_consumer_exports_then_reexports_only_the_edited_session(
    setup: tuple[SqliteHuey, Any, Path, Path],
) -> None:
    _huey, session_export, sessions, out = setup
    sample = load_sample()
    for name in ("x", "y", "z"):
        write_like_hermes(sessions / f"session_{name}.json", session_variant(sample, name))
    first = session_export().get(blocking=True, timeout=30)
    assert (first["exported"], first["pairs"], first["failed"]) == (3, 3, [])
    before = lines_by_session(out / "conversations.jsonl")
    again = session_export().get(blocking=True, timeout=30)
    assert (again["exported"], again["unchanged"], again["bytes_written"]) == (0, 3, 0)
    write_like_hermes(sessions / "session_y.json", session_variant(sample, "y2"))
    third = session_export().get(blocking=True, timeout=30)
    assert (third["exported"], third["unchanged"]) == (1, 2)
    after = lines_by_session(out / "conversations.jsonl")
    assert after["x"] == before["x"] and after["z"] == before["z"]
    assert after["y"] != before["y"] and "[y2]" in after["y"][0]


def test_overlapping_runs_skip_instead_of_racing(setup: tuple[SqliteHuey, Any, Path, Path]) -> None:
    _huey, session_export, sessions, out = setup
    write_like_hermes(sessions / "session_x.json", session_variant(load_sample(), "x"))
    out.mkdir()
    (out / ".export.lock").touch()
    with export_lock(out) as acquired:  # an export "in progress" elsewhere (the CLI, another worker)
        assert acquired
        results = [session_export() for _ in range(2)]
        assert [r.get(blocking=True, timeout=30)["locked"] for r in results] == [True, True]
    assert session_export().get(blocking=True, timeout=30)["exported"] == 1


def test_through_the_projects_tasks_module_and_huey_consumer(tmp_path: Path) -> None:
    """The lead's `tasks.session_export`, run by the real `huey_consumer` (process workers)."""
    car = Sidecar(tmp_path, "sqlite")
    config = json.loads(car.config_path.read_text())
    config["export"] = {"dir": str(tmp_path / "export")}
    car.config_path.write_text(json.dumps(config))
    sample = load_sample()
    for name in ("x", "y"):
        write_like_hermes(car.sessions / f"session_{name}.json", session_variant(sample, name))
    manifest = tmp_path / "export" / "manifest.json"

    def enqueue_export() -> None:
        subprocess.run(
            [sys.executable, "-c", "import tasks; tasks.session_export()"],
            cwd=REPO,
            env=car.env,
            check=True,
            capture_output=True,
        )

    def exported_y() -> str:
        lines = lines_by_session(tmp_path / "export" / "conversations.jsonl").get("y", [])
        return lines[0] if lines else ""

    try:
        car.start("consumer")
        enqueue_export()
        assert wait_for(manifest.exists, timeout=30), car.log_text()
        before = lines_by_session(tmp_path / "export" / "conversations.jsonl")
        first_manifest = manifest.read_bytes()
        write_like_hermes(car.sessions / "session_y.json", session_variant(sample, "y2"))
        time.sleep(0.05)
        enqueue_export()
        # the consumer may still be running an export that began before y changed: wait for the one that read it
        assert wait_for(lambda: "[y2]" in exported_y(), timeout=30), car.log_text()
        assert manifest.read_bytes() != first_manifest
        after = lines_by_session(tmp_path / "export" / "conversations.jsonl")
        assert after["x"] == before["x"]
        assert after["y"] != before["y"] and "[y2]" in after["y"][0]
    finally:
        car.stop_all()
