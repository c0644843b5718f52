"""hermes/setup.py + cli.py: `hermes enable|disable|status`, leaving a Hermes home as they found it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from timmy_compactor.cli import main


def test_hermes_enable_on_a_config_that_is_not_a_mapping_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "config.yaml").write_text("- just\n- a list\n")
    assert main(["hermes", "enable", "--hermes-home", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("timmy-compactor: error: ") and err.count("\n") == 1 and "not a mapping" in err


def test_disable_restores_what_enable_changed_and_only_that(tmp_path: Path) -> None:
    pytest.importorskip("ruamel.yaml")
    from timmy_compactor.hermes.setup import RECORD_NAME, apply

    home = tmp_path / "hermes"
    home.mkdir()
    original = "# my Hermes\nmodel:\n  default: qwen-14b  # the local one\n  context_length: 131072\n"
    (home / "config.yaml").write_text(original)
    assert apply(home, enable=True)[0]
    enabled = (home / "config.yaml").read_text()
    assert "engine: timmy" in enabled and "write_json_snapshots: true" in enabled
    assert (home / RECORD_NAME).is_file()
    assert apply(home, enable=True) == (False, None)  # already enabled: nothing changes, the record stays
    assert apply(home, enable=False)[0]
    assert (home / "config.yaml").read_text() == original  # snapshots off again: enable turned them on
    assert not (home / RECORD_NAME).exists()

    # what the user had set before is kept, and a change the user made since enable is not undone
    (home / "config.yaml").write_text(
        "context:\n  engine: lcm\nplugins:\n  enabled: [other]\nsessions:\n  write_json_snapshots: true\n"
    )
    apply(home, enable=True)
    apply(home, enable=False)
    assert yaml_of(home) == {
        "context": {"engine": "lcm"},
        "plugins": {"enabled": ["other"]},
        "sessions": {"write_json_snapshots": True},
    }
    (home / "config.yaml").write_text("sessions:\n  write_json_snapshots: false\n")
    apply(home, enable=True)
    text = (home / "config.yaml").read_text().replace("engine: timmy", "engine: mine")
    (home / "config.yaml").write_text(text)
    apply(home, enable=False)
    assert yaml_of(home) == {"context": {"engine": "mine"}, "sessions": {"write_json_snapshots": False}}


def yaml_of(home: Path) -> Any:
    import yaml

    return yaml.safe_load((home / "config.yaml").read_text())


def test_hermes_status_creates_nothing_at_the_path_given(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.support import listing

    typo = tmp_path / "hermse"
    assert main(["hermes", "status", "--hermes-home", str(typo)]) == 2
    assert "no Hermes home there" in capsys.readouterr().err
    assert not typo.exists()
    pytest.importorskip("hermes_cli")
    home = tmp_path / "hermes"
    home.mkdir()
    (home / "config.yaml").write_text("model:\n  default: x\n")
    before = listing(home)
    assert main(["hermes", "status", "--hermes-home", str(home)]) == 1  # not enabled
    assert listing(home) == before and sorted(p.name for p in home.iterdir()) == ["config.yaml"]
    assert main(["hermes", "enable", "--hermes-home", str(home)]) == 0  # the loader in the copy sees it
    capsys.readouterr()
    before = listing(home)
    assert main(["hermes", "status", "--hermes-home", str(home)]) == 0
    assert "ACTIVE" in capsys.readouterr().out
    assert listing(home) == before


def test_hermes_status_says_whether_the_engine_can_keep_its_raw_logs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("hermes_cli")
    home = tmp_path / "hermes"
    home.mkdir()
    (home / "config.yaml").write_text("model:\n  default: x\n")
    config = tmp_path / "compaction.yaml"
    for state, writable in ((tmp_path / "state", True), (tmp_path / "blocker" / "state", False)):
        config.write_text(json.dumps({"huey": {"state_dir": str(state)}}))
        (tmp_path / "blocker").write_text("a file where a directory would be")  # ENOTDIR, for root too
        main(["hermes", "status", "--hermes-home", str(home), "--json", "--config", str(config)])
        shown = json.loads(capsys.readouterr().out)
        assert shown["raw_log_dir"] == str(state / "hermes-engine") and shown["raw_log_writable"] is writable
        assert not state.exists()  # checking creates nothing
