"""sidecar/app.py: the tasks and their schedules (every N minutes means that); writing training data is opt-in."""

from __future__ import annotations

import itertools
import json
from datetime import datetime, timedelta
from pathlib import Path

from tests.support_homes import write_default_config as write_config
from timmy_compactor.config import load_config
from timmy_compactor.sidecar.app import every


def test_every_90_minutes_is_every_90_minutes_not_hourly() -> None:
    due = every(90)
    start = datetime(2026, 11, 22, 0, 0)
    fired = [start + timedelta(minutes=m) for m in range(0, 24 * 60) if due(start + timedelta(minutes=m))]
    assert len(fired) == 16
    assert all((b - a) == timedelta(minutes=90) for a, b in itertools.pairwise(fired))
    assert [f.strftime("%H:%M") for f in fired[:3]] == ["00:00", "01:30", "03:00"]


def test_every_5_minutes_matches_the_crontab_it_replaces() -> None:
    due = every(5)
    start = datetime(2026, 11, 22, 10, 0)
    assert [m for m in range(60) if due(start + timedelta(minutes=m))] == list(range(0, 60, 5))


# ---------------------------------------------------------------- writing training data is opt-in


def test_writing_training_data_is_opt_in(tmp_path: Path) -> None:
    from timmy_compactor.config import Config
    from timmy_compactor.sidecar.app import make_app

    assert Config().export.enabled is False
    config_path, _ = write_config(tmp_path)
    app = make_app(load_config(config_path))
    export_dir = Path(app.config.export.dir).expanduser()
    assert app.periodic_export.call_local() == {"disabled": "export.enabled is false"}
    assert not export_dir.exists()
    data = json.loads(config_path.read_text())
    data["export"] = {"enabled": True, "dir": str(tmp_path / "export")}
    config_path.write_text(json.dumps(data))
    result = make_app(load_config(config_path)).periodic_export.call_local()
    assert "disabled" not in result and result["out_dir"] == str(tmp_path / "export")
    assert (tmp_path / "export" / "manifest.json").exists()
