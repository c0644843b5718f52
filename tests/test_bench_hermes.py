"""bench/bench_hermes.py's `--trigger T[/A[/R]]` arms: each value reaches the engine's config file."""

from __future__ import annotations

import argparse
import runpy
from pathlib import Path

import pytest
import yaml

from tests.hermes_scenario import Arm
from tests.support import REPO
from timmy_compactor.config import load_config
from timmy_compactor.core.types import Settings

BENCH = runpy.run_path(str(REPO / "bench" / "bench_hermes.py"), run_name="bench")


def arms(trigger: str) -> list[Arm]:
    return BENCH["arms"](argparse.Namespace(arms="compressor,timmy", trigger=trigger))


def test_each_trigger_value_is_an_arm_named_by_what_it_sets() -> None:
    chosen = arms("0.6,0.6/0.4,0.6/0.4/0.15,0.6//0.2")
    assert [a.name for a in chosen] == [
        "compressor",
        "timmy",
        "timmy 0.60",
        "timmy 0.60/0.40",
        "timmy 0.60/0.40/0.15",
        "timmy 0.60/default/0.20",
    ]


def test_the_arm_config_file_sets_the_tail_budget_and_leaves_the_rest_default(tmp_path: Path) -> None:
    files = {}
    for arm in arms("0.6/0.4/0.15,0.6//0.2,0.6/0.4")[2:]:  # after compressor and timmy
        path = tmp_path / f"{len(files)}.yaml"
        path.write_text(yaml.safe_dump(arm.config()))
        files[arm.name] = load_config(path, env={})
    base = files["timmy 0.60/0.40"].compaction
    assert files["timmy 0.60/0.40/0.15"].compaction.max_tail_ratio == 0.15
    assert base.max_tail_ratio == Settings().max_tail_ratio
    assert files["timmy 0.60/0.40/0.15"].compaction.target_after == 0.4
    assert files["timmy 0.60/default/0.20"].compaction.max_tail_ratio == 0.2
    assert all(c.hermes.trigger_threshold == 0.6 for c in files.values())


@pytest.mark.parametrize("value", ["0.6/0.4/0.2/0.1", "/0.4"])
def test_a_malformed_trigger_value_is_refused(value: str) -> None:
    with pytest.raises(SystemExit):
        arms(value)
