"""Homes for the tests that run the programs: a Config or compaction.yaml, the console script, their JSON lines."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.support import REPO
from timmy_compactor.config import Config, HueySection, ModelSection, SessionsSection


def sidecar_config(tmp_path: Path, sessions: Path, hermes_home: Path) -> Config:
    return Config(
        sessions=SessionsSection(dir=str(sessions), hermes_home=str(hermes_home)),
        model=ModelSection(context_window=8_000),
        huey=HueySection(state_dir=str(tmp_path / "state")),
    )


def write_config_of(tmp_path: Path, config: Config) -> Path:
    path = tmp_path / "compaction.yaml"
    path.write_text(
        json.dumps(
            {
                "sessions": {"dir": config.sessions.dir, "hermes_home": config.sessions.hermes_home},
                "model": {"context_window": config.model.context_window},
            }
        )
    )
    return path


def events(text: str) -> list[dict[str, Any]]:
    """The JSON log lines of a process's output (other lines skipped)."""
    out = []
    for line in text.splitlines():
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
    return out


def named(runs: list[subprocess.CompletedProcess[str]], event: str) -> list[dict[str, Any]]:
    return [e for run in runs for e in events(run.stderr) if e.get("event") == event]


def config_for(home: Path, tmp: Path, window: int | None = None) -> Config:
    return Config(
        model=ModelSection(context_window=window),
        sessions=SessionsSection(dir=str(home / "sessions"), hermes_home=str(home)),
        huey=HueySection(state_dir=str(tmp / "state")),
    )


def strict_events(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def write_default_config(root: Path, **huey: Any) -> tuple[Path, Path]:
    sessions = root / "hermes" / "sessions"
    sessions.mkdir(parents=True, exist_ok=True)
    path = root / "compaction.yaml"
    path.write_text(
        json.dumps(
            {
                "model": {"context_window": 20_000},
                "sessions": {"dir": str(sessions), "hermes_home": str(root / "hermes")},
                "huey": {"state_dir": str(root / "state"), **huey},
                "logging": {"format": "json"},
            }
        )
    )
    return path, sessions


def start_sidecar_sh(root: Path, config: Path, name: str) -> tuple[Any, Path]:
    import os
    import sys

    from tests.support import start_consumer_script

    log = root / f"{name}.log"
    env = {**os.environ, "TIMMY_COMPACTOR_CONFIG": str(config), "TIMMY_VENV": str(Path(sys.executable).parent.parent)}
    env.pop("TIMMY_WORKERS", None)
    return start_consumer_script(log, env), log


SCRIPT = REPO / "huey_consumer.sh"


VENV = Path(sys.executable).parent.parent


def write_config(root: Path, **huey: Any) -> tuple[Path, Path]:
    """`write_default_config` with the watcher's debounce at 50 ms (the scripts' tests wait less)."""
    return write_default_config(root, **{"debounce_ms": 50, **huey})


def script_env(config: Path | None = None, venv: Path = VENV, **extra: str) -> dict[str, str]:
    env = {**os.environ, "TIMMY_VENV": str(venv), "PYTHONUNBUFFERED": "1", **extra}
    for name in ("TIMMY_WORKERS", "TIMMY_LOG_LEVEL", "TIMMY_NO_WATCHER", "HERMES_HOME"):
        if name not in extra:
            env.pop(name, None)
    if config is not None:
        env["TIMMY_COMPACTOR_CONFIG"] = str(config)
    return env


def json_lines(log: Path) -> list[dict[str, Any]]:
    lines = []
    for line in log.read_text().splitlines():
        try:
            lines.append(json.loads(line))
        except ValueError:
            continue
    return [line for line in lines if isinstance(line, dict)]


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The console script, as a user runs it."""
    return subprocess.run(
        [str(VENV / "bin" / "timmy-compactor"), *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        env=env,
    )


def db_status(config: Config, session_id: str) -> tuple[Any, str]:
    """`status`' reading of one state.db session (its view's state, its snapshot's), found through
    the home's session sources as `status` finds it."""
    from timmy_compactor.sessions.names import file_id
    from timmy_compactor.sidecar import dblook
    from timmy_compactor.sidecar.status import session_status

    sources = dblook.picker(config, dblook.look_at_state_db(config, quiet=True))
    ref, _ = sources.find(file_id(session_id))
    assert ref is not None and ref.session_id == session_id, ref
    return session_status(sources, ref, config)
