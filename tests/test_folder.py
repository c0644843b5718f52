"""sidecar/folder.py: the sessions folder; one that cannot be read, as the sweep, status, export and watcher see it."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any, ClassVar

import pytest

from tests.support import (
    VENV_BIN,
    Sidecar,
    load_sample,
    make_state_db,
    session_variant,
    tool_session,
    wait_for,
    write_like_hermes,
)
from tests.support_homes import strict_events as events


class NobodyCar(Sidecar):
    """A sidecar whose commands run as the user nobody (root reads any folder: chmod 000 stops only others)."""

    nobody: ClassVar[list[str]] = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]

    def cli(self, *argv: str) -> Any:
        import subprocess

        command = [*self.nobody, str(VENV_BIN / "timmy-compactor"), *argv, "--config", str(self.config_path)]
        env = {**self.env, "HOME": str(self.root)}
        return subprocess.run(command, env=env, cwd="/", capture_output=True, text=True, timeout=120, check=False)

    def start_watcher(self) -> Any:
        import subprocess

        log = self.root / "watcher.log"
        self.logs["watcher"] = log
        command = [*self.nobody, str(VENV_BIN / "timmy-compactor"), "watch", "--config", str(self.config_path)]
        with log.open("ab") as out:
            proc = subprocess.Popen(
                command,
                env={**self.env, "HOME": str(self.root)},
                cwd="/",
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.procs["watcher"] = proc
        return proc


def nobody_car() -> NobodyCar:
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to run the sidecar as a user a chmod 000 folder stops")
    root = Path(tempfile.mkdtemp(prefix="timmy-nobody-"))
    os.chmod(root, 0o755)
    car = NobodyCar(root / "car", "sqlite", window=8_000)
    probe = car.cli("--version")
    if probe.returncode != 0:  # a checkout in a 0700 folder: nobody cannot run its venv
        shutil.rmtree(root, ignore_errors=True)
        pytest.skip("the user nobody cannot run this checkout's venv")
    for folder in (car.root, car.root / "hermes", car.sessions):
        os.chown(folder, 65534, 65534)
    return car


def test_an_unreadable_sessions_folder_is_one_line_per_sweep_and_status_reports_the_rest() -> None:
    car = nobody_car()
    try:
        write_like_hermes(car.sessions / "session_snap.json", session_variant(load_sample(), "snap"))
        os.chown(car.sessions / "session_snap.json", 65534, 65534)
        make_state_db(car.root / "hermes" / "state.db", "s1", tool_session(150))
        first = car.cli("sweep", "--now", "--json")
        assert json.loads(first.stdout)["written"] == 2, first.stderr
        views = sorted(p.name for p in car.sessions.glob("compacted_*"))
        assert len(views) == 2
        os.chmod(car.sessions, 0)
        try:
            runs = [car.cli("sweep", "--now"), car.cli("sweep", "--now")]
            status = car.cli("status", "--json")
            human = car.cli("status")
            health = car.cli("status", "--check")
            export = car.cli("export", "--out", str(car.root / "export"))
        finally:
            os.chmod(car.sessions, 0o755)
        for run in runs:  # the sweep could not do its work: non-zero, like export and status --check (issue 33)
            assert run.returncode == 1 and "Traceback" not in run.stderr, run.stderr
            lines = [e for e in events(run.stderr) if e["event"] == "sessions_dir_unreadable"]
            assert len(lines) == 1, run.stderr  # one line per sweep
            assert lines[0]["sessions_dir"] == str(car.sessions) and "chmod u+rx" in lines[0]["hint"]
            assert "view_removed" not in run.stderr
            assert f"{car.sessions}: the sessions folder cannot be read (Permission denied)" in run.stdout
        assert sorted(p.name for p in car.sessions.glob("compacted_*")) == views  # views kept
        data = json.loads(status.stdout)
        assert status.returncode == 0 and "Traceback" not in status.stderr, status.stderr
        assert "Permission denied" in data["sessions_dir_error"] and str(car.sessions) in data["sessions_dir_error"]
        assert data["sources"]["state_db"]["sessions"] == 1 and data["sources"]["state_db"]["usable"]
        assert data["sidecar"]["queue_error"] is None and data["sidecar"]["last_sweep"] is not None
        assert human.stdout.count("sessions folder cannot be read") == 1, human.stdout
        assert "state.db 1 session(s)" in human.stdout
        assert health.returncode == 3  # no sidecar runs here; the folder is said too
        assert f"unhealthy: {car.sessions}: the sessions folder cannot be read" in health.stdout
        assert export.returncode == 2 and "Traceback" not in export.stderr
        assert export.stderr.startswith(f"timmy-compactor: error: {car.sessions}: cannot read the sessions folder")
        assert "writing the export" not in export.stderr
    finally:
        shutil.rmtree(car.root.parent, ignore_errors=True)


def test_the_watcher_does_not_claim_watching_an_unreadable_folder_and_starts_once_it_can() -> None:
    car = nobody_car()
    try:
        os.chmod(car.sessions, 0)
        try:
            car.start_watcher()
            log = car.logs["watcher"]
            assert wait_for(lambda: "sessions_dir_unreadable" in log.read_text(), timeout=60), car.log_text()
            time.sleep(1)
            said = events(log.read_text())
            assert [e["event"] for e in said].count("sessions_dir_unreadable") == 1
            assert "watching" not in [e["event"] for e in said]
            assert "Traceback" not in log.read_text()
        finally:
            os.chmod(car.sessions, 0o755)
        assert wait_for(lambda: '"watching"' in log.read_text(), timeout=30), car.log_text()
        assert [e["event"] for e in events(log.read_text())].count("sessions_dir_unreadable") == 1
    finally:
        car.stop_all()
        shutil.rmtree(car.root.parent, ignore_errors=True)
