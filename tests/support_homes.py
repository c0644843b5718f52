"""Homes for the tests that run the programs: a Config or compaction.yaml, the console script, their JSON lines."""

from __future__ import annotations

import json
from pathlib import Path

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
