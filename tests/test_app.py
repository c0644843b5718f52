"""sidecar/app.py: the tasks and their schedules (every N minutes means every N minutes)."""

from __future__ import annotations

import itertools
from datetime import datetime, timedelta

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
